"""One on-prem node group's (or one team's workload's) verdict against the cloud: shrink the cluster,
burst its saturated peaks to spot, or keep it, with the figures behind it (``models.onprem_vs_cloud``
runs it over every group and workload)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import polars as pl

from gpufinops.models.cloud_options import PAY_PER_USE, fitting_offers, interruptible, label, price_options
from gpufinops.models.onprem_cost import (
    HOURS_PER_MONTH,
    OnpremCost,
    OnpremVsCloudParams,
    onprem_cost,
    used_gpu_hours,
)
from gpufinops.models.onprem_cost import as_decimal as _d
from gpufinops.models.onprem_cost import pct as _pct
from gpufinops.models.recommendation import Recommendation, money, stable_id


def _burst(row: dict, cost: OnpremCost, spot: dict, gpus_per_node: int) -> tuple[Decimal, Decimal]:
    """($/month of one node more, busy all its hours; $/month of the same GPUs on spot in the saturated hours)."""
    node = gpus_per_node * cost.at(Decimal(1)) * HOURS_PER_MONTH
    share = Decimal(str(row["saturated_hour_share"]))
    return node, gpus_per_node * spot["usd_per_used_gpu_hour"] * share * HOURS_PER_MONTH


def _usd(amount: Decimal, per: Decimal) -> str:
    return f"${float(amount / per):,.2f}" if per else "n/a (no use measured)"


@dataclass(frozen=True)
class Comparison:
    """One group's figures against the cloud: its cost model, utilisation and used GPU-hours, the cheapest
    option, the cheapest pay-per-use one and the break-even utilisation against it, and every option."""

    cost: OnpremCost
    util: Decimal
    used: Decimal
    best: dict
    pay_best: dict | None
    break_even: Decimal | None
    options: list[dict]


def _evidence(row: dict, c: Comparison, params: OnpremVsCloudParams) -> dict[str, Any]:
    cost, util, used, best, break_even, pay_best, options = (
        c.cost,
        c.util,
        c.used,
        c.best,
        c.break_even,
        c.pay_best,
        c.options,
    )
    hours = Decimal(row["gpu_hours"])
    fallback = row["unmeasured_power_gpu_hours"] > 0
    return {
        "pattern": None,
        "util_mean_pct": _pct(util),
        "gpu_hours": row["gpu_hours"],
        "used_gpu_hours": round(float(used), 4),
        "measured_gpu_hours": row["measured_gpu_hours"],
        "onprem_cost_usd": money(_d(row["cost_usd"])),
        "onprem_cost_per_gpu_hour_usd": round(float(_d(row["cost_usd"]) / hours), 6),
        "onprem_cost_per_used_gpu_hour_usd": round(float(_d(row["cost_usd"]) / used), 6) if used else None,
        "fixed_usd_per_gpu_hour": round(float(cost.fixed), 6),
        "busy_energy_usd_per_gpu_hour": round(float(cost.variable), 6),
        "cheapest_cloud_option": label(best),
        "cloud_cost_per_used_gpu_hour_usd": None
        if best["usd_per_used_gpu_hour"] is None
        else round(float(best["usd_per_used_gpu_hour"]), 6),
        "cloud_cost_per_onprem_gpu_hour_usd": round(float(best["usd_per_onprem_gpu_hour"]), 6),
        "break_even_utilisation_pct": _pct(break_even),
        "break_even_vs": None if pay_best is None else label(pay_best),
        "spot_interruption_overhead": float(params.spot_overhead),
        "hourly_util_p95": row["hourly_util_p95"],
        "saturated_hour_share": row["saturated_hour_share"],
        "power_basis": row["power_bases"],
        "tdp_fallback": fallback,
        "power_note": (
            f"{row['unmeasured_power_gpu_hours']} of {row['gpu_hours']} GPU-hours had no measured "
            f"power: priced by the TDP model (idle draw + (TDP - idle) x utilisation)"
        )
        if fallback
        else "power measured (DCGM_FI_DEV_POWER_USAGE / power.draw) in every GPU-hour",
        "options": [
            {
                "option": label(o),
                "usd_per_gpu_hour": round(float(o["usd_per_gpu_hour"]), 6),
                "usd_per_onprem_gpu_hour": round(float(o["usd_per_onprem_gpu_hour"]), 6),
                "origin": o["origin"],
            }
            for o in options[:6]
        ],
        "window_days": round((row["last_hour"] - row["first_hour"]).total_seconds() / 86400 + 1 / 24, 2),
        "first_hour": row["first_hour"],
        "last_hour": row["last_hour"],
    }


def onprem_finding(
    row: dict,
    offers: pl.DataFrame,
    specs: dict,
    params: OnpremVsCloudParams,
    now: datetime | None,
    summary: bool = False,
) -> Recommendation | None:
    """One group's (or one workload's) finding. ``summary``: a cluster-level finding over several
    workload findings keeps its shrink savings in the evidence only (the workloads' findings count them)."""
    used = used_gpu_hours(row)
    if not row["gpu_hours"] or not row["measured_gpu_hours"]:
        return None
    util = used / row["gpu_hours"]
    spec = specs.get(row["gpu_model"], {})
    options = price_options(
        fitting_offers(offers, spec.get("memory_gib"), spec.get("fp16_tflops")),
        util,
        interruptible(row),
        params.spot_overhead,
    )
    if not options:
        return None
    cost, best = onprem_cost(row), options[0]
    pay = [o for o in options if o["pricing"] in PAY_PER_USE]
    pay_best = min(pay, key=lambda o: o["usd_per_used_gpu_hour"]) if pay else None
    break_even = cost.break_even(pay_best["usd_per_used_gpu_hour"]) if pay_best else None
    hours = Decimal(row["gpu_hours"])
    window_hours = Decimal(str((row["last_hour"] - row["first_hour"]).total_seconds() / 3600 + 1))
    per_month = Decimal(HOURS_PER_MONTH) / window_hours
    onprem_monthly = _d(row["cost_usd"]) * per_month
    cloud_monthly = best["usd_per_onprem_gpu_hour"] * hours * per_month
    evidence = _evidence(row, Comparison(cost, util, used, best, pay_best, break_even, options), params)
    gpus_per_node = max(1, row["gpus"] // max(1, row["nodes"]))
    spot = [o for o in options if o["pricing"] == "spot"]
    if cloud_monthly < onprem_monthly:
        pattern, savings = "shrink_cluster", onprem_monthly - cloud_monthly
        action = (
            f"shrink the cluster: at {_pct(util)}% utilisation a used GPU-hour costs "
            f"{_usd(_d(row['cost_usd']), used)} here vs {_usd(best['usd_per_onprem_gpu_hour'], util)} on "
            f"{label(best)}; break-even at {_pct(break_even)}% utilisation"
        )
    elif (
        row["team"] is None
        and spot
        and (row["saturated_hour_share"] or 0) >= params.burst_saturated_share
        and _burst(row, cost, spot[0], gpus_per_node)[0] > _burst(row, cost, spot[0], gpus_per_node)[1]
    ):
        node_monthly, burst_monthly = _burst(row, cost, spot[0], gpus_per_node)
        pattern, savings = "burst_to_spot", node_monthly - burst_monthly
        evidence.update(extra_node_monthly_usd=money(node_monthly), burst_monthly_usd=money(burst_monthly))
        action = (
            f"burst peaks to {label(spot[0])}: saturated {row['saturated_hour_share'] * 100:.1f}% of hours; "
            f"a node more would cost ${float(node_monthly):,.0f}/mo, bursting ${float(burst_monthly):,.0f}/mo; "
            f"break-even at {_pct(break_even)}% utilisation"
        )
    else:
        pattern, savings = "keep_onprem", Decimal(0)
        action = (
            f"keep on-prem: {_usd(_d(row['cost_usd']), used)} per used GPU-hour at {_pct(util)}% vs "
            f"{_usd(best['usd_per_onprem_gpu_hour'], util)} on {label(best)}; "
            f"break-even at {_pct(break_even)}% utilisation"
        )
    evidence["pattern"] = pattern
    savings = money(savings)
    if summary and pattern == "shrink_cluster":
        evidence["whole_cluster_monthly_savings_usd"] = savings
        evidence["savings_note"] = "counted on this node group's workload findings"
        savings = Decimal(0)
    current = {
        "instance_type": row["node_group"],
        "gpu_model": row["gpu_model"],
        "gpu_count": row["gpus"],
        "pricing": "owned",
        "monthly_cost_usd": money(onprem_monthly),
    }
    proposed = {
        "instance_type": best["instance_type"] if pattern == "shrink_cluster" else row["node_group"],
        "gpu_model": best["gpu_model"] if pattern == "shrink_cluster" else row["gpu_model"],
        "gpu_count": row["gpus"],
        "pricing": best["pricing"] if pattern == "shrink_cluster" else "owned",
        "provider": best["provider"] if pattern == "shrink_cluster" else "onprem",
        "monthly_cost_usd": money(onprem_monthly - savings),
        "action": action,
    }
    measured_share = row["measured_gpu_hours"] / row["gpu_hours"]
    confidence = round(min(1.0, measured_share) * min(1.0, evidence["window_days"] / 14) * 0.8, 3)
    rec = Recommendation(
        id=stable_id("onprem_vs_cloud", "onprem", row["cluster"], row["node_group"], row["team"], row["workload"]),
        kind="onprem_vs_cloud",
        team=row["team"],
        provider="onprem",
        resource_id=f"{row['cluster']}/{row['node_group']}",
        workload=row["workload"] or (None if row["team"] is None else row["team"]),
        current=current,
        proposed=proposed,
        monthly_savings_usd=savings,
        confidence=confidence,
        risk="Hardware already bought is sunk until it is resold or redeployed; cloud capacity for large GPUs "
        "can be short; spot work must checkpoint.",
        evidence=evidence,
    )
    if now is not None:
        rec.created_at = now
    return rec
