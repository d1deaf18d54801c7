"""Repatriation: steady cloud GPU load that an on-prem GPU fitting it would run for less — if it fits.

An on-prem node group is a finite pool: a move onto it needs free GPUs. A group is full at
``onprem_target_utilisation`` (default 85 % of its GPU-hours busy); its free GPUs are
``GPUs × target − busy GPUs`` (busy GPUs: its measured utilisation × GPUs). Candidate moves are
allocated best saving first, each onto the cheapest fitting group that still has room for all its GPUs
(a workload keeps its GPUs reserved whether or not they are busy); what does not fit anywhere is not
proposed but withheld, naming the group and the GPUs it lacks.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import polars as pl

from gpufinops.models.onprem_cost import HOURS_PER_MONTH, OnpremVsCloudParams, onprem_cost, used_gpu_hours
from gpufinops.models.onprem_cost import as_decimal as _d
from gpufinops.models.onprem_cost import pct as _pct
from gpufinops.models.recommendation import Recommendation, Withheld, money, provider_code, stable_id


def free_gpus(group: dict[str, Any], target: float) -> float:
    """GPUs a group can take on before it is ``target`` busy (never below 0)."""
    hours = group["gpu_hours"] or 0
    util = float(used_gpu_hours(group) / hours) if hours else 0.0
    return max(0.0, group["gpus"] * (target - util))


def _steady(resource_hours: pl.DataFrame) -> pl.DataFrame:
    return (
        resource_hours.filter(pl.col("provider") != "onprem")
        .group_by("resource_id")
        .agg(
            pl.len().alias("billed_hours"),
            pl.col("effective_cost").sum().alias("cost"),
            pl.col("util_mean").mean().alias("util_mean"),
            pl.col("util_mean").count().alias("measured_hours"),
            pl.col("hour").min().alias("first_hour"),
            pl.col("hour").max().alias("last_hour"),
            *[pl.col(c).first() for c in ("provider", "team", "region", "instance_type", "gpu_model", "gpu_count")],
        )
        .sort("resource_id")
    )


def candidates(
    resource_hours: pl.DataFrame, groups: list[dict], specs: dict, params: OnpremVsCloudParams
) -> list[dict[str, Any]]:
    """Every steady cloud resource with the on-prem groups that fit its work and beat its price, cheapest first."""
    out = []
    for r in _steady(resource_hours).iter_rows(named=True):
        window = (r["last_hour"] - r["first_hour"]).total_seconds() / 3600 + 1
        if not r["measured_hours"] or not r["gpu_count"] or r["billed_hours"] < params.steady_billed_share * window:
            continue
        util = Decimal(str(round(r["util_mean"], 4))) / 100
        cloud_per_gpu_hour = _d(r["cost"]) / r["billed_hours"] / r["gpu_count"]
        need = specs.get(r["gpu_model"], {})
        options: list[dict[str, Any]] = []
        for g in groups:
            have = specs.get(g["gpu_model"], {})
            if (have.get("memory_gib") or 0) < (need.get("memory_gib") or 0) or (have.get("fp16_tflops") or 0) < (
                need.get("fp16_tflops") or 0
            ):
                continue
            cost = onprem_cost(g)
            per_hour, break_even = cost.at(util), cost.break_even(cloud_per_gpu_hour)
            if break_even is None or util < break_even or per_hour >= cloud_per_gpu_hour:
                continue
            savings = money((cloud_per_gpu_hour - per_hour) * r["gpu_count"] * HOURS_PER_MONTH)
            if savings >= params.min_monthly_savings_usd:
                options.append({"group": g, "per_hour": per_hour, "break_even": break_even, "savings": savings})
        if options:
            options.sort(key=lambda o: (o["per_hour"], o["group"]["node_group"]))
            out.append(
                {"row": r, "window": window, "util": util, "cloud_per_gpu_hour": cloud_per_gpu_hour, "options": options}
            )
    return sorted(out, key=lambda c: (-c["options"][0]["savings"], c["row"]["resource_id"]))


def allocate(
    resource_hours: pl.DataFrame,
    groups: list[dict],
    specs: dict,
    params: OnpremVsCloudParams,
    now: datetime | None = None,
) -> tuple[list[Recommendation], list[Withheld]]:
    """(moves that fit, moves withheld for want of capacity), best saving first."""
    if resource_hours.is_empty() or not groups:
        return [], []
    free = {(g["cluster"], g["node_group"]): free_gpus(g, params.onprem_target_utilisation) for g in groups}
    recs, withheld = [], []
    for cand in candidates(resource_hours, groups, specs, params):
        r = cand["row"]
        fitting = [
            o for o in cand["options"] if free[(o["group"]["cluster"], o["group"]["node_group"])] >= r["gpu_count"]
        ]
        if not fitting:
            best = cand["options"][0]["group"]
            key = (best["cluster"], best["node_group"])
            withheld.append(
                Withheld.of(
                    "onprem_vs_cloud",
                    {**r, "provider_code": provider_code(r["provider"])},
                    "capacity",
                    f"repatriating it to {best['cluster']}/{best['node_group']} would save "
                    f"${float(cand['options'][0]['savings']):,.2f}/month but needs {r['gpu_count']} free GPUs; the group has "
                    f"{free[key]:.1f} below its {params.onprem_target_utilisation:.0%} target utilisation",
                )
            )
            continue
        choice = fitting[0]
        g = choice["group"]
        free[(g["cluster"], g["node_group"])] -= r["gpu_count"]
        recs.append(_move(cand, choice, free[(g["cluster"], g["node_group"])], params, now))
    return recs, withheld


def _move(
    cand: dict, choice: dict, free_after: float, params: OnpremVsCloudParams, now: datetime | None
) -> Recommendation:
    r, g, util = cand["row"], choice["group"], cand["util"]
    cost = onprem_cost(g)
    provider = provider_code(r["provider"])
    monthly = money(cand["cloud_per_gpu_hour"] * r["gpu_count"] * HOURS_PER_MONTH)
    savings = choice["savings"]
    evidence = {
        "pattern": "repatriate",
        "util_mean_pct": _pct(util),
        "billed_hours": r["billed_hours"],
        "window_hours": round(cand["window"]),
        "cloud_cost_per_gpu_hour_usd": round(float(cand["cloud_per_gpu_hour"]), 6),
        "onprem_cost_per_gpu_hour_usd": round(float(choice["per_hour"]), 6),
        "onprem_option": f"{g['cluster']}/{g['node_group']} ({g['gpu_model']})",
        "onprem_group_gpus": g["gpus"],
        "onprem_free_gpus_after": round(free_after, 2),
        "onprem_target_utilisation": params.onprem_target_utilisation,
        "break_even_utilisation_pct": _pct(choice["break_even"]),
        "fixed_usd_per_gpu_hour": round(float(cost.fixed), 6),
        "busy_energy_usd_per_gpu_hour": round(float(cost.variable), 6),
        "first_hour": r["first_hour"],
        "last_hour": r["last_hour"],
    }
    action = (
        f"repatriate steady load to {g['cluster']}/{g['node_group']}: {_pct(util)}% busy, "
        f"${float(choice['per_hour']):.2f} vs ${float(cand['cloud_per_gpu_hour']):.2f} per GPU-hour; "
        f"break-even at {_pct(choice['break_even'])}%"
    )
    rec = Recommendation(
        id=stable_id("onprem_vs_cloud", provider, r["resource_id"], "repatriate"),
        kind="onprem_vs_cloud",
        team=r["team"],
        provider=provider,
        resource_id=r["resource_id"],
        workload=None,
        current={
            "instance_type": r["instance_type"],
            "gpu_model": r["gpu_model"],
            "gpu_count": r["gpu_count"],
            "pricing": "cloud",
            "monthly_cost_usd": monthly,
        },
        proposed={
            "instance_type": g["node_group"],
            "gpu_model": g["gpu_model"],
            "gpu_count": r["gpu_count"],
            "pricing": "owned",
            "provider": "onprem",
            "cluster": g["cluster"],
            "monthly_cost_usd": monthly - savings,
            "action": action,
        },
        monthly_savings_usd=savings,
        confidence=round(min(1.0, r["measured_hours"] / r["billed_hours"]) * 0.7, 3),
        risk="Takes free on-prem capacity (counted against the group's target utilisation) and needs the data "
        "next to it.",
        evidence=evidence,
    )
    if now is not None:
        rec.created_at = now
    return rec
