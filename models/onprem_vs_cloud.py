"""onprem_vs_cloud: should this work run on the private cluster or in the cloud?

For each on-prem node group (the cluster level) and each team/workload on it, from the ``onprem``
source's line items: the cost of an on-prem GPU-hour at the measured utilisation ``u`` (the busy
share of the hour), and of a *used* GPU-hour (cost / (GPU-hours × u)), against the cheapest cloud
option for the same work on a GPU that fits it (at least the on-prem GPU's memory and FP16
throughput; AWS and GCP catalogues, and the prices the bills show):

* pay-per-use options cost ``price per GPU-hour × u`` per on-prem GPU-hour: on-demand, and spot
  ``× (1 + interruption overhead)`` for work that tolerates interruption;
* 1- and 3-year commitments cost their price every hour, used or not, like the cluster.

An on-prem GPU-hour costs ``c(u) = F + V·u``: ``F`` is the amortised hardware, facility and
operations and the idle and host draw; ``V`` the extra energy of a busy GPU (TDP model). The
**break-even utilisation** against the cheapest pay-per-use price ``p`` is where ``F + V·u = p·u``:
``u* = F / (p − V)``. Below it the cloud is cheaper (advice: shrink the underused cluster and send
that work to the cloud); above it the cluster is cheaper (keep it; when it is saturated in peaks,
burst the peaks to cloud spot instead of buying nodes). A cloud GPU resource billed nearly every
hour at a utilisation above the break-even of an on-prem GPU that fits its work is steady load:
repatriate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl

from gpufinops.models import repatriation
from gpufinops.models.onprem_cost import (
    HOURS_PER_MONTH,
    OnpremCost,
    OnpremSettings,
    OnpremVsCloudParams,
    onprem_cost,
    used_gpu_hours,
)
from gpufinops.models.onprem_cost import as_decimal as _d
from gpufinops.models.onprem_cost import pct as _pct
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, stable_id
from gpufinops.warehouse import queries

PAY_PER_USE = ("on_demand", "spot")
NOT_INTERRUPTIBLE = {"online_inference", "notebook", "interactive"}


def _interruptible(row: dict[str, Any]) -> bool:
    """Whether spot fits the work: batch jobs retry, checkpointed training resumes; serving does not."""
    if row.get("workload") in NOT_INTERRUPTIBLE:
        return False
    return row.get("workload") == "batch_inference" or (row.get("checkpointing") or "").lower() != "false"


def fitting_offers(offers: pl.DataFrame, memory_gib: float | None, fp16_tflops: float | None) -> list[dict]:
    """Cloud offers whose GPU has at least this memory and FP16 throughput, priced per GPU-hour."""
    out = []
    for o in offers.iter_rows(named=True):
        if o["memory_gib"] is None or (memory_gib and o["memory_gib"] < memory_gib):
            continue
        if fp16_tflops and (o["fp16_tflops"] or 0) < fp16_tflops:
            continue
        out.append({**o, "usd_per_gpu_hour": _d(o["usd_per_hour"]) / o["gpu_count"]})
    return out


def price_options(offers: list[dict], util: Decimal, interruptible: bool, overhead: Decimal) -> list[dict]:
    """Each offer's cost of one on-prem GPU-hour's work at utilisation ``util``, cheapest first."""
    options = []
    for o in offers:
        if o["pricing"] == "spot" and not interruptible:
            continue
        per_used = o["usd_per_gpu_hour"] * (1 + overhead if o["pricing"] == "spot" else 1)
        per_onprem_hour = per_used * util if o["pricing"] in PAY_PER_USE else o["usd_per_gpu_hour"]
        options.append({"provider": o["provider"], "region": o["region"], "instance_type": o["instance_type"],
                        "gpu_model": o["gpu_model"], "gpu_count": o["gpu_count"], "pricing": o["pricing"],
                        "origin": o["origin"], "usd_per_gpu_hour": o["usd_per_gpu_hour"],
                        "usd_per_used_gpu_hour": per_used if o["pricing"] in PAY_PER_USE else
                        (o["usd_per_gpu_hour"] / util if util else None),
                        "usd_per_onprem_gpu_hour": per_onprem_hour})
    return sorted(options, key=lambda o: (o["usd_per_onprem_gpu_hour"], o["provider"], o["region"],
                                          o["instance_type"], o["pricing"]))


def _label(option: dict) -> str:
    return f"{option['provider']} {option['instance_type']} {option['pricing']} ({option['region']})"


def _burst(row: dict, cost: OnpremCost, spot: dict, gpus_per_node: int) -> tuple[Decimal, Decimal]:
    """($/month of one node more, busy all its hours; $/month of the same GPUs on spot in the saturated hours)."""
    node = gpus_per_node * cost.at(Decimal(1)) * HOURS_PER_MONTH
    share = Decimal(str(row["saturated_hour_share"]))
    return node, gpus_per_node * spot["usd_per_used_gpu_hour"] * share * HOURS_PER_MONTH


def _usd(amount: Decimal, per: Decimal) -> str:
    return f"${float(amount / per):,.2f}" if per else "n/a (no use measured)"


def _group_rows(usage: pl.DataFrame) -> list[dict[str, Any]]:
    """The cluster level: every team/workload of a node group summed."""
    if usage.is_empty():
        return []
    grouped = usage.group_by("cluster", "node_group").agg(
        pl.col("region", "gpu_model", "tdp_w", "idle_w", "host_w_per_gpu", "pue", "usd_per_kwh").first(),
        pl.col("gpu_hours", "measured_gpu_hours", "util_pct_sum", "cost_usd", "hardware_usd", "energy_usd",
               "facility_usd", "unmeasured_power_gpu_hours").sum(),
        pl.col("gpus").sum(), pl.col("nodes").sum(), pl.col("first_hour").min(), pl.col("last_hour").max(),
        pl.col("hourly_util_p95").max(), pl.col("saturated_hour_share").max(),
        pl.col("power_bases"),   # a list per group: joined below
    ).sort("cluster", "node_group")
    return [{**r, "power_bases": ",".join(sorted({b for text in r["power_bases"] if text for b in text.split(",")})),
             "team": None, "workload": None, "checkpointing": None} for r in grouped.iter_rows(named=True)]


def _evidence(row: dict, cost: OnpremCost, util: Decimal, used: Decimal, best: dict, break_even: Decimal | None,
              pay_best: dict | None, options: list[dict], params: OnpremVsCloudParams) -> dict[str, Any]:
    hours = Decimal(row["gpu_hours"])
    fallback = row["unmeasured_power_gpu_hours"] > 0
    return {
        "pattern": None, "util_mean_pct": _pct(util), "gpu_hours": row["gpu_hours"],
        "used_gpu_hours": round(float(used), 4), "measured_gpu_hours": row["measured_gpu_hours"],
        "onprem_cost_usd": money(_d(row["cost_usd"])),
        "onprem_cost_per_gpu_hour_usd": round(float(_d(row["cost_usd"]) / hours), 6),
        "onprem_cost_per_used_gpu_hour_usd": round(float(_d(row["cost_usd"]) / used), 6) if used else None,
        "fixed_usd_per_gpu_hour": round(float(cost.fixed), 6), "busy_energy_usd_per_gpu_hour": round(float(cost.variable), 6),
        "cheapest_cloud_option": _label(best), "cloud_cost_per_used_gpu_hour_usd":
            None if best["usd_per_used_gpu_hour"] is None else round(float(best["usd_per_used_gpu_hour"]), 6),
        "cloud_cost_per_onprem_gpu_hour_usd": round(float(best["usd_per_onprem_gpu_hour"]), 6),
        "break_even_utilisation_pct": _pct(break_even),
        "break_even_vs": None if pay_best is None else _label(pay_best),
        "spot_interruption_overhead": float(params.spot_overhead),
        "hourly_util_p95": row["hourly_util_p95"], "saturated_hour_share": row["saturated_hour_share"],
        "power_basis": row["power_bases"], "tdp_fallback": fallback,
        "power_note": (f"{row['unmeasured_power_gpu_hours']} of {row['gpu_hours']} GPU-hours had no measured "
                       f"power: priced by the TDP model (idle draw + (TDP - idle) x utilisation)") if fallback
        else "power measured (DCGM_FI_DEV_POWER_USAGE / power.draw) in every GPU-hour",
        "options": [{"option": _label(o), "usd_per_gpu_hour": round(float(o["usd_per_gpu_hour"]), 6),
                     "usd_per_onprem_gpu_hour": round(float(o["usd_per_onprem_gpu_hour"]), 6), "origin": o["origin"]}
                    for o in options[:6]],
        "window_days": round((row["last_hour"] - row["first_hour"]).total_seconds() / 86400 + 1 / 24, 2),
        "first_hour": row["first_hour"], "last_hour": row["last_hour"],
    }


def _onprem_finding(row: dict, offers: pl.DataFrame, specs: dict, params: OnpremVsCloudParams,
                    now: datetime | None, summary: bool = False) -> Recommendation | None:
    """One group's (or one workload's) finding. ``summary``: a cluster-level finding over several
    workload findings keeps its shrink savings in the evidence only (the workloads' findings count them)."""
    used = used_gpu_hours(row)
    if not row["gpu_hours"] or not row["measured_gpu_hours"]:
        return None
    util = used / row["gpu_hours"]
    spec = specs.get(row["gpu_model"], {})
    options = price_options(fitting_offers(offers, spec.get("memory_gib"), spec.get("fp16_tflops")), util,
                            _interruptible(row), params.spot_overhead)
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
    evidence = _evidence(row, cost, util, used, best, break_even, pay_best, options, params)
    gpus_per_node = max(1, row["gpus"] // max(1, row["nodes"]))
    spot = [o for o in options if o["pricing"] == "spot"]
    if cloud_monthly < onprem_monthly:
        pattern, savings = "shrink_cluster", onprem_monthly - cloud_monthly
        action = (f"shrink the cluster: at {_pct(util)}% utilisation a used GPU-hour costs "
                  f"{_usd(_d(row['cost_usd']), used)} here vs {_usd(best['usd_per_onprem_gpu_hour'], util)} on "
                  f"{_label(best)}; break-even at {_pct(break_even)}% utilisation")
    elif row["team"] is None and spot and (row["saturated_hour_share"] or 0) >= params.burst_saturated_share \
            and _burst(row, cost, spot[0], gpus_per_node)[0] > _burst(row, cost, spot[0], gpus_per_node)[1]:
        node_monthly, burst_monthly = _burst(row, cost, spot[0], gpus_per_node)
        pattern, savings = "burst_to_spot", node_monthly - burst_monthly
        evidence.update(extra_node_monthly_usd=money(node_monthly), burst_monthly_usd=money(burst_monthly))
        action = (f"burst peaks to {_label(spot[0])}: saturated {row['saturated_hour_share'] * 100:.1f}% of hours; "
                  f"a node more would cost ${float(node_monthly):,.0f}/mo, bursting ${float(burst_monthly):,.0f}/mo; "
                  f"break-even at {_pct(break_even)}% utilisation")
    else:
        pattern, savings = "keep_onprem", Decimal(0)
        action = (f"keep on-prem: {_usd(_d(row['cost_usd']), used)} per used GPU-hour at {_pct(util)}% vs "
                  f"{_usd(best['usd_per_onprem_gpu_hour'], util)} on {_label(best)}; "
                  f"break-even at {_pct(break_even)}% utilisation")
    evidence["pattern"] = pattern
    savings = money(savings)
    if summary and pattern == "shrink_cluster":
        evidence["whole_cluster_monthly_savings_usd"] = savings
        evidence["savings_note"] = "counted on this node group's workload findings"
        savings = Decimal(0)
    current = {"instance_type": row["node_group"], "gpu_model": row["gpu_model"], "gpu_count": row["gpus"],
               "pricing": "owned", "monthly_cost_usd": money(onprem_monthly)}
    proposed = {"instance_type": best["instance_type"] if pattern == "shrink_cluster" else row["node_group"],
                "gpu_model": best["gpu_model"] if pattern == "shrink_cluster" else row["gpu_model"],
                "gpu_count": row["gpus"], "pricing": best["pricing"] if pattern == "shrink_cluster" else "owned",
                "provider": best["provider"] if pattern == "shrink_cluster" else "onprem",
                "monthly_cost_usd": money(onprem_monthly - savings), "action": action}
    measured_share = row["measured_gpu_hours"] / row["gpu_hours"]
    confidence = round(min(1.0, measured_share) * min(1.0, evidence["window_days"] / 14) * 0.8, 3)
    rec = Recommendation(
        id=stable_id("onprem_vs_cloud", "onprem", row["cluster"], row["node_group"], row["team"], row["workload"]),
        kind="onprem_vs_cloud", team=row["team"], provider="onprem", resource_id=f"{row['cluster']}/{row['node_group']}",
        workload=row["workload"] or (None if row["team"] is None else row["team"]), current=current, proposed=proposed,
        monthly_savings_usd=savings, confidence=confidence,
        risk="Hardware already bought is sunk until it is resold or redeployed; cloud capacity for large GPUs "
             "can be short; spot work must checkpoint.", evidence=evidence)
    if now is not None:
        rec.created_at = now
    return rec


def analyse(usage: pl.DataFrame, offers: pl.DataFrame, specs: dict[str, dict], resource_hours: pl.DataFrame,
            params: OnpremVsCloudParams = OnpremVsCloudParams(), now: datetime | None = None
            ) -> tuple[list[Recommendation], list[Withheld], list[Recommendation]]:
    """(recommendations, withheld, comparison) for every on-prem node group and cloud GPU resource.

    The comparison holds every node group's (and workload's) verdict — keep, shrink, burst — with its
    cost per used GPU-hour and break-even: facts for the on-prem comparison page and report section. Only
    verdicts that save money are recommendations; repatriations must fit the groups' free capacity.
    """
    groups = _group_rows(usage)
    shared = {(c, g) for c, g, n in usage.group_by("cluster", "node_group").len().iter_rows() if n > 1}
    found = [_onprem_finding(row, offers, specs, params, now, summary=(row["cluster"], row["node_group"]) in shared)
             for row in groups]
    if shared:  # more than one team/workload on a group: one finding each, besides the cluster's
        found += [_onprem_finding(row, offers, specs, params, now) for row in usage.iter_rows(named=True)
                  if (row["cluster"], row["node_group"]) in shared]
    comparison = sorted((r for r in found if r is not None), key=lambda r: (r.resource_id, r.team or "", r.id))
    recs = [r for r in comparison if r.monthly_savings_usd > 0]
    moves, withheld = repatriation.allocate(resource_hours, groups, specs, params, now)
    return sorted(recs + moves, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld, comparison


def recommend(usage: pl.DataFrame, offers: pl.DataFrame, specs: dict[str, dict], resource_hours: pl.DataFrame,
              params: OnpremVsCloudParams = OnpremVsCloudParams(), now: datetime | None = None) -> list[Recommendation]:
    """The findings that save money (see :func:`analyse`)."""
    return analyse(usage, offers, specs, resource_hours, params, now)[0]


def gpu_specs(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    rows = con.execute("SELECT gpu_model, memory_gib, fp16_tflops FROM gpu_specs").fetchall()
    return {m: {"memory_gib": mem, "fp16_tflops": fp16} for m, mem, fp16 in rows}


def analyse_warehouse(con: duckdb.DuckDBPyConnection, settings: dict | OnpremVsCloudParams | None = None
                      ) -> tuple[list[Recommendation], list[Withheld], list[Recommendation]]:
    params = settings if isinstance(settings, OnpremVsCloudParams) else OnpremVsCloudParams.from_config(settings)
    found = _findings(load(con), params)
    return found.recommendations, found.withheld, found.comparison


@dataclass(frozen=True)
class OnpremInputs:
    """What onprem_vs_cloud reads: the on-prem groups' usage and cost figures, the cloud GPU offers, the
    GPU specs and every GPU resource-hour (the repatriation candidates); all empty without on-prem usage."""
    usage: pl.DataFrame
    offers: pl.DataFrame
    specs: dict[str, dict]
    resource_hours: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: OnpremSettings | None = None) -> OnpremInputs:
    usage = queries.onprem_gpu_usage(con)
    if usage.is_empty():
        return OnpremInputs(usage, pl.DataFrame(), {}, pl.DataFrame())
    return OnpremInputs(usage, queries.cloud_gpu_offers(con), gpu_specs(con), queries.gpu_resource_hours(con))


def findings(inputs: OnpremInputs, settings: OnpremSettings) -> Findings:
    """The recommend step: verdicts, the ones that save money, and the repatriations that fit; no connection."""
    return _findings(inputs, OnpremVsCloudParams(onprem_target_utilisation=settings.onprem_target_utilisation))


def _findings(inputs: OnpremInputs, params: OnpremVsCloudParams) -> Findings:
    if inputs.usage.is_empty():
        return Findings()
    recs, withheld, comparison = analyse(inputs.usage, inputs.offers, inputs.specs, inputs.resource_hours, params)
    return Findings(recs, withheld, comparison)


def recommend_from_warehouse(con: duckdb.DuckDBPyConnection, settings: dict | None = None) -> list[Recommendation]:
    return analyse_warehouse(con, settings)[0]
