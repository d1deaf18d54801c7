"""The busy-waste kinds' rules over a pod's hours (models/busy_profile.py reads them): which hours of a
pod show each pattern, and which pods carry one. Pure polars, no connection.

A pod-hour is the pod's GPUs (or MIG slices) in one hour: the engine's activity averaged over them
(``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, else ``SM_ACTIVE``), the idle minutes the GPUs all shared (the least
of theirs), the pipes' and the memory interface's means, the PCIe host-to-device rate while idle, and the
cost allocation charged the pod for them. The thresholds are the stated limits of docs/models.md
(*Busy but not efficient*).
"""

from __future__ import annotations

import polars as pl

from gpufinops.models.allocated_idle import gpu_unit

HELD_MIB = 1024.0  # the pod has loaded something (a CUDA context alone is ~300-500 MiB)
BUSY_ENGINE = 0.3  # an hour the engine was busy
TRAINING_ENGINE = 0.5  # an hour of a job's steady work (a notebook's bursts stay under it)
IDLE_HELD_MINUTES = 45.0  # an idle-held hour: memory held with the engine idle for 45 of its 60 minutes
IDLE_HELD_SHARE = 0.5  # idle_held: such hours are at least half the pod's hours
IDLE_HELD_MIN_HOURS = 4
STALL_MINUTES = 57.0  # a stalled hour: the engine idle (while memory is held) for the whole hour
STALL_LIMIT_HOURS = 3  # stalled_job: zero activity for longer than this after a job's steady work ...
MIN_BUSY_HOURS = 2  # ... of at least this many consecutive hours
INPUT_DIPS = 6  # input_bound: the engine dropped to idle and came back at least this often in the hour
INPUT_SM_BELOW = 0.6  # ... with low SM activity
INPUT_RX_BPS = 50e6  # ... and host-to-device traffic (50 MB/s) in the gaps
PATTERN_SHARE = 0.5  # input_bound / memory_bound: the pattern in at least half the pod's busy hours
PATTERN_MIN_HOURS = 3
FP32_BUSY = 0.2  # no_tensor_cores: the FP32 pipe busy ...
TENSOR_NEAR_ZERO = 0.02  # ... and the tensor pipe near zero ...
TENSOR_BUSY = 0.1  # ... and never a busy hour with the tensor pipe at this or more
FP32_SHARE = 0.75  # ... in at least this share of its busy hours
TENSOR_CORE_RATIO = 3.0  # a tensor-core GPU: FP16 tensor peak >= 3x the FP32 peak (gpu_specs.csv: P100 2x, L4 4x)
DRAM_SATURATED_MEAN = 0.6  # memory_bound_inference: the memory interface busy on average ...
DRAM_SATURATED_P95 = 0.8  # ... and near its limit at the hour's p95 ...
DRAM_TENSOR_BELOW = 0.25  # ... while the tensor pipe waits
KEY = ("resource_id", "namespace", "pod")


def pod_hours(hours: pl.DataFrame) -> pl.DataFrame:
    """One row per pod and hour (its GPUs together), sorted by pod and hour."""
    if "basis" not in hours.columns:  # hours without an allocation row: each GPU (or slice) is the pod's own unit
        hours = hours.with_columns(pl.lit(None, pl.Utf8).alias("basis"))
    return (
        hours.group_by(*KEY, "hour")
        .agg(
            pl.col("gr_active_mean").mean().alias("engine"),
            pl.col("held_idle_minutes").min().alias("idle_minutes"),
            pl.col("idle_streak_minutes").min().alias("idle_streak"),
            pl.col("idle_dips").mean().alias("dips"),
            pl.col("tensor_active_mean").mean().alias("tensor"),
            pl.col("fp32_active_mean").mean().alias("fp32"),
            pl.col("fp16_active_mean").mean().alias("fp16"),
            pl.col("sm_active_mean").mean().alias("sm"),
            pl.col("dram_active_mean").mean().alias("dram"),
            pl.col("dram_active_p95").max().alias("dram_p95"),
            pl.col("pcie_rx_idle_bps").mean().alias("rx_idle"),
            pl.col("mem_used_max_mib").sum().alias("mem_mib"),
            pl.col("cost_usd").sum().alias("cost"),
            pl.col("cost_usd").count().alias("priced_gpus"),
            pl.col("gpu_uuid").unique().sort().alias("gpu_uuids"),
            gpu_unit().unique().sort().alias("gpu_units"),  # what a plan of this pod changes (models/plans.py)
            pl.col("mig_instance").drop_nulls().unique().sort().alias("mig_instances"),
            *[
                pl.col(c).drop_nulls().first()
                for c in ("gpu_model", "team", "container", "source", "source_type", "provider", "instance_type")
            ],
            *[pl.col(c).drop_nulls().first() for c in ("pricing_category",)],
        )
        .sort(*KEY, "hour", nulls_last=True)
        .with_columns(
            (pl.col("engine") >= BUSY_ENGINE).fill_null(False).alias("busy"),
            ((pl.col("idle_minutes") >= IDLE_HELD_MINUTES) & (pl.col("mem_mib") >= HELD_MIB))
            .fill_null(False)
            .alias("idle_held"),
        )
    )


