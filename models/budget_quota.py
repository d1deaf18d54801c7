"""Budget → quota: the GPUs a team may hold from now to its budget period's end, per cluster and flavor.

A ``[[budgets]]`` entry scoped to teams with ``enforce`` other than ``warn`` becomes, on each cluster the
team runs on, a number of GPUs per flavor (GPU model × capacity type): the money left in the period
(amount − spent) ÷ (the flavor's $ per GPU-hour on that cluster × the hours left in the period), rounded
down — the GPUs the team can hold without interruption to the period's end and stay within the amount.

* The money left is shared among the clusters in proportion to the team's recent spend on each (one
  cluster: all of it), so that two clusters never spend the same dollar twice.
* Flavors are filled cheapest first: committed capacity the team already pays for (a savings plan,
  reserved instances) is free up to its size, then paid flavors by their rate, spot before on-demand at
  an equal rate. A flavor with a known capacity (on-prem node groups) is never given more than it holds.
* ``cap`` sets the quota; ``hold`` does and adds Kueue's ``stopPolicy: Hold`` once the money is gone
  (amount ≤ spent: admitted work finishes, nothing new is admitted); ``drain`` uses ``HoldAndDrain``.
  A quota is never below the GPUs running work holds now, unless the policy is ``drain``.

Money is Decimal throughout; the function is pure (the inputs come from jobs/enforce/inputs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any

POLICIES = ("warn", "cap", "hold", "drain")
STOP_POLICIES = {"hold": "Hold", "drain": "HoldAndDrain"}
CAPACITY_ORDER = {"spot": 0, "on-demand": 1, "onprem": 2}
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Flavor:
    """One GPU model × capacity type on one cluster, as the team sees it."""

    gpu_model: str
    capacity: str  # spot | on-demand | onprem
    rate_usd: Decimal | None  # $ per GPU-hour on this cluster (None: never billed here, unknown)
    committed_gpus: int = 0  # capacity the team already pays for (free up to this size)
    capacity_gpus: int | None = None  # the most the cluster holds (on-prem node groups); None: unbounded
    running_gpus: int = 0  # what the team's work holds now (the newest hour of data)

    @property
    def spot(self) -> bool:
        return self.capacity == "spot"


@dataclass(frozen=True)
class ClusterDemand:
    cluster: str
    flavors: tuple[Flavor, ...]
    spend_share: Decimal = Decimal(1)  # the team's share of its recent spend on this cluster


@dataclass(frozen=True)
class QuotaInputs:
    budget_name: str
    team: str
    policy: str  # POLICIES
    amount: Decimal
    spent: Decimal
    hours_left: Decimal
    burn_usd_per_hour: Decimal | None  # the scope's spend per hour now (None: unknown)
    period: str  # 2026-10, 2026-Q4
    clusters: tuple[ClusterDemand, ...]
    reserved_usd: Decimal = Decimal(0)  # spend no scheduler stops (lines without GPUs) to the period's end


@dataclass(frozen=True)
class FlavorQuota:
    flavor: Flavor
    gpus: int
    money_gpus: int  # what the money alone buys (before the floor of running work)
    reason: str


@dataclass(frozen=True)
class ClusterQuota:
    cluster: str
    flavors: tuple[FlavorQuota, ...]
    stop_policy: str | None  # None | Hold | HoldAndDrain
    money_usd: Decimal  # the share of the money left given to this cluster
    reason: str

    @property
    def gpus(self) -> int:
        return sum(f.gpus for f in self.flavors)


@dataclass(frozen=True)
class TeamQuota:
    inputs: QuotaInputs
    clusters: tuple[ClusterQuota, ...] = field(default=())

    @property
    def remaining_usd(self) -> Decimal:
        return self.inputs.amount - self.inputs.spent

    @property
    def exhausted(self) -> bool:
        return self.inputs.amount <= self.inputs.spent

    def to_dict(self) -> dict[str, Any]:
        i = self.inputs
        return {
            "budget": i.budget_name,
            "team": i.team,
            "policy": i.policy,
            "period": i.period,
            "amount_usd": str(i.amount),
            "spent_usd": str(i.spent),
            "remaining_usd": str(self.remaining_usd),
            "forecast_usd": None if forecast(i) is None else str(forecast(i)),
            "burn_usd_per_hour": None if i.burn_usd_per_hour is None else str(i.burn_usd_per_hour.quantize(CENT)),
            "hours_left": str(i.hours_left),
            "reserved_usd": str(i.reserved_usd.quantize(CENT)),
            "clusters": [
                {
                    "cluster": c.cluster,
                    "money_usd": str(c.money_usd),
                    "stop_policy": c.stop_policy,
                    "gpus": c.gpus,
                    "reason": c.reason,
                    "flavors": [
                        {
                            "gpu_model": f.flavor.gpu_model,
                            "capacity": f.flavor.capacity,
                            "rate_usd_per_gpu_hour": None if f.flavor.rate_usd is None else str(f.flavor.rate_usd),
                            "gpus": f.gpus,
                            "money_gpus": f.money_gpus,
                            "running_gpus": f.flavor.running_gpus,
                            "committed_gpus": f.flavor.committed_gpus,
                            "reason": f.reason,
                        }
                        for f in c.flavors
                    ],
                }
                for c in self.clusters
            ],
        }


def forecast(inputs: QuotaInputs) -> Decimal | None:
    """The period-end spend at the current burn: spent + burn × hours left."""
    if inputs.burn_usd_per_hour is None:
        return None
    return (inputs.spent + inputs.burn_usd_per_hour * inputs.hours_left).quantize(CENT)


def fill_order(flavors: tuple[Flavor, ...] | list[Flavor]) -> list[Flavor]:
    """Paid flavors cheapest first, spot before on-demand at an equal rate; unpriced ones last."""
    return sorted(
        flavors,
        key=lambda f: (f.rate_usd is None, f.rate_usd or 0, CAPACITY_ORDER.get(f.capacity, 9), f.gpu_model),
    )


def _floor(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_FLOOR))


def _money_gpus(cluster: ClusterDemand, money: Decimal, hours: Decimal) -> dict[Flavor, tuple[int, str]]:
    """GPUs per flavor the money buys: committed first (free), then paid, cheapest first."""
    out: dict[Flavor, tuple[int, str]] = {}
    for f in cluster.flavors:
        free = min(f.committed_gpus, f.capacity_gpus) if f.capacity_gpus is not None else f.committed_gpus
        out[f] = (max(free, 0), f"{free} committed (already paid)" if free > 0 else "")
    left = money
    for f in fill_order(cluster.flavors):
        held, why = out[f]
        room = None if f.capacity_gpus is None else max(f.capacity_gpus - held, 0)
        if f.rate_usd is None or f.rate_usd <= 0:
            extra = room or 0  # no price known here: only capacity bounds it (0 when unbounded)
            note = "no price per GPU-hour known on this cluster" + (
                f", up to the node groups' {f.capacity_gpus}" if f.capacity_gpus is not None else ": nothing bought"
            )
        elif hours <= 0 or left <= 0:
            extra, note = 0, "no money left" if left <= 0 else "the period is over"
        else:
            afford = _floor(left / (f.rate_usd * hours))
            extra = afford if room is None else min(afford, room)
            left -= extra * f.rate_usd * hours
            note = f"${left + extra * f.rate_usd * hours:,.2f} ÷ (${f.rate_usd}/GPU-h × {hours} h) → {afford}"
            if room is not None and afford > room:
                note += f", capped at the cluster's {f.capacity_gpus}"
        out[f] = (held + extra, "; ".join(p for p in (why, note) if p))
    return out


def cluster_quota(inputs: QuotaInputs, cluster: ClusterDemand, money: Decimal) -> ClusterQuota:
    exhausted = inputs.amount <= inputs.spent
    bought = _money_gpus(cluster, max(money, Decimal(0)), inputs.hours_left)
    flavors = []
    for f in fill_order(cluster.flavors):
        gpus, why = bought[f]
        held = gpus
        if inputs.policy != "drain" and f.running_gpus > gpus:
            held = f.running_gpus
            why += f"; kept at the {f.running_gpus} GPU(s) running work holds (policy {inputs.policy} never evicts)"
        flavors.append(FlavorQuota(f, held, gpus, why))
    stop = STOP_POLICIES.get(inputs.policy) if exhausted else None
    reason = describe(inputs, money)
    if stop:
        reason += f"; money gone: stopPolicy {stop}"
    return ClusterQuota(cluster.cluster, tuple(flavors), stop, money.quantize(CENT), reason)


def describe(inputs: QuotaInputs, money: Decimal | None = None) -> str:
    fc = forecast(inputs)
    text = (
        f"budget {inputs.budget_name} ({inputs.policy}): ${inputs.amount:,.2f} for {inputs.period}, "
        f"${inputs.spent:,.2f} spent, forecast "
        + (f"${fc:,.2f} at ${inputs.burn_usd_per_hour:,.2f}/h" if fc is not None else "unknown (no burn rate)")
        + f", {inputs.hours_left} h left"
    )
    if inputs.reserved_usd > 0:
        text += f"; ${inputs.reserved_usd:,.2f} kept for spend without GPUs at its current burn"
    if money is not None and len(inputs.clusters) > 1:
        text += f"; ${money:,.2f} of the ${max(inputs.amount - inputs.spent, Decimal(0)):,.2f} left on this cluster"
    return text


def team_quota(inputs: QuotaInputs) -> TeamQuota:
    """The quotas of one team under one budget, per cluster it runs on."""
    if inputs.policy not in POLICIES:
        raise ValueError(f"budget {inputs.budget_name!r}: enforce must be one of {', '.join(POLICIES)}")
    remaining = max(inputs.amount - inputs.spent - inputs.reserved_usd, Decimal(0))
    total_share = sum((c.spend_share for c in inputs.clusters), Decimal(0))
    out = []
    for c in inputs.clusters:
        money = remaining * c.spend_share / total_share if total_share > 0 else remaining / len(inputs.clusters)
        out.append(cluster_quota(inputs, c, money))
    return TeamQuota(inputs, tuple(out))
