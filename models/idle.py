"""idle_gpu: GPU-hours billed while every GPU of the resource stays under a utilisation threshold.

Priced from the line items: an idle hour costs what the resource's GPU usage lines cost in that
hour (EffectiveCost). Only runs of at least ``min_run_hours`` consecutive idle hours count (a
short pause between two jobs is not waste). Hours without metrics are unknown, never idle.
Resources are told apart by when they idle: always idle (stop or release it), idle nights and
weekends (schedule it off), or idle in long stretches at any time (scale it to zero when idle).
A schedule is proposed only where at least ``min_off_hours_idle_share`` of the measured off-hours are
idle: a busy service whose nightly trough dips under the threshold for a few hours has nothing a
schedule could stop (its time-of-day profile is a trough, not an off switch).
On shared nodes a pod that holds an idle GPU's memory is its own finding (``allocated_idle``,
models/allocated_idle.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import duckdb
import polars as pl

from gpufinops.models import allocated_idle, run_reads
from gpufinops.models.frames import as_datetime
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, on_resource
from gpufinops.warehouse import allocation_queries

DAYS_PER_MONTH = Decimal("30.4375")


@dataclass(frozen=True)
class IdleParams:
    util_threshold_pct: float = 5.0  # an hour is idle when every GPU's max utilisation is below this
    min_run_hours: int = 3  # consecutive idle hours needed before they count
    always_idle_fraction: float = 0.9  # idle share of measured hours that makes a resource "always idle"
    off_hours_share: float = 0.8  # idle share falling in nights/weekends that makes it "schedulable"
    work_start_hour: int = 8  # working hours, UTC, weekdays
    work_end_hour: int = 19
    min_monthly_savings_usd: Decimal = Decimal("25")
    gone_after_hours: int = 24  # a resource not billed in the data's last this many hours is gone
    min_off_hours_idle_share: float = 0.25  # a schedule needs this share of the off-hours idle (else: troughs)
    allocated_min_mem_gib: float = 1.0  # allocated_idle: a pod holding at least this much of an idle GPU …
    allocated_min_presence: float = 0.5  # … for at least this share of the hour's samples


def idle_hours(resource_hours: pl.DataFrame, params: IdleParams) -> pl.DataFrame:
    """Mark each measured resource-hour idle or not, with the run rule applied."""
    measured = resource_hours.filter(pl.col("util_max").is_not_null()).sort("resource_id", "hour")
    flagged = measured.with_columns(
        (pl.col("util_max") < params.util_threshold_pct).alias("below"),
        (
            (pl.col("hour").dt.weekday() >= 6)
            | (pl.col("hour").dt.hour() < params.work_start_hour)
            | (pl.col("hour").dt.hour() >= params.work_end_hour)
        ).alias("off_hours"),
    ).with_columns(
        # a run breaks when the state flips or an hour is missing
        (
            (pl.col("below") != pl.col("below").shift(1).over("resource_id"))
            | (pl.col("hour").diff().over("resource_id") != pl.duration(hours=1))
        )
        .fill_null(True)
        .cum_sum()
        .over("resource_id")
        .alias("run"),
    )
    run_len = pl.len().over("resource_id", "run")
    return flagged.with_columns((pl.col("below") & (run_len >= params.min_run_hours)).alias("idle"))


def _pattern(idle_fraction: float, off_share: float, params: IdleParams) -> str:
    if idle_fraction >= params.always_idle_fraction:
        return "always_idle"
    if off_share >= params.off_hours_share:
        return "idle_off_hours"
    return "idle_stretches"


_ACTIONS = {
    "always_idle": (
        "stop or release the resource",
        "released",
        "Check nobody still needs it (data on local disks, a reserved slot) before releasing it.",
    ),
    "idle_off_hours": (
        "stop it nights and weekends on a schedule",
        "scheduled_off_hours",
        "Work that starts off-hours would wait for the schedule; keep an override.",
    ),
    "idle_stretches": (
        "scale it to zero when idle (autoscaler / idle culler)",
        "scale_to_zero",
        "Cold starts add latency when work returns after an idle stretch.",
    ),
}


def unmeasured(resource_hours: pl.DataFrame) -> list[Withheld]:
    """Billed GPU resources with no GPU metrics at all: nothing can be said about their idleness."""
    if resource_hours.is_empty():
        return []
    per = resource_hours.group_by("resource_id").agg(
        pl.len().alias("billed_hours"),
        pl.col("gpus_reporting").is_not_null().sum().alias("measured_hours"),
        *[pl.col(c).first() for c in ("provider", "team", "instance_type")],
    )
    return [
        Withheld.of(
            "idle_gpu",
            row,
            "thin_evidence",
            f"no GPU metrics attributed to it in {row['billed_hours']} billed hours "
            f"({row['instance_type'] or 'instance type unknown'})",
        )
        for row in per.filter(pl.col("measured_hours") == 0).sort("resource_id").iter_rows(named=True)
    ]


def analyse(
    resource_hours: pl.DataFrame,
    params: IdleParams = IdleParams(),
    now: datetime | None = None,
    workload_hours: pl.DataFrame | None = None,
) -> tuple[list[Recommendation], list[Withheld]]:
    """Idle resources, and (given the pods' hours: allocation_queries.workload_hours) pods that hold an
    idle GPU (``pattern = "allocated_idle"``, models/allocated_idle.py)."""
    recs, withheld = recommend(resource_hours, params, now), unmeasured(resource_hours)
    if workload_hours is not None:
        pod_recs, pod_withheld = allocated_idle.analyse(workload_hours, params, now)
        mark_overlaps(recs, pod_recs, resource_hours, workload_hours, params)
        recs = sorted(recs + pod_recs, key=lambda r: (-r.monthly_savings_usd, r.id))
        withheld += pod_withheld
    return recs, withheld


def mark_overlaps(
    node_recs: list[Recommendation],
    pod_recs: list[Recommendation],
    resource_hours: pl.DataFrame,
    workload_hours: pl.DataFrame,
    params: IdleParams,
) -> None:
    """On a node with both a node-level idle finding (a schedule, scale to zero) and pods holding idle GPUs,
    the GPU-hours both would save: the pods' idle-held hours inside the node's idle hours. Recorded on the
    node's finding (``evidence.pod_overlap_monthly_usd``: pod finding id -> that cost per month, over the
    node's window) so ``models.plans`` prices the node's action on what the pods' releases leave, exactly."""
    pods_by_key = {(r.resource_id, r.evidence.get("namespace"), r.evidence.get("pod")): r for r in pod_recs}
    nodes = {r.resource_id: r for r in node_recs if r.evidence.get("pattern") != "always_idle"}
    shared = sorted({rid for rid, _, _ in pods_by_key} & set(nodes))
    if not shared:
        return
    wanted = pl.Series(shared)
    node_idle = (
        idle_hours(resource_hours.filter(pl.col("resource_id").is_in(wanted.implode())), params)
        .filter(pl.col("idle"))
        .select("resource_id", "hour")
    )
    pod_hours = workload_hours.filter(pl.col("resource_id").is_in(wanted.implode()))
    if "basis" not in pod_hours.columns:
        pod_hours = pod_hours.with_columns(pl.lit(None, pl.String).alias("basis"))
    both = (
        allocated_idle.idle_holds(pod_hours, params)
        .filter(pl.col("held_idle"))
        .join(node_idle, on=["resource_id", "hour"])
        .group_by("resource_id", "namespace", "pod")
        .agg(pl.col("cost_usd").sum())
    )
    for row in both.iter_rows(named=True):
        pod = pods_by_key.get((row["resource_id"], row["namespace"], row["pod"]))
        if pod is None or not row["cost_usd"]:
            continue
        node = nodes[row["resource_id"]]
        days = Decimal(str(node.evidence["window_days"]))
        overlap = node.evidence.setdefault("pod_overlap_monthly_usd", {})
        overlap[pod.id] = money(Decimal(row["cost_usd"]) / days * DAYS_PER_MONTH)


@dataclass(frozen=True)
class IdleInputs:
    """What idle_gpu reads: every GPU resource-hour (queries.gpu_resource_hours, read once per run:
    models/run_reads.py) and the pods' hours on shared nodes (allocation_queries.workload_hours)."""

    resource_hours: pl.DataFrame
    workload_hours: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: None = None) -> IdleInputs:
    """idle_gpu reads no ``[models]`` key (its thresholds are IdleParams')."""
    pods = allocation_queries.workload_hours(con, pods_holding_idle=held_idle(IdleParams()))
    return IdleInputs(run_reads.resource_hours(con), pods)