def stalls(pods: pl.DataFrame) -> pl.DataFrame:
    """Each pod-hour marked ``stalled``: in a run of more than STALL_LIMIT_HOURS consecutive hours of zero
    activity with memory held, right after at least MIN_BUSY_HOURS consecutive hours of a job's steady work."""
    marked = pods.with_columns(
        ((pl.col("idle_minutes") >= STALL_MINUTES) & (pl.col("mem_mib") >= HELD_MIB)).fill_null(False).alias("_z"),
        (pl.col("engine") >= TRAINING_ENGINE).fill_null(False).alias("_w"),
    )
    marked = marked.with_columns(
        ((pl.col("_z") != pl.col("_z").shift(1)) | (pl.col("_w") != pl.col("_w").shift(1)))
        .fill_null(True)
        .cum_sum()
        .over(KEY)
        .alias("_run")
    )
    runs = (
        marked.group_by(*KEY, "_run")
        .agg(pl.len().alias("_n"), pl.col("_z").first(), pl.col("_w").first())
        .sort(*KEY, "_run", nulls_last=True)
        .with_columns(
            pl.col("_w").shift(1).over(KEY).alias("_after_work"),
            pl.col("_n").shift(1).over(KEY).alias("_work_hours"),
        )
        .with_columns(
            (
                pl.col("_z")
                & (pl.col("_n") > STALL_LIMIT_HOURS)
                & pl.col("_after_work").fill_null(False)
                & (pl.col("_work_hours").fill_null(0) >= MIN_BUSY_HOURS)
            ).alias("stalled")
        )
    )
    return marked.join(runs.select(*KEY, "_run", "stalled"), on=[*KEY, "_run"], how="left", nulls_equal=True).drop(
        "_z", "_w", "_run"
    )


def input_bound(pods: pl.DataFrame) -> pl.Expr:
    """An input-bound hour: busy bursts with the engine dropping to idle between them, low SM activity,
    and the host feeding the GPU in the gaps."""
    return (
        (pl.col("engine") >= 0.1)
        & (pl.col("dips") >= INPUT_DIPS)
        & (pl.col("sm") < INPUT_SM_BELOW)
        & (pl.col("rx_idle") >= INPUT_RX_BPS)
    ).fill_null(False)


def fp32_bound(tensor_ratio: dict[str, float]) -> pl.Expr:
    """A busy hour on a tensor-core GPU with the FP32 pipe busy and the tensor pipe near zero."""
    tensor_core = pl.col("gpu_model").replace_strict(
        {m: r >= TENSOR_CORE_RATIO for m, r in tensor_ratio.items()}, default=False, return_dtype=pl.Boolean
    )
    return (
        pl.col("busy") & tensor_core & (pl.col("fp32") >= FP32_BUSY) & (pl.col("tensor") < TENSOR_NEAR_ZERO)
    ).fill_null(False)


def memory_bound() -> pl.Expr:
    """A busy hour whose memory interface is saturated while the tensor pipe waits."""
    return (
        pl.col("busy")
        & (pl.col("dram") >= DRAM_SATURATED_MEAN)
        & (pl.col("dram_p95") >= DRAM_SATURATED_P95)
        & (pl.col("tensor") < DRAM_TENSOR_BELOW)
    ).fill_null(False)
