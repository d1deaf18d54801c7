"""`gpufinops enforce simulate --budget NAME --month YYYY-MM`: the month replayed hour by hour under the
budget's policy, as `serve` would have enforced it.

The month's GPU demand is the team's billed GPU lines, per resource and unit (an instance, an on-prem GPU
slot). A continuous run of a unit is a sequence of workloads of ``workload_hours`` hours (a job that
checkpoints and is resubmitted): Kueue admits a workload whole, when its flavor's quota has room, and an
admitted workload runs to its end (``cap``, ``hold``) — ``drain`` evicts running work down to the quota.
Once per load interval the quotas are recomputed by the same function `serve` calls
(models/budget_quota.py), from the spend the replay has reached (fresh data assumed: a bill that arrives
later makes a real cap bite later). A workload that does not fit waits in the queue (delayed) and runs
when the quota allows; what has not run by the month's end is refused. Spend the schedulers cannot stop
(storage, network: lines without GPUs) is spent as billed and kept aside from the GPUs' money at its
current burn.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from gpufinops.jobs.enforce import inputs
from gpufinops.models.budget_quota import ClusterDemand, Flavor, QuotaInputs, team_quota
from gpufinops.models.budgets import Budget
from gpufinops.warehouse.queries import enforcement as eq

FlavorKey = tuple[str, str, str]  # (cluster, GPU model, capacity)
CENT = Decimal("0.01")


@dataclass
class Workload:
    flavor: FlavorKey
    gpus: int
    due: int  # the hour index it was asked for
    costs: list[Decimal]  # the billed cost of each of its hours
    started: int | None = None
    ran: int = 0  # hours run

    @property
    def left(self) -> int:
        return len(self.costs) - self.ran


@dataclass
class Replay:
    budget: str
    team: str
    policy: str
    month: str
    amount: Decimal
    interval_hours: int
    workload_hours: int
    spend_without: Decimal = Decimal(0)
    spend_with: Decimal = Decimal(0)
    fixed_spend: Decimal = Decimal(0)  # lines without GPUs, spent either way
    gpu_hours_asked: int = 0
    gpu_hours_run: int = 0
    gpu_hours_delayed: int = 0  # run, but after the hour they were asked for
    delay_hours: int = 0  # summed over the delayed workloads
    gpu_hours_refused: int = 0  # not run by the month's end
    workloads_evicted: int = 0  # drain: taken off running work (back in the queue)
    first_bite: datetime | None = None
    recomputations: int = 0
    over_budget_at: datetime | None = None  # without enforcement: the hour spend passed the amount
    daily: list[tuple[date, Decimal, Decimal]] = field(default_factory=list)  # (day, without, with), cumulative

    def lines(self) -> list[str]:
        pct = lambda v: f"{v / self.amount * 100:.0f} %"  # noqa: E731
        return [
            f"budget {self.budget} ({self.policy}, team {self.team}): ${self.amount:,.2f} for {self.month}",
            f"spend without enforcement: ${self.spend_without:,.2f} ({pct(self.spend_without)} of the budget)"
            + (f", past the budget on {self.over_budget_at:%Y-%m-%d %H:00} UTC" if self.over_budget_at else ""),
            f"spend with enforcement:    ${self.spend_with:,.2f} ({pct(self.spend_with)} of the budget; "
            f"${self.fixed_spend:,.2f} of it without GPUs, which no scheduler stops)",
            f"GPU-hours asked {self.gpu_hours_asked:,}, run {self.gpu_hours_run:,}: "
            f"{self.gpu_hours_delayed:,} delayed (by {self.delay_hours:,} workload-hours in all), "
            f"{self.gpu_hours_refused:,} refused (not run by the month's end)"
            + (f"; {self.workloads_evicted:,} running workload(s) evicted" if self.workloads_evicted else ""),
            "first hour the cap bit: "
            + (f"{self.first_bite:%Y-%m-%d %H:00} UTC" if self.first_bite else "never (the demand fit the budget)"),
            f"quotas recomputed {self.recomputations} times (every {self.interval_hours} h, as serve does after "
            f"each load); workloads of {self.workload_hours} h; fresh data assumed",
        ]

    def to_dict(self) -> dict:
        return {
            k: (str(v) if isinstance(v, Decimal) else v.isoformat() if isinstance(v, datetime) else v)
            for k, v in self.__dict__.items()
            if k != "daily"
        }


def month_bounds(month: str) -> tuple[datetime, datetime]:
    try:
        start = datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"--month {month!r}: not a month (YYYY-MM)") from None
    end = datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _demand(con, budget: Budget, team: str, start: datetime, end: datetime, workload_hours: int, clusters):
    """(workloads, fixed cost per hour index, rates per flavor, hours)."""
    hours = int((end - start).total_seconds() // 3600)
    rows = eq.month_lines(con, [team], start, end).to_dicts()
    fixed: dict[int, Decimal] = defaultdict(Decimal)
    units: dict[tuple, dict[int, tuple[int, Decimal]]] = defaultdict(dict)
    flavor_of: dict[tuple, FlavorKey] = {}
    cost_by: dict[FlavorKey, Decimal] = defaultdict(Decimal)
    gpu_hours_by: dict[FlavorKey, int] = defaultdict(int)
    for r in rows:
        h = int((r["hour"] - start).total_seconds() // 3600)
        cost = Decimal(str(r["cost"]))
        if r["gpus"] <= 0:
            fixed[h] += cost
            continue
        cluster = clusters.of_resource.get(r["resource_id"])
        key: FlavorKey = (cluster.name if cluster else str(r["provider_name"]), r["gpu_model"], r["capacity"])
        unit = (r["resource_id"], r["unit"])
        flavor_of[unit] = key
        gpus, before = units[unit].get(h, (0, Decimal(0)))
        units[unit][h] = (max(gpus, r["gpus"]), before + cost)
        cost_by[key] += cost
        gpu_hours_by[key] += r["gpus"]
    workloads: list[tuple[tuple, int, list[tuple[int, Decimal]]]] = []
    for unit, by_hour in units.items():
        for h in sorted(by_hour):
            if (
                workloads
                and workloads[-1][0] == unit
                and workloads[-1][1] + len(workloads[-1][2]) == h
                and len(workloads[-1][2]) < workload_hours
            ):
                workloads[-1][2].append(by_hour[h])
            else:
                workloads.append((unit, h, [by_hour[h]]))
    out = [
        Workload(flavor_of[unit], max(g for g, _c in parts), h, [c for _g, c in parts]) for unit, h, parts in workloads
    ]
    rates = {k: (cost_by[k] / gpu_hours_by[k]).quantize(Decimal("0.0001")) for k in cost_by if gpu_hours_by[k]}
    return sorted(out, key=lambda w: (w.due, w.flavor)), fixed, rates, hours


def _quotas(replay: Replay, budget: Budget, rates, running, fixed_burn, asked_cost, h, hours):
    """The quota per flavor and the stop policy, as serve computes them at hour ``h``."""
    hours_left = Decimal(hours - h)
    by_cluster: dict[str, list[Flavor]] = defaultdict(list)
    for key, rate in sorted(rates.items()):
        by_cluster[key[0]].append(Flavor(key[1], key[2], rate, running_gpus=running.get(key, 0)))
    clusters = tuple(
        ClusterDemand(name, tuple(flavors), asked_cost.get(name, Decimal(0)) or Decimal(1))
        for name, flavors in by_cluster.items()
    )
    reserved = fixed_burn * hours_left
    qi = QuotaInputs(
        budget.name,
        replay.team,
        replay.policy,
        budget.amount,
        replay.spend_with,
        hours_left,
        None,
        replay.month,
        clusters,
        reserved,
    )
    quota = team_quota(qi)
    found = {(c.cluster, f.flavor.gpu_model, f.flavor.capacity): f.gpus for c in quota.clusters for f in c.flavors}
    stop = next((c.stop_policy for c in quota.clusters if c.stop_policy), None)
    return found, stop


def replay(con, budget: Budget, month: str, *, policy: str | None, interval_hours: int, workload_hours: int, settings):
    """The month replayed under ``budget`` (its first team: a quota is a team's)."""
    start, end = month_bounds(month)
    team = budget.scope.teams[0]
    fleet = inputs.load_fleet(con, settings)
    workloads, fixed, rates, hours = _demand(con, budget, team, start, end, workload_hours, fleet.clusters)
    result = Replay(budget.name, team, policy or budget.enforce, month, budget.amount, interval_hours, workload_hours)
    due = deque(workloads)
    queue: list[Workload] = []
    running: list[Workload] = []
    recent: deque[tuple[Decimal, Decimal]] = deque(maxlen=24)  # (fixed, asked) cost of the last 24 hours
    asked_by_cluster: dict[str, Decimal] = defaultdict(Decimal)
    quota: dict[FlavorKey, int] = {}
    stop = None
    for h in range(hours):
        at = start + timedelta(hours=h)
        while due and due[0].due == h:
            w = due.popleft()
            queue.append(w)
            result.gpu_hours_asked += w.gpus * len(w.costs)
            asked_by_cluster[w.flavor[0]] += sum(w.costs, Decimal(0))
        if h % interval_hours == 0:
            held: dict[FlavorKey, int] = defaultdict(int)
            for w in running:
                held[w.flavor] += w.gpus
            fixed_burn = sum((f for f, _a in recent), Decimal(0)) / max(len(recent), 1)
            quota, stop = _quotas(result, budget, rates, held, fixed_burn, asked_by_cluster, h, hours)
            result.recomputations += 1
            if result.policy == "drain":
                _evict(running, queue, quota, result, at)
        _admit(queue, running, quota, stop, h, result, at)
        spent_gpu = Decimal(0)
        for w in running:
            spent_gpu += w.costs[w.ran]
            result.gpu_hours_run += w.gpus
            if w.started is not None and w.started > w.due:
                result.gpu_hours_delayed += w.gpus
            w.ran += 1
        running = [w for w in running if w.left > 0]
        hour_fixed = fixed.get(h, Decimal(0))
        result.fixed_spend += hour_fixed
        result.spend_with += spent_gpu + hour_fixed
        recent.append((hour_fixed, spent_gpu))
        result.spend_without += hour_fixed + _asked_cost(workloads, h)
        if result.over_budget_at is None and result.spend_without > budget.amount:
            result.over_budget_at = at
    for w in queue + running:
        result.gpu_hours_refused += w.gpus * w.left
    result.spend_with = result.spend_with.quantize(CENT)
    result.spend_without = result.spend_without.quantize(CENT)
    result.fixed_spend = result.fixed_spend.quantize(CENT)
    return result


def _asked_cost(workloads: list[Workload], h: int) -> Decimal:
    return sum((w.costs[h - w.due] for w in workloads if w.due <= h < w.due + len(w.costs)), Decimal(0))


def _admit(queue, running, quota, stop, h, result, at) -> None:
    """BestEffortFIFO: each queued workload in order, admitted when its flavor has room; none under a stop."""
    held: dict[FlavorKey, int] = defaultdict(int)
    for w in running:
        held[w.flavor] += w.gpus
    waiting = []
    for w in queue:
        if stop is None and held[w.flavor] + w.gpus <= quota.get(w.flavor, 0):
            held[w.flavor] += w.gpus
            w.started = h
            if h > w.due:
                result.delay_hours += h - w.due
            running.append(w)
        else:
            waiting.append(w)
            if result.first_bite is None:
                result.first_bite = at
    queue[:] = waiting


def _evict(running, queue, quota, result, at) -> None:
    """drain: running work beyond the quota goes back to the queue, newest first."""
    held: dict[FlavorKey, int] = defaultdict(int)
    for w in running:
        held[w.flavor] += w.gpus
    for w in sorted(running, key=lambda w: -(w.started or 0)):
        if held[w.flavor] > quota.get(w.flavor, 0):
            held[w.flavor] -= w.gpus
            running.remove(w)
            queue.insert(0, w)
            result.workloads_evicted += 1
            if result.first_bite is None:
                result.first_bite = at