def held_idle(params: IdleParams) -> allocation_queries.HeldIdle:
    """allocated_idle's per-hour rule, for the query to read only the pods that meet it in some hour."""
    return allocation_queries.HeldIdle(
        params.util_threshold_pct, params.allocated_min_mem_gib * 1024, params.allocated_min_presence
    )


def findings(inputs: IdleInputs, settings: None = None) -> Findings:
    """The recommend step: idle resources and pods holding idle GPUs; no connection."""
    recs, withheld = analyse(inputs.resource_hours, workload_hours=inputs.workload_hours)
    return Findings(recs, withheld)


def recommend(
    resource_hours: pl.DataFrame, params: IdleParams = IdleParams(), now: datetime | None = None
) -> list[Recommendation]:
    """One recommendation per resource whose idle GPU-hours are worth acting on."""
    if resource_hours.is_empty():
        return []
    # a resource no longer billed (terminated) has nothing left to release or schedule
    end = as_datetime(resource_hours["hour"].max())
    last = resource_hours.group_by("resource_id").agg(pl.col("hour").max().alias("last"))
    live = last.filter(pl.col("last") >= end - timedelta(hours=params.gone_after_hours))["resource_id"]
    resource_hours = resource_hours.filter(pl.col("resource_id").is_in(live.implode()))
    hours = idle_hours(resource_hours, params)
    billed = resource_hours.group_by("resource_id").agg(
        pl.len().alias("billed_hours"), pl.col("effective_cost").sum().alias("billed_cost")
    )
    per = (
        hours.group_by("resource_id")
        .agg(
            pl.len().alias("measured_hours"),
            pl.col("idle").sum().alias("idle_hours"),
            (pl.col("idle") & pl.col("off_hours")).sum().alias("idle_off_hours"),
            pl.col("off_hours").sum().alias("measured_off_hours"),
            pl.col("effective_cost").filter(pl.col("idle")).sum().alias("idle_cost"),
            pl.col("util_p95").quantile(0.95).alias("util_p95"),
            pl.col("util_max").max().alias("util_max"),
            pl.col("mem_used_max_mib").max().alias("mem_used_max_mib"),
            pl.col("hour").min().alias("first_hour"),
            pl.col("hour").max().alias("last_hour"),
            *[
                pl.col(c).first()
                for c in ("provider", "team", "region", "instance_type", "gpu_model", "gpu_count", "pricing_category")
            ],
        )
        .join(billed, on="resource_id")
        .filter(pl.col("idle_hours") > 0)
        .sort("resource_id")
    )
    recs = []
    for row in per.iter_rows(named=True):
        rec = _recommendation(row, params, now)
        if rec is not None:
            recs.append(rec)
    return sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id))


