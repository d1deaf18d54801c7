"""gpu_count: resources that hold N GPUs but keep fewer of them busy.

Per GPU, the p95 of its hourly p95 utilisation over the lookback (default 14 days, as AWS Compute
Optimizer); a GPU is spare when that p95 stays under ``spare_gpu_util_pct`` and it holds under
``spare_gpu_mem_fraction`` of its memory (an idle GPU holding a model shard is not spare). The
resource needs its busy GPUs; the spare ones are the saving, priced at the resource's own cost per
GPU-hour from its line items. A resource with no busy GPU is idle_gpu's finding, not this one.
The proposed instance type is the region's type of the same GPU with the fewest GPUs ≥ needed.
"""

from __future__ import annotations

from decimal import Decimal

import duckdb
import polars as pl

from models import features
from models.features import RightsizingSettings
from models.recommendation import Recommendation, Withheld, money, stable_id
from warehouse import queries


def recommend_from_warehouse(con: duckdb.DuckDBPyConnection,
                             settings: RightsizingSettings | dict | None = None) -> list[Recommendation]:
    return analyse(con, settings)[0]


def analyse(con: duckdb.DuckDBPyConnection,
            settings: RightsizingSettings | dict | None = None) -> tuple[list[Recommendation], list[Withheld]]:
    s = features.settings_of(settings)
    start = features.window_start(con, s.lookback_days)
    if start is None:
        return [], []
    res = features.resources(con, s)
    gpus = queries.rightsizing_gpus(con, start)
    return recommend(res, gpus, features.catalogue(con), s)


def recommend(res: pl.DataFrame, gpus: pl.DataFrame, offers: pl.DataFrame,
              settings: RightsizingSettings = RightsizingSettings()) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld): withheld lists the resources whose GPU count is unknown, whose GPUs
    did not all report, or whose spare GPUs rest on thin evidence."""
    if res.is_empty() or gpus.is_empty():
        return [], []
    per = _spare_counts(gpus, settings)
    withheld = [Withheld.of("gpu_count", row, "unknown_gpu_count",
                            f"no GPU count for {row['instance_type'] or 'its instance type'} on the bill, in the "
                            f"catalogue or the inventory ({row['gpus_measured']} GPU(s) measured)")
                for row in res.filter(pl.col("gpu_count").is_null()).join(per, on="resource_id", how="inner")
                .sort("resource_id").iter_rows(named=True)]
    rows = res.filter(pl.col("gpu_count") > 1).join(per, on="resource_id", how="inner")
    recs = []
    for row in rows.sort("resource_id").iter_rows(named=True):
        needed, spare = row["busy_gpus"], row["gpu_count"] - row["busy_gpus"]
        if spare <= 0 or needed == 0:
            continue  # all busy; or all idle (idle_gpu's finding)
        if row["gpus_measured"] < row["gpu_count"]:  # a GPU never reported: unknown, not spare
            withheld.append(Withheld.of("gpu_count", row, "incomplete_metrics",
                                        f"only {row['gpus_measured']} of its {row['gpu_count']} GPUs reported metrics"))
            continue
        problem = features.evidence_problem(row, settings)
        if problem:
            withheld.append(Withheld.from_detail("gpu_count", row, problem))
            continue
        rec = _recommendation(row, needed, offers, settings)
        if rec is not None:
            recs.append(rec)
    return sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld


def _spare_counts(gpus: pl.DataFrame, s: RightsizingSettings) -> pl.DataFrame:
    mem_fraction = pl.col("mem_used_max_mib") / pl.col("mem_total_mib")
    spare = (pl.col("util_p95") < s.spare_gpu_util_pct) & (mem_fraction.fill_null(0) < s.spare_gpu_mem_fraction)
    return gpus.with_columns(spare.alias("spare")).group_by("resource_id").agg(
        pl.len().alias("gpus_measured"), (~pl.col("spare")).sum().alias("busy_gpus"),
        pl.col("util_p95").filter(~pl.col("spare")).mean().alias("busy_util_p95"),
        pl.col("util_p95").filter(pl.col("spare")).max().alias("spare_util_p95_max"),
        pl.col("util_p95").sort().alias("per_gpu_util_p95"),
        pl.col("mem_used_max_mib").max().alias("gpu_mem_max_mib"))


def _instance_for(offers: pl.DataFrame, row: dict, needed: int) -> dict | None:
    """The region's type of the same GPU with the fewest GPUs that still holds ``needed``."""
    if offers.is_empty():
        return None
    fit = offers.filter((pl.col("provider") == row["provider_code"]) & (pl.col("region") == row["region"])
                        & (pl.col("gpu_model") == row["gpu_model"]) & (pl.col("gpu_count") >= needed)
                        & (pl.col("gpu_count") < row["gpu_count"]))
    if fit.is_empty():
        return None
    return fit.sort("gpu_count", "on_demand_usd_per_hour").row(0, named=True)


def _recommendation(row: dict, needed: int, offers: pl.DataFrame, s: RightsizingSettings) -> Recommendation | None:
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    per_gpu = monthly_cost / row["gpu_count"]
    savings = money(per_gpu * (row["gpu_count"] - needed))
    if savings < Decimal(str(s.min_monthly_savings_usd)):
        return None
    target = _instance_for(offers, row, needed)
    current = features.current_config(row, monthly_cost)
    proposed = {**current, "gpu_count": needed, "instance_type": target["instance_type"] if target else None,
                "monthly_cost_usd": money(per_gpu * needed),
                "action": f"run on {needed} of its {row['gpu_count']} GPUs"}
    risk = ("Spare GPUs may be reserved for peaks outside the lookback or for a job that has not started yet; "
            "check the job's launch configuration before shrinking it.")
    if target is None:
        risk += f" No {row['region']} instance type with fewer {row['gpu_model']} GPUs is in the catalogue: " \
                f"request {needed} GPUs on a shared cluster instead."
    elif target["gpu_count"] > needed:
        risk += (f" The smallest {row['gpu_model']} type in {row['region']} with room for {needed} GPUs has "
                 f"{target['gpu_count']}: the full saving needs its other GPUs packed with other work.")
    base = 0.9 if (row["spare_util_p95_max"] or 0) < s.spare_gpu_util_pct / 2 else 0.75
    evidence = {
        "util_p95": row["util_p95"], "per_gpu_util_p95": row["per_gpu_util_p95"],
        "busy_gpus": needed, "spare_gpus": row["gpu_count"] - needed, "busy_util_p95": row["busy_util_p95"],
        "spare_util_p95_max": row["spare_util_p95_max"],
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "window_days": round(row["window_days"], 2), "lookback_days": s.lookback_days,
        "billed_hours": row["billed_hours"], "measured_hours": row["measured_hours"],
        "metric_coverage": round(row["coverage"], 4), "cost_per_gpu_month_usd": money(per_gpu),
        "spare_gpu_util_pct": s.spare_gpu_util_pct,
        "catalogue_instance_gpu_count": target["gpu_count"] if target else None,
    }
    return Recommendation(
        id=stable_id("gpu_count", row["provider"], row["resource_id"]), kind="gpu_count", team=row["team"],
        provider=row["provider_code"], resource_id=row["resource_id"], workload=row["workload"],
        current=current, proposed=proposed, monthly_savings_usd=savings,
        confidence=features.confidence(row, s, base), risk=risk, evidence=evidence)
