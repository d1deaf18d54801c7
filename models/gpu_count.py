"""gpu_count: resources that hold N GPUs but keep fewer of them busy.

Per GPU, the p95 of its hourly p95 utilisation over the lookback (default 14 days, as AWS Compute
Optimizer); a GPU is spare when that p95 stays under ``spare_gpu_util_pct`` and it holds under
``spare_gpu_mem_fraction`` of its memory (an idle GPU holding a model shard is not spare). The
resource needs its busy GPUs; the spare ones are the saving, priced at the resource's own cost per
GPU-hour from its line items. A resource with no busy GPU is idle_gpu's finding, not this one.
Priced as the provider bills (never per GPU of an instance billed whole): the cheapest smaller type of
the same GPU that holds the busy GPUs, else the cheapest fitting type of another GPU model with fewer
GPUs (only when the busy GPUs are not saturated: a flat-out GPU reads ~95 % on any model, so its need
elsewhere is unknown), each at the list-price ratio; with neither offered, packing other work onto the spare GPUs, whose
saving is conditional (an ``alternative`` in the plan, never in a total).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import duckdb
import polars as pl

from gpufinops.models import features
from gpufinops.models.features import RightsizingSettings
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, from_warehouse, money
from gpufinops.warehouse import queries


def analyse(
    con: duckdb.DuckDBPyConnection, settings: RightsizingSettings | dict | None = None
) -> tuple[list[Recommendation], list[Withheld]]:
    return from_warehouse(con, settings, RightsizingSettings, load, findings)


@dataclass(frozen=True)
class GpuCountInputs:
    """What gpu_count reads from the warehouse: the resources over the lookback, each GPU's quantiles
    and the catalogue of offers (empty frames when the warehouse holds no GPU usage)."""

    resources: pl.DataFrame
    gpus: pl.DataFrame
    offers: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: RightsizingSettings) -> GpuCountInputs:
    start = features.window_start(con, settings.lookback_days)
    if start is None:
        return GpuCountInputs(pl.DataFrame(), pl.DataFrame(), pl.DataFrame())
    return GpuCountInputs(
        features.resources(con, settings),
        queries.rightsizing_gpus(con, start),
        queries.rightsizing_catalogue(con, reference=True),
    )


def findings(inputs: GpuCountInputs, settings: RightsizingSettings) -> Findings:
    """The recommend step: no connection, only what :func:`load` read."""
    recs, withheld = recommend(inputs.resources, inputs.gpus, inputs.offers, settings)
    return Findings(recs, withheld)


def recommend(
    res: pl.DataFrame, gpus: pl.DataFrame, offers: pl.DataFrame, settings: RightsizingSettings = RightsizingSettings()
) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld): withheld lists the resources whose GPU count is unknown, whose GPUs
    did not all report, or whose spare GPUs rest on thin evidence."""
    if res.is_empty() or gpus.is_empty():
        return [], []
    per = _spare_counts(gpus, settings)
    withheld = [
        Withheld.of(
            "gpu_count",
            row,
            "unknown_gpu_count",
            f"no GPU count for {row['instance_type'] or 'its instance type'} on the bill, in the "
            f"catalogue or the inventory ({row['gpus_measured']} GPU(s) measured)",
        )
        for row in res.filter(pl.col("gpu_count").is_null())
        .join(per, on="resource_id", how="inner")
        .sort("resource_id")
        .iter_rows(named=True)
    ]
    active = pl.col("active") if "active" in res.columns else pl.lit(True)  # terminated: saves nothing more
    rows = res.filter((pl.col("gpu_count") > 1) & active).join(per, on="resource_id", how="inner")
    recs = []
    for row in rows.sort("resource_id").iter_rows(named=True):
        needed, spare = row["busy_gpus"], row["gpu_count"] - row["busy_gpus"]
        if spare <= 0 or needed == 0:
            continue  # all busy; or all idle (idle_gpu's finding)
        if row["gpus_measured"] < row["gpu_count"]:  # a GPU never reported: unknown, not spare
            withheld.append(
                Withheld.of(
                    "gpu_count",
                    row,
                    "incomplete_metrics",
                    f"only {row['gpus_measured']} of its {row['gpu_count']} GPUs reported metrics",
                )
            )
            continue
        problem = features.evidence_problem(row, settings)
        if problem:
            withheld.append(features.thin("gpu_count", row, problem, settings))
            continue
        rec = _recommendation(row, needed, offers, settings)
        if rec is not None:
            recs.append(rec)
    return sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld


def _spare_counts(gpus: pl.DataFrame, s: RightsizingSettings) -> pl.DataFrame:
    mem_fraction = pl.col("mem_used_max_mib") / pl.col("mem_total_mib")
    spare = (pl.col("util_p95") < s.spare_gpu_util_pct) & (mem_fraction.fill_null(0) < s.spare_gpu_mem_fraction)
    return (
        gpus.with_columns(spare.alias("spare"))
        .group_by("resource_id")
        .agg(
            pl.len().alias("gpus_measured"),
            (~pl.col("spare")).sum().alias("busy_gpus"),
            pl.col("util_p95").filter(~pl.col("spare")).mean().alias("busy_util_p95"),
            pl.col("util_p95").filter(pl.col("spare")).max().alias("spare_util_p95_max"),
            pl.col("util_p95").sort().alias("per_gpu_util_p95"),
            pl.col("mem_used_max_mib").max().alias("gpu_mem_max_mib"),
        )
    )


def _same_gpu(offers: pl.DataFrame, row: dict, needed: int) -> dict | None:
    """The region's cheapest priced type of the same GPU with fewer GPUs that still holds ``needed``."""
    if offers.is_empty():
        return None
    fit = offers.filter(
        (pl.col("provider") == row["provider_code"])
        & (pl.col("region") == row["region"])
        & (pl.col("gpu_model") == row["gpu_model"])
        & (pl.col("gpu_count") >= needed)
        & (pl.col("gpu_count") < row["gpu_count"])
    )
    if fit.is_empty():
        return None
    return fit.sort("on_demand_usd_per_hour", "gpu_count", "instance_type").row(0, named=True)


def _other_gpu(
    offers: pl.DataFrame, row: dict, needed: int, current_price: Decimal, s: RightsizingSettings
) -> dict | None:
    """The cheapest type of another GPU model with fewer GPUs that fits the busy GPUs' work: their peak
    memory × headroom in each GPU, their utilisation scaled by the spec ratio under the ceiling."""
    from gpufinops.models.gpu_type import SATURATED_PCT, USABLE_MEMORY, baseline, log_ratio

    src = offers.filter(pl.col("gpu_model") == row["gpu_model"]).head(1)
    if src.is_empty() or row["busy_util_p95"] is None or row["busy_util_p95"] >= SATURATED_PCT:
        return None  # flat-out GPUs read ~95 % on any GPU: what they need on another model is unknown
    source = src.row(0, named=True)
    mem_gib = (row["gpu_mem_max_mib"] or 0) / 1024
    pool = offers.filter(
        (pl.col("provider") == row["provider_code"])
        & (pl.col("region") == row["region"])
        & (pl.col("gpu_model") != row["gpu_model"])
        & (pl.col("gpu_count") >= needed)
        & (pl.col("gpu_count") < row["gpu_count"])
        & pl.col("memory_gib").is_not_null()
        & (pl.col("on_demand_usd_per_hour") <= float(current_price) * (1 - s.min_savings_fraction))
    )
    for offer in pool.sort("on_demand_usd_per_hour", "instance_type").iter_rows(named=True):
        if mem_gib * s.memory_headroom > float(offer["memory_gib"]) * USABLE_MEMORY:
            continue
        ratios = log_ratio(source, offer, row.get("precision"))
        if ratios is None:
            continue
        predicted = baseline(row["busy_util_p95"] * needed / offer["gpu_count"], ratios)
        if predicted <= s.max_target_util_pct:
            return {**offer, "predicted_util_p95": round(predicted, 1)}
    return None


