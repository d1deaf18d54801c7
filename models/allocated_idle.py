"""idle_gpu, ``pattern = "allocated_idle"``: a pod that holds a GPU's memory while the GPU stays idle.

The node-level idle finding (models/idle.py) looks at whole billed resources; on a shared node that
misses the commonest waste of all: a pod (a model server, a notebook) that was given a GPU, loaded
its weights and then does nothing, so the GPU can not be given to anyone else. An hour counts when
the pod was on the GPU (or MIG slice) for at least ``allocated_min_presence`` of its samples, held
at least ``allocated_min_mem_gib`` of its memory, and the GPU's peak utilisation stayed under
``util_threshold_pct``; only runs of ``min_run_hours`` consecutive such hours count. The saving is
what allocation charged the pod for those hours (``gpu_allocation_hourly``), scaled to a month; a
pod whose hours were never allocated (no bill for its node yet) is withheld as unpriced.

A finding names the GPU units its action changes (``evidence.gpu_units``): a whole GPU's UUID, a MIG
slice as ``UUID:slice``, and on a time-sliced or MPS GPU the pod's share as ``UUID@namespace/pod``
(allocation charges each pod its own share of such a GPU-hour). ``models.plans`` plans a finding per
(resource, GPU units): two teams' pods on disjoint GPUs of one node are two plans.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import polars as pl

from gpufinops.models.recommendation import Recommendation, Withheld, money, on_resource, pod_workload

DAYS_PER_MONTH = Decimal("30.4375")
SHARED_BASES = ("timeslice", "mps")  # allocation splits such a GPU-hour between its pods: each pod's share is its own
POD_KEY = ("resource_id", "namespace", "pod")
GPU_KEY = POD_KEY + ("gpu_uuid", "mig_instance")
ACTION = (
    "release the GPU the pod holds: scale the workload to zero while it is idle (KEDA, an idle culler) "
    "or give its GPU back to the pool"
)
RISK = "The pod's model or data stays loaded only while it holds the GPU: the next request waits for a cold start."


def idle_holds(hours: pl.DataFrame, params) -> pl.DataFrame:
    """Each pod-GPU-hour marked ``held_idle`` (present, memory held, GPU idle) with the run rule applied."""
    flagged = hours.sort(*GPU_KEY, "hour", nulls_last=True).with_columns(
        (
            (pl.col("samples") / pl.col("gpu_samples") >= params.allocated_min_presence)
            & (pl.col("mem_used_max_mib").fill_null(0) >= params.allocated_min_mem_gib * 1024)
            & (pl.col("gpu_util_max") < params.util_threshold_pct)
        )
        .fill_null(False)
        .alias("below")
    )
    flagged = flagged.with_columns(
        (
            (pl.col("below") != pl.col("below").shift(1).over(GPU_KEY))
            | (pl.col("hour").diff().over(GPU_KEY) != pl.duration(hours=1))
        )
        .fill_null(True)
        .cum_sum()
        .over(GPU_KEY)
        .alias("run")
    )
    return flagged.with_columns(
        (pl.col("below") & (pl.len().over(*GPU_KEY, "run") >= params.min_run_hours)).alias("held_idle")
    )


def gpu_unit() -> pl.Expr:
    """The GPU unit of a pod-GPU-hour: ``UUID``, ``UUID:slice`` (MIG), plus ``@namespace/pod`` on a GPU
    whose hour allocation shares between pods (time-slicing, MPS)."""
    mig = pl.when(pl.col("mig_instance").is_not_null()).then(pl.lit(":") + pl.col("mig_instance")).otherwise(pl.lit(""))
    share = (
        pl.when(pl.col("basis").is_in(SHARED_BASES))
        .then(pl.lit("@") + pl.col("namespace").fill_null("") + pl.lit("/") + pl.col("pod"))
        .otherwise(pl.lit(""))
    )
    return pl.concat_str([pl.col("gpu_uuid"), mig, share])


def analyse(hours: pl.DataFrame, params, now: datetime | None = None) -> tuple[list[Recommendation], list[Withheld]]:
    if hours.is_empty():
        return [], []
    if "basis" not in hours.columns:  # hours read before allocation recorded how it split a GPU-hour
        hours = hours.with_columns(pl.lit(None, pl.String).alias("basis"))
    marked = idle_holds(hours, params)
    per = (
        marked.group_by(*POD_KEY)
        .agg(
            pl.col("hour").filter(pl.col("held_idle")).n_unique().alias("idle_hours"),
            pl.col("hour").n_unique().alias("present_hours"),
            pl.col("cost_usd").filter(pl.col("held_idle")).sum().alias("idle_cost"),
            pl.col("cost_usd").filter(pl.col("held_idle")).count().alias("priced_idle_rows"),
            pl.col("cost_usd").sum().alias("pod_cost"),
            pl.col("gpu_uuid").filter(pl.col("held_idle")).unique().sort().alias("gpu_uuids"),
            gpu_unit().filter(pl.col("held_idle")).unique().sort().alias("gpu_units"),
            pl.col("basis").filter(pl.col("held_idle")).drop_nulls().unique().sort().alias("gpu_bases"),
            pl.col("mig_instance").filter(pl.col("held_idle")).drop_nulls().unique().sort().alias("mig_instances"),
            pl.col("mem_used_max_mib").filter(pl.col("held_idle")).max().alias("mem_used_max_mib"),
            pl.col("gpu_util_max").filter(pl.col("held_idle")).max().alias("util_max"),
            pl.col("pod_util_mean").filter(pl.col("held_idle")).mean().alias("pod_util_mean"),
            pl.col("hour").min().alias("first_hour"),
            pl.col("hour").max().alias("last_hour"),
            *[
                pl.col(c).drop_nulls().first()
                for c in (
                    "container",
                    "team",
                    "provider",
                    "instance_type",
                    "gpu_model",
                    "gpu_count",
                    "pricing_category",
                    "source",
                )
            ],
        )
        .filter(pl.col("idle_hours") > 0)
        .sort(*POD_KEY, nulls_last=True)
    )
    recs, withheld = [], []
    for row in per.iter_rows(named=True):
        if not row["priced_idle_rows"]:
            withheld.append(
                Withheld.of(
                    "idle_gpu",
                    row,
                    "unpriced",
                    f"pod {row['namespace']}/{row['pod']} held {row['mem_used_max_mib'] / 1024:.1f} GiB "
                    f"of an idle GPU for {row['idle_hours']} hours, but no bill allocates its node's "
                    f"cost yet",
                )
            )
            continue
        rec = _recommendation(row, params, now)
        if rec is not None:
            recs.append(rec)
    return recs, withheld


def _recommendation(row: dict, params, now: datetime | None) -> Recommendation | None:
    window_hours = (row["last_hour"] - row["first_hour"]).total_seconds() / 3600 + 1
    window_days = Decimal(str(window_hours / 24))
    idle_cost = Decimal(row["idle_cost"])
    monthly_savings = money(idle_cost / window_days * DAYS_PER_MONTH)
    if monthly_savings < params.min_monthly_savings_usd:
        return None
    monthly_cost = money(Decimal(row["pod_cost"] or 0) / window_days * DAYS_PER_MONTH)
    gpus = len(row["gpu_uuids"])
    current = {
        "instance_type": row["instance_type"],
        "gpu_model": row["gpu_model"],
        "gpu_count": gpus,
        "pricing": {"Dynamic": "spot", "Committed": "committed"}.get(row["pricing_category"] or "", "on_demand"),
        "monthly_cost_usd": monthly_cost,
    }
    proposed = {
        **current,
        "gpu_count": 0,
        "state": "released",
        "action": ACTION,
        "monthly_cost_usd": max(Decimal(0), monthly_cost - monthly_savings),
    }
    evidence = {
        "pattern": "allocated_idle",
        "namespace": row["namespace"],
        "pod": row["pod"],
        "container": row["container"],
        "gpu_uuids": row["gpu_uuids"],
        "mig_instances": row["mig_instances"],
        "gpu_units": row["gpu_units"],
        "gpu_sharing": row["gpu_bases"],
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "util_max": row["util_max"],
        "pod_util_mean": row["pod_util_mean"],
        "util_threshold_pct": params.util_threshold_pct,
        "min_mem_gib": params.allocated_min_mem_gib,
        "idle_hours": row["idle_hours"],
        "present_hours": row["present_hours"],
        "window_days": round(float(window_days), 2),
        "idle_cost_usd": money(idle_cost),
        "node_gpu_count": row["gpu_count"],
        "metrics_source": row["source"],
        "first_hour": row["first_hour"],
        "last_hour": row["last_hour"],
    }
    confidence = round(0.9 * min(1.0, float(window_days) / 14) * min(1.0, row["idle_hours"] / row["present_hours"]), 3)
    return on_resource(
        "idle_gpu",
        row,
        ("allocated_idle", row["namespace"], row["pod"]),
        pod_workload(row),
        now,
        current=current,
        proposed=proposed,
        monthly_savings_usd=monthly_savings,
        confidence=confidence,
        risk=RISK,
        evidence=evidence,
    )
