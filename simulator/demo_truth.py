"""The demo fleet's ground truth: what was planted on each machine, with exact quantities, and the
commitment opportunities of its healthy machines (priced from the generator's own price tables)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from gpufinops.simulator.demo_billing import Machine
from gpufinops.simulator.demo_prices import (
    AWS_ON_DEMAND_USD,
    AWS_SPOT_ADVISOR,
    GCP_PRICES,
    HOURS_PER_MONTH,
    SPOT_ADVISOR_RANGES,
    SPOT_LOST_HOURS_PER_INTERRUPTION,
    money,
)
from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, INSTANCE_GPUS

IDLE_UTIL_PCT = 5  # an idle hour: every GPU at most this in every sample of the hour


def planted_entry(
    m: Machine, clock: Clock, running: np.ndarray, samples: Samples, effective: dict[int, Decimal]
) -> dict:
    if m.spec.plant is None:
        raise ValueError(f"{m.host} has nothing planted")
    kind, variant = m.spec.plant
    keep = np.repeat(running, SAMPLES_PER_HOUR)
    util, mem = samples.util[keep], samples.mem_used[keep]
    cost = sum(effective.values(), Decimal(0))
    entry = {
        "kind": kind,
        "variant": variant,
        "provider": m.spec.provider,
        "resource_id": m.resource_id,
        "host": m.host,
        "hosts": [m.host],
        "team": m.spec.team,
        "workload": m.spec.workload,
        "instance_type": m.spec.instance_type,
        "gpu_model": m.gpu_model,
        "gpu_count": m.gpu_count,
        "pricing": m.spec.pricing,
        "checkpointing": m.spec.checkpointing,
        "precision": m.spec.precision,
        "billed_hours": int(running.sum()),
        "cost_usd": str(cost),
        "util_mean_pct": round(float(util.mean()), 2),
        "util_max_pct": int(util.max()),
        "mem_used_max_gib": round(int(mem.max()) / 1024, 2),
    }
    if kind == "idle_gpu":
        hour_max = samples.util.reshape(clock.hours, SAMPLES_PER_HOUR, -1).max(axis=(1, 2))
        idle = np.flatnonzero(running & (hour_max <= IDLE_UTIL_PCT)).tolist()
        entry.update(
            idle_hours=len(idle),
            idle_gpu_hours=len(idle) * m.gpu_count,
            idle_cost_usd=str(sum((effective[h] for h in idle), Decimal(0))),
        )
    elif kind == "gpu_count":
        busy, spare = util[:, :2], util[:, 2:]
        entry.update(
            busy_gpu_indices=[0, 1],
            idle_gpu_indices=list(range(2, m.gpu_count)),
            busy_util_mean_pct=round(float(busy.mean()), 2),
            idle_util_max_pct=int(spare.max()),
            idle_gpu_cost_usd=str(money(cost * (m.gpu_count - 2) / m.gpu_count)),
            proposed_gpu_count=2,
            **_smaller_type_truth(m, cost),
        )
    elif kind == "gpu_type":
        entry.update(
            mem_total_gib=round(GPU_HARDWARE[m.gpu_model].memory_total_mib / 1024, 2),
            proposed_gpu_models=["L4", "A10G"],
        )
    elif kind == "quantization":
        entry.update(proposed_precision="fp16", mem_used_fp16_estimate_gib=round(int(mem.max()) / 2048, 2))
    elif kind == "spot_mix":
        entry.update(proposed_pricing="spot", **_spot_mix_truth(m, cost, clock))
    return entry


def _smaller_type_truth(m: Machine, cost: Decimal) -> dict:
    """The billable saving of 2 busy GPUs out of N: the cheapest type of the same GPU in the family with
    fewer GPUs that holds 2 (AWS bills instances whole: no per-GPU saving), from the generator's prices."""
    family = m.spec.instance_type.split(".")[0]
    options = sorted(
        (Decimal(price), it)
        for it, price in AWS_ON_DEMAND_USD.items()
        if it.split(".")[0] == family and 2 <= INSTANCE_GPUS[it][1] < m.gpu_count
    )
    if not options:
        return {}
    price, target = options[0]
    ratio = price / Decimal(AWS_ON_DEMAND_USD[m.spec.instance_type])
    return {"proposed_instance_type": target, "window_saving_usd": str(money(cost * (1 - ratio)))}


def _spot_mix_truth(m: Machine, cost: Decimal, clock: Clock) -> dict:
    """The saving of running an always-on on-demand machine on spot: the monthly on-demand cost x
    (1 - spot ratio x (1 + rework)); spot ratio = 1 - the advisor's saving, rework = the band's upper
    edge as interruptions a month x the hours lost per interruption / the hours of a month."""
    saving_pct, band = AWS_SPOT_ADVISOR[(m.region, m.spec.instance_type)]
    ratio = 1 - Decimal(saving_pct) / 100
    interruptions = Decimal(SPOT_ADVISOR_RANGES[band]["max"]) / 100
    hours_per_month = Decimal("730.5")
    rework = interruptions * SPOT_LOST_HOURS_PER_INTERRUPTION / hours_per_month
    monthly_cost = cost / Decimal(clock.hours) * hours_per_month
    return {
        "spot_ratio": str(ratio),
        "interruption_band": SPOT_ADVISOR_RANGES[band]["label"],
        "rework_fraction": str(money(rework)),
        "monthly_on_demand_usd": str(money(monthly_cost)),
        "monthly_savings_usd": str(money(monthly_cost * (1 - ratio * (1 + rework)))),
    }


def commitment_truth(steady: list[Machine]) -> list[dict]:
    """The commitment truth (ground_truth.json "commitments", not waste, so not "planted"): one per
    (provider, region, machine type, team) of machines billed on-demand every hour and busy every hour
    (no idle or notebook profile), where a catalogue commitment price
    exists (GCP 1-year CUD from pricing.yml; the demo has no AWS commitment price: AWS_RI_1Y_RATE is an
    assumption, so AWS groups are left out). Saving = machines x (on-demand - CUD/730) x 730.5 h."""
    groups: dict[tuple, list[Machine]] = {}
    for m in steady:
        groups.setdefault((m.spec.provider, m.region, m.spec.instance_type, m.spec.team), []).append(m)
    out = []
    for (provider, region, instance_type, team), members in sorted(groups.items()):
        on_demand, _, cud_month = GCP_PRICES[(instance_type, region)]
        if cud_month is None:
            raise ValueError(f"no 1-year CUD price for {instance_type} in {region}: not a commitment truth")
        hourly = Decimal(cud_month) / HOURS_PER_MONTH
        saving = len(members) * (Decimal(on_demand) - hourly) * Decimal("730.5")
        out.append(
            {
                "kind": "commitment",
                "variant": "steady_on_demand_baseline",
                "provider": provider,
                "resource_id": min(m.resource_id for m in members),
                "team": team,
                "group": f"commitment/{provider}/{region}/{instance_type}/{team}",
                "region": region,
                "instance_type": instance_type,
                "machines": len(members),
                "resource_ids": sorted(m.resource_id for m in members),
                "term": "1y",
                "on_demand_usd_per_hour": on_demand,
                "commit_usd_per_hour": str(money(hourly)),
                "break_even_utilisation": str(money(hourly / Decimal(on_demand))),
                "monthly_savings_usd": str(money(saving)),
            }
        )
    return out