def _recommendation(row: dict, params: IdleParams, now: datetime | None) -> Recommendation | None:
    window_hours = (row["last_hour"] - row["first_hour"]).total_seconds() / 3600 + 1
    window_days = Decimal(str(window_hours / 24))
    idle_fraction = row["idle_hours"] / row["measured_hours"]
    off_share = row["idle_off_hours"] / row["idle_hours"]
    pattern = _pattern(idle_fraction, off_share, params)
    if (
        pattern == "idle_off_hours"
        and row["idle_off_hours"] < params.min_off_hours_idle_share * row["measured_off_hours"]
    ):
        return None  # a few quiet hours in the nightly trough of a busy resource: nothing a schedule could stop
    action, proposed_state, risk = _ACTIONS[pattern]
    idle_cost = Decimal(row["idle_cost"])
    monthly_cost = Decimal(row["billed_cost"]) / window_days * DAYS_PER_MONTH
    monthly_savings = money(idle_cost / window_days * DAYS_PER_MONTH)
    if monthly_savings < params.min_monthly_savings_usd:
        return None
    coverage = row["measured_hours"] / row["billed_hours"]
    confidence = round(
        min(1.0, coverage) * min(1.0, float(window_days) / 14) * (0.95 if pattern != "idle_stretches" else 0.75), 3
    )
    current = {
        "instance_type": row["instance_type"],
        "gpu_model": row["gpu_model"],
        "gpu_count": row["gpu_count"],
        "pricing": _pricing(row["pricing_category"]),
        "monthly_cost_usd": money(monthly_cost),
    }
    proposed = {
        **current,
        "state": proposed_state,
        "action": action,
        "monthly_cost_usd": money(monthly_cost) - monthly_savings,
    }
    if pattern == "always_idle":
        proposed["gpu_count"] = 0
    evidence = {
        "pattern": pattern,
        "util_threshold_pct": params.util_threshold_pct,
        "util_p95": row["util_p95"],
        "util_max": row["util_max"],
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "window_days": round(float(window_days), 2),
        "billed_hours": row["billed_hours"],
        "measured_hours": row["measured_hours"],
        "idle_hours": row["idle_hours"],
        "idle_gpu_hours": row["idle_hours"] * (row["gpu_count"] or 1),
        "idle_fraction": round(idle_fraction, 4),
        "off_hours_share_of_idle": round(off_share, 4),
        "idle_cost_usd": money(idle_cost),
        "metric_coverage": round(coverage, 4),
        "first_hour": row["first_hour"],
        "last_hour": row["last_hour"],
    }
    return on_resource(
        "idle_gpu",
        row,
        (pattern,),
        None,
        now,
        current=current,
        proposed=proposed,
        monthly_savings_usd=monthly_savings,
        confidence=confidence,
        risk=risk,
        evidence=evidence,
    )


def _pricing(category: str | None) -> str:
    return {"Dynamic": "spot", "Committed": "committed", "Standard": "on_demand"}.get(category or "", "on_demand")