def _recommendation(row: dict, needed: int, offers: pl.DataFrame, s: RightsizingSettings) -> Recommendation | None:
    """Priced as a provider bills: a smaller type of the same GPU, else a cheaper fitting type of another
    GPU (the list-price ratio applied to the resource's own cost), else packing other work onto the spare
    GPUs — a saving only if that work would otherwise run on GPUs paid for elsewhere (conditional)."""
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    per_gpu = monthly_cost / row["gpu_count"]
    spare = row["gpu_count"] - needed
    current = features.current_config(row, monthly_cost)
    current_price = features.list_price(offers, row["provider_code"], row["region"], row["instance_type"])
    target = _same_gpu(offers, row, needed) if current_price else None
    route = "smaller_same_gpu" if target else None
    if target is None and current_price:
        target = _other_gpu(offers, row, needed, current_price, s)
        route = "other_gpu" if target else None
    risk = (
        "Spare GPUs may be reserved for peaks outside the lookback or for a job that has not started yet; "
        "check the job's launch configuration before shrinking it."
    )
    if target is not None and current_price is not None:  # a target is only looked for with a current price
        ratio = Decimal(str(target["on_demand_usd_per_hour"])) / current_price
        savings = money(monthly_cost * (1 - ratio))
        proposed = {
            **current,
            "instance_type": target["instance_type"],
            "gpu_model": target["gpu_model"],
            "gpu_count": int(target["gpu_count"]),
            "monthly_cost_usd": money(monthly_cost * ratio),
            "action": f"move to {target['instance_type']} ({target['gpu_count']}× {target['gpu_model']}): "
            f"{needed} of its {row['gpu_count']} GPUs are busy",
        }
        if route == "other_gpu":
            risk += (
                f" {target['gpu_model']} is a different GPU: the busy GPUs' utilisation there is predicted by "
                f"spec-ratio scaling ({target['predicted_util_p95']}% p95); benchmark before moving."
            )
        elif target["gpu_count"] > needed:
            risk += (
                f" {target['instance_type']} has {target['gpu_count']} GPUs for the {needed} busy ones: its other "
                "GPUs stay free for more work."
            )
        conditional = False
    else:
        route, conditional = "pack", True
        savings = money(per_gpu * spare)
        proposed = {
            **current,
            "monthly_cost_usd": money(monthly_cost),
            "action": f"pack {spare} GPUs' worth of other work onto it (MIG or time-slicing): only {needed} of "
            f"its {row['gpu_count']} GPUs are busy and no smaller or cheaper fitting type is offered "
            f"in {row['region']}",
        }
        risk += (
            f" {row['instance_type']} is billed whole: the ${float(savings):,.2f}/month is saved only if work that "
            f"would otherwise run on {spare} GPUs you pay for elsewhere moves here (not counted in totals)."
        )
    if savings < Decimal(str(s.min_monthly_savings_usd)):
        return None
    base = 0.9 if (row["spare_util_p95_max"] or 0) < s.spare_gpu_util_pct / 2 else 0.75
    evidence = {
        "util_p95": row["util_p95"],
        "per_gpu_util_p95": row["per_gpu_util_p95"],
        "busy_gpus": needed,
        "spare_gpus": spare,
        "busy_util_p95": row["busy_util_p95"],
        "spare_util_p95_max": row["spare_util_p95_max"],
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "window_days": round(row["window_days"], 2),
        "lookback_days": s.lookback_days,
        "billed_hours": row["billed_hours"],
        "measured_hours": row["measured_hours"],
        "metric_coverage": round(row["coverage"], 4),
        "cost_per_gpu_month_usd": money(per_gpu),
        "spare_gpu_util_pct": s.spare_gpu_util_pct,
        "route": route,
        "conditional": conditional,
        "current_usd_per_hour": float(current_price) if current_price else None,
        "target_usd_per_hour": float(target["on_demand_usd_per_hour"]) if target else None,
        "target_price_source": target["origin"] if target else None,
    }
    confidence = features.confidence(row, s, base * (0.6 if conditional else 1.0))
    return features.finding(
        "gpu_count", row, current, proposed, savings, confidence=confidence, risk=risk, evidence=evidence
    )
