"""Ground truth of the second fleet (:mod:`simulator.eval_fleet`), from its own laws, for every machine.

What is true comes from the generator: which hours a machine does work, the request rate a replica
serves and the published throughput of its benchmark on every GPU model, the memory its model holds
at each precision, the prices at the end of the window (after their mid-window change), the spot
market's real level and interruption rate. What is *worth a finding* is the product's policy, the
same thresholds docs/models.md documents (they are settings, not formulas): utilisation ceiling 60 %
on a target, memory × 1.2, a move cuts ≥ 25 % and ≥ $25/month, idle runs of ≥ 3 h, spot needs
checkpoints (or runs ≤ 2 h) and a ≥ 20 % expected saving, a commitment covers machines busy every hour.

Savings are monthly at the prices in force at the end of the window (730.5 h a month), for as long
as the machine keeps its current schedule: a machine that stopped saves nothing more.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import numpy as np

from gpufinops.simulator import eval_laws as laws
from gpufinops.simulator.eval_laws import HOURS_PER_MONTH

CEILING_PCT, HEADROOM, MIN_CUT, MIN_USD = 60.0, 1.2, Decimal("0.25"), Decimal("25")
IDLE_RUN_HOURS, SPOT_MIN_SAVING, RESTART_MIN, DEFAULT_CHECKPOINT_MIN = 3, 0.2, 20, 60
RECENT_HOURS = 14 * 24  # the recent regime a truth is read from (as the rightsizing lookback)
COMMIT_HOURS = 30 * 24
MONEY = Decimal("0.01")
INFERENCE = ("online_inference", "batch_inference", "inference", "serving")


def _active(m) -> bool:
    """Still running at the end of the window (a stopped machine saves nothing more)."""
    return bool(m.running[-48:].any()) and not m.box.schedule.startswith("until")


def _duty(m) -> float:
    """Share of future hours it will run: its recent share for schedules that pause, else all of them."""
    if not _active(m):
        return 0.0
    return float(m.running[-RECENT_HOURS:].mean()) if m.box.schedule in ("workhours", "bursts") else 1.0


def _rate_now(m) -> Decimal:
    hours = np.flatnonzero(m.running)
    if m.box.pricing == "spot":
        recent = hours[-7 * 24 :]
        return sum((m.rates[h] for h in recent), Decimal(0)) / len(recent)
    return m.rates[int(hours[-1])]


def monthly_now(m) -> Decimal:
    return _rate_now(m) * Decimal(str(_duty(m))) * HOURS_PER_MONTH


def _list_now(prices: dict, provider: str, instance_type: str) -> Decimal:
    law = prices[(provider, instance_type)]
    return law.list_usd(len(law.spot_ratio) - 1)


def _recent_samples(m) -> np.ndarray:
    keep = np.repeat(m.running, laws.SAMPLES_PER_HOUR)
    keep[: -RECENT_HOURS * laws.SAMPLES_PER_HOUR] = False
    return keep


def _item(kind: str, m, saving: Decimal, **extra) -> dict:
    return {
        "kind": kind,
        "resource_id": m.resource_id,
        "machine": m.box.name,
        "provider": m.box.provider,
        "region": m.region,
        "instance_type": m.box.instance_type,
        "monthly_savings_usd": str(saving.quantize(MONEY)),
        **extra,
    }


def idle(m) -> dict | None:
    """Idle hours = running hours without work, in runs of ≥ 3 h; their share of the recent hours run."""
    if not _active(m):
        return None
    running = np.flatnonzero(m.running)[-RECENT_HOURS:].tolist()
    idle_hours = run = 0
    for i, h in enumerate(running):
        if m.work[h] or (i and h != running[i - 1] + 1):  # work, or a gap in billing, ends a run
            idle_hours += run if run >= IDLE_RUN_HOURS else 0
            run = 0
        run += 0 if m.work[h] else 1
    idle_hours += run if run >= IDLE_RUN_HOURS else 0
    share = idle_hours / len(running)
    saving = monthly_now(m) * Decimal(str(share))
    return _item("idle_gpu", m, saving, idle_share=round(share, 4)) if share and saving >= MIN_USD else None


def _cheaper(
    m, prices: dict, *, gpu_model: str | None = None, counts=None, min_cut: Decimal = MIN_CUT
) -> list[tuple[Decimal, str, laws.Offer]]:
    """Catalogue types in the machine's provider (one region each) cheaper by ``min_cut``, cheapest first;
    of the same GPU count unless ``gpu_model``/``counts`` choose."""
    current = _list_now(prices, m.box.provider, m.box.instance_type)
    out = []
    for (provider, it), offer in laws.CATALOGUE.items():
        price = _list_now(prices, provider, it)
        if provider != m.box.provider or price >= current * (1 - min_cut):
            continue
        if (gpu_model and offer.gpu_model != gpu_model) or (counts and offer.gpu_count not in counts):
            continue
        if not gpu_model and offer.gpu_count != m.gpu_count:
            continue
        out.append((price, it, offer))
    return sorted(out, key=lambda o: (o[0], o[1]))


def gpu_count(m, prices: dict) -> dict | None:
    """Spare GPUs by law (``partial:k``; shards hold memory, so none are spare) on a billable smaller type."""
    kind, _, arg = m.box.profile.partition(":")
    if kind != "partial" or not _active(m):
        return None
    needed = int(arg)
    options = _cheaper(m, prices, gpu_model=m.gpu_model, counts=range(needed, m.gpu_count), min_cut=Decimal(0))
    if not options:
        return None
    price, it, offer = options[0]
    saving = monthly_now(m) * (1 - price / _list_now(prices, m.box.provider, m.box.instance_type))
    return _item("gpu_count", m, saving, target_instance_type=it, gpus_needed=needed) if saving >= MIN_USD else None


def _fits(m, prices: dict, precision: str) -> dict | None:
    """The cheapest same-count type on which the service, at ``precision``, fits memory and the ceiling."""
    service = laws.SERVICES[m.box.profile.split(":")[1]]
    demand = m.demand[_recent_samples(m)]
    mem = laws.memory_gib(service) if precision == service.precision else laws.fp16_memory_gib(service)
    for price, it, offer in _cheaper(m, prices):
        if mem * HEADROOM > laws.HARDWARE[offer.gpu_model].memory_total_mib / 1024:
            continue
        util = laws.p95(100 * demand / laws.rate_on(service, offer.gpu_model, precision))
        if util <= CEILING_PCT:
            saving = monthly_now(m) * (1 - price / _list_now(prices, m.box.provider, m.box.instance_type))
            return {
                "target_instance_type": it,
                "target_gpu_model": offer.gpu_model,
                "target_util_p95": round(util, 1),
                "saving": saving,
            }
    return None


def _movable(m) -> bool:
    return m.box.profile.startswith("serve:") and m.box.pricing != "committed" and _active(m) and m.box.metrics


def gpu_type(m, prices: dict) -> dict | None:
    if not _movable(m):
        return None
    hit = _fits(m, prices, m.box.precision)
    if hit is None or hit["saving"] < MIN_USD:
        return None
    return _item("gpu_type", m, hit.pop("saving"), **hit)


def quantization(m, prices: dict) -> dict | None:
    if not _movable(m) or m.box.precision != "fp32" or m.box.workload not in INFERENCE:
        return None
    if _fits(m, prices, "fp32") is not None:
        return None  # fits as it is: gpu_type's finding
    hit = _fits(m, prices, "fp16")
    if hit is None or hit["saving"] < MIN_USD:
        return None
    return _item("quantization", m, hit.pop("saving"), proposed_precision="fp16", **hit)


def _spot_ratio_now(m, prices: dict) -> float:
    law = prices[(m.box.provider, m.box.instance_type)]
    if m.box.provider == "aws":
        return float(law.spot_ratio[-7 * 24 :].mean())
    last = len(law.spot_ratio) - 1
    return float(law.spot_usd(last, "gcp") / law.list_usd(last))


def _longest_run(m) -> int:
    longest = run = 0
    for on in m.running.tolist():
        run = run + 1 if on else 0
        longest = max(longest, run)
    return longest


def spot_eligible(m) -> bool:
    """The workload tolerates interruptions: not interactive, checkpoints or runs ≤ 2 h, not single-replica serving."""
    box = m.box
    if box.pricing != "on_demand" or not _active(m) or box.workload == "notebook":
        return False
    if box.profile.startswith("serve:"):
        return False  # ≤ 2 replicas per type in this fleet: no on-demand floor
    return box.checkpointing or _longest_run(m) <= 2


def spot_mix(m, prices: dict) -> dict | None:
    if not spot_eligible(m):
        return None
    law = prices[(m.box.provider, m.box.instance_type)]
    lost_h = ((m.box.checkpoint_interval_min or DEFAULT_CHECKPOINT_MIN) / 2 + RESTART_MIN) / 60
    rework = law.interruptions_per_month * lost_h / float(HOURS_PER_MONTH)
    fraction = 1 - _spot_ratio_now(m, prices) * (1 + rework)
    saving = monthly_now(m) * Decimal(str(fraction))
    if fraction < SPOT_MIN_SAVING or saving < MIN_USD:
        return None
    return _item(
        "spot_mix",
        m,
        saving,
        spot_ratio=round(_spot_ratio_now(m, prices), 4),
        interruptions_per_month=round(law.interruptions_per_month, 3),
    )


def commitments(machines: list, prices: dict) -> list[dict]:
    """Per (type, team): on-demand Google Cloud machines busy every hour of the last 30 days, not spot
    candidates, with a CUD price: saving = machines × (on-demand − CUD) × 730.5 h."""
    groups: dict[tuple, list] = {}
    for m in machines:
        if m.box.provider == "gcp" and m.box.pricing == "on_demand":
            groups.setdefault((m.box.instance_type, m.box.team), []).append(m)
    out = []
    for (it, team), members in sorted(groups.items()):
        law = prices[("gcp", it)]
        last = len(law.spot_ratio) - 1
        steady = [
            m
            for m in members
            if _active(m) and m.work[-COMMIT_HOURS:].all() and m.running[-COMMIT_HOURS:].all() and not spot_eligible(m)
        ]
        if not steady or law.cud_usd(last) is None:
            continue
        saving = len(steady) * (law.list_usd(last) - law.cud_usd(last)) * HOURS_PER_MONTH
        out.append(
            {
                "kind": "commitment",
                "resource_id": min(m.resource_id for m in steady),
                "resource_ids": sorted(m.resource_id for m in members),
                "machines": len(steady),
                "machine": ",".join(sorted(m.box.name for m in steady)),
                "provider": "gcp",
                "region": laws.GCP_REGION,
                "instance_type": it,
                "team": team,
                "monthly_savings_usd": str(saving.quantize(MONEY)),
            }
        )
    return out


def ground_truth(machines: list, prices: dict, start: datetime, final_rows: dict, *, seed: int, days: int) -> dict:
    planted = []
    for m in machines:
        for fn in (
            idle,
            lambda m: gpu_count(m, prices),
            lambda m: gpu_type(m, prices),
            lambda m: quantization(m, prices),
            lambda m: spot_mix(m, prices),
        ):
            item = fn(m)
            if item is not None:
                planted.append(item)
    planted += commitments(machines, prices)
    positives = {(p["kind"], p["resource_id"]) for p in planted}
    lookalikes = [
        {
            "kind": m.box.role[0].removeprefix("not "),
            "resource_id": m.resource_id,
            "machine": m.box.name,
            "why": m.box.role[1],
        }
        for m in machines
        if m.box.role and m.box.role[0].startswith("not ")
    ]
    roles = [
        {"kind": m.box.role[0], "resource_id": m.resource_id, "machine": m.box.name, "why": m.box.role[1]}
        for m in machines
        if m.box.role and not m.box.role[0].startswith("not ")
    ]
    totals = {p: str(sum((r["EffectiveCost"] for r in rows), Decimal(0))) for p, rows in final_rows.items()}
    return {
        "generator": "gpufinops.simulator.eval_fleet",
        "seed": seed,
        "days": days,
        "window_start": start.isoformat(),
        "laws": {
            "throughput": f"MLPerf Inference {laws.FLEET_ROUND} per-GPU throughput (gaps from other rounds)",
            "fp32_slowdown": laws.FP32_SLOWDOWN,
            "policy": {
                "ceiling_pct": CEILING_PCT,
                "headroom": HEADROOM,
                "min_cut": str(MIN_CUT),
                "min_usd": str(MIN_USD),
            },
        },
        "throughput_origin": {name: laws.service_throughput(s)[2] for name, s in sorted(laws.SERVICES.items())},
        "machines": [
            {
                "resource_id": m.resource_id,
                "host": m.host,
                "name": m.box.name,
                "provider": m.box.provider,
                "region": m.region,
                "instance_type": m.box.instance_type,
                "gpu_model": m.gpu_model,
                "gpu_count": m.gpu_count,
                "team": m.box.team,
                "workload": m.box.workload,
                "pricing": m.box.pricing,
                "schedule": m.box.schedule,
                "metrics": m.box.metrics,
                "monthly_cost_now_usd": str(monthly_now(m).quantize(MONEY)),
            }
            for m in machines
        ],
        "planted": planted,
        "lookalikes": lookalikes,
        "roles": roles,
        "lookalikes_that_are_positive": [x for x in lookalikes if (x["kind"], x["resource_id"]) in positives],
        "roles_not_positive": [x for x in roles if (x["kind"], x["resource_id"]) not in positives],
        "cost_by_provider_usd": totals,
    }
