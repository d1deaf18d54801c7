"""The five busy-waste kinds' recommend steps (their specs: models/kinds/<kind>.py; rules:
models/busy_rules.py; findings: models/busy_findings.py). Each names its pattern, marks a pod's hours,
prices the hours that show it from the bill (the cost allocation charged the pod) and adds its evidence.
"""

from __future__ import annotations

from decimal import Decimal

import polars as pl

from gpufinops.models import busy_rules as rules
from gpufinops.models.busy_findings import Pattern, findings
from gpufinops.models.busy_profile import BusyInputs
from gpufinops.models.recommendation import Findings, money

ENGINE = {"gr_active_mean": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "held_idle_minutes": "DCGM_FI_DEV_FB_USED"}
# What mixed precision saves of an FP32 job's GPU-hours: a conservative 1.5x speed-up (the PyTorch and NVIDIA
# AMP guides report 1.5-3x for convolution and transformer training; MLPerf's closed results are all mixed
# precision, so they hold no FP32 baseline to derive it from): the job needs 1/1.5 of its GPU-hours.
MIXED_PRECISION_SPEEDUP = Decimal("1.5")
# What a larger batch (or a quantized model) saves of a memory-bound server's GPU-hours: the same conservative
# 1.5x, where the resource has no quantization finding that prices it (the two are one plan: never summed).
BATCHING_SPEEDUP = Decimal("1.5")


def _agg(frame: pl.DataFrame, column: str, how: str) -> float:
    value = getattr(frame[column], how)()
    return 0.0 if value is None else float(value)


def _mean(frame: pl.DataFrame, column: str) -> float:
    return _agg(frame, column, "mean")


def _max(frame: pl.DataFrame, column: str) -> float:
    return _agg(frame, column, "max")


def _sum(frame: pl.DataFrame, column: str) -> float:
    return _agg(frame, column, "sum")


def _cost(hits: pl.DataFrame) -> Decimal:
    return Decimal(str(hits["cost"].sum()))


def _share(speedup: Decimal):
    return lambda hits: _cost(hits) * (1 - 1 / speedup)


def _with(pods: pl.DataFrame, hit: pl.Expr, pod_hit: pl.Expr) -> pl.DataFrame:
    marked = pods.with_columns(hit.alias("hit"))
    return marked.with_columns(pod_hit.over(rules.KEY).fill_null(False).alias("pod_hit"))


# ---- idle_held --------------------------------------------------------------------------------------

IDLE_HELD = Pattern(
    "idle_held",
    ENGINE,
    "cull it while idle: a notebook culler (Kubeflow's CULL_IDLE_TIME, JupyterHub's idle-culler) or SkyPilot "
    "`autostop: {idle_minutes: ...}` at the idle minutes measured, so the GPU returns to the pool",
    "A culled notebook loses its kernel state: the user restarts it (and reloads the model) on return.",
    releases=True,
)


def idle_held(inputs: BusyInputs, settings: None = None) -> Findings:
    def mark(pods: pl.DataFrame) -> pl.DataFrame:
        stalled = rules.stalls(pods)
        share = pl.col("idle_held").mean() >= rules.IDLE_HELD_SHARE
        return _with(
            stalled,
            pl.col("idle_held"),
            share
            & (pl.col("idle_held").sum() >= rules.IDLE_HELD_MIN_HOURS)
            & ~pl.col("stalled").fill_null(False).any(),
        )

    def extra(rows: pl.DataFrame, hits: pl.DataFrame) -> dict:
        minutes = _sum(hits, "idle_minutes")
        return {
            "idle_held_minutes": round(minutes),
            "idle_held_share": round(hits.height / rows.height, 3),
            "mem_held_gib": round(_max(hits, "mem_mib") / 1024, 1),
            "autostop_idle_minutes": 60,
            "priced_as": "the GPU-hours held idle, at what allocation charged the pod for them",
        }

    return findings(IDLE_HELD, inputs, mark, _cost, extra)


# ---- stalled_job ------------------------------------------------------------------------------------

STALLED = Pattern(
    "stalled_job",
    ENGINE,
    "stop the job and alert its owner: it did steady work, then held its GPUs at zero activity for longer "
    f"than {rules.STALL_LIMIT_HOURS} hours (a hung collective, a dead data loader, a deadlock)",
    "A job paused on purpose (waiting for a dependency) is stopped too: its owner restarts it from its checkpoint.",
    releases=True,
)


def stalled_job(inputs: BusyInputs, settings: None = None) -> Findings:
    def mark(pods: pl.DataFrame) -> pl.DataFrame:
        stalled = rules.stalls(pods).with_columns(pl.col("stalled").fill_null(False))
        return _with(stalled, pl.col("stalled"), pl.col("stalled").any())

    def extra(rows: pl.DataFrame, hits: pl.DataFrame) -> dict:
        per_hour = money(_cost(hits) / hits.height)
        still = bool(rows["stalled"][-1])
        return {
            "stall_limit_hours": rules.STALL_LIMIT_HOURS,
            "stalled_hours": hits.height,
            "busy_hours_before": int(rows.filter(pl.col("hour") < hits["hour"].min())["busy"].sum()),
            "stalled_since": hits["hour"].min(),
            "still_stalled": still,
            "cost_per_stalled_hour_usd": per_hour,
            "alert": f"owner of {rows['namespace'][0]}/{rows['pod'][0]}: stalled {hits.height} h, ${per_hour}/h",
            "priced_as": "each stalled hour at what allocation charged the pod for it",
        }

    return findings(STALLED, inputs, mark, _cost, extra)


# ---- input_bound ------------------------------------------------------------------------------------

INPUT_BOUND = Pattern(
    "input_bound",
    {**ENGINE, "idle_dips": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "pcie_rx_idle_bps": "DCGM_FI_PROF_PCIE_RX_BYTES"},
    "feed the GPU faster: more data-loader workers and prefetching (PyTorch DataLoader num_workers, "
    "prefetch_factor, pin_memory), and a cache tier in front of the dataset's storage",
    "More loader workers need host CPU and memory; a cache tier is a new cost of its own.",
)


def input_bound(inputs: BusyInputs, settings: None = None) -> Findings:
    def mark(pods: pl.DataFrame) -> pl.DataFrame:
        active = pl.col("engine") >= 0.1
        hit = rules.input_bound(pods)
        share = (hit.filter(active).mean() >= rules.PATTERN_SHARE) & (hit.sum() >= rules.PATTERN_MIN_HOURS)
        return _with(pods, hit, share)

    def price(hits: pl.DataFrame) -> Decimal:
        return sum(
            (Decimal(str(c)) * Decimal(str(m)) / 60 for c, m in zip(hits["cost"], hits["idle_minutes"])), Decimal(0)
        )

    def extra(rows: pl.DataFrame, hits: pl.DataFrame) -> dict:
        return {
            "idle_share": round(_mean(hits, "idle_minutes") / 60, 3),
            "drops_to_idle_per_hour": round(_mean(hits, "dips"), 1),
            "sm_active_pct": round(100 * _mean(hits, "sm"), 1),
            "host_to_device_in_gaps_mbps": round(_mean(hits, "rx_idle") / 1e6, 1),
            "priced_as": "the idle share of its GPU-hours, at what allocation charged the pod for them",
        }

    return findings(INPUT_BOUND, inputs, mark, price, extra)


# ---- no_tensor_cores --------------------------------------------------------------------------------

NO_TENSOR_CORES = Pattern(
    "no_tensor_cores",
    {"fp32_active_mean": "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "tensor_active_mean": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
    "train in mixed precision: BF16 autocast (or FP16 with loss scaling), or at least TF32 matmuls "
    "(torch.backends.cuda.matmul.allow_tf32), so the tensor cores do the work the FP32 pipe does now",
    "Lower precision can change convergence: compare a short run's loss curve before switching the whole job.",
)


def no_tensor_cores(inputs: BusyInputs, settings: None = None) -> Findings:
    def mark(pods: pl.DataFrame) -> pl.DataFrame:
        hit = rules.fp32_bound(inputs.tensor_ratio)
        busy = pl.col("busy")
        tensor_busy = (busy & (pl.col("tensor") >= rules.TENSOR_BUSY)).fill_null(False).any()
        share = (hit.filter(busy).mean() >= rules.FP32_SHARE) & (hit.sum() >= rules.PATTERN_MIN_HOURS)
        return _with(pods, hit, share & ~tensor_busy)

    def extra(rows: pl.DataFrame, hits: pl.DataFrame) -> dict:
        return {
            "fp32_pipe_pct": round(100 * _mean(hits, "fp32"), 1),
            "tensor_pipe_pct": round(100 * _mean(hits, "tensor"), 2),
            "tensor_core_peak_over_fp32": round(inputs.tensor_ratio.get(rows["gpu_model"][0] or "", 0), 1),
            "assumed_speedup": float(MIXED_PRECISION_SPEEDUP),
            "priced_as": f"its FP32 GPU-hours less 1/{MIXED_PRECISION_SPEEDUP} of them (a conservative mixed-"
            "precision speed-up; docs/models.md says where it comes from)",
        }

    return findings(NO_TENSOR_CORES, inputs, mark, _share(MIXED_PRECISION_SPEEDUP), extra)


# ---- memory_bound_inference -------------------------------------------------------------------------

MEMORY_BOUND = Pattern(
    "memory_bound_inference",
    {"dram_active_mean": "DCGM_FI_PROF_DRAM_ACTIVE", "tensor_active_mean": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
    "serve larger batches (continuous batching: vLLM max_num_seqs, Triton dynamic batching) or a quantized "
    "model, so each read of the weights serves more tokens",
    "Larger batches raise each request's latency; a quantized model must be checked for quality.",
)


def memory_bound_inference(inputs: BusyInputs, settings: None = None) -> Findings:
    serving = inputs.serving_pods

    def mark(pods: pl.DataFrame) -> pl.DataFrame:
        hit = rules.memory_bound()
        share = (hit.filter(pl.col("busy")).mean() >= rules.PATTERN_SHARE) & (hit.sum() >= rules.PATTERN_MIN_HOURS)
        pods = pods.with_columns(
            pl.struct("namespace", "pod")
            .map_elements(lambda k: not serving or (k["namespace"], k["pod"]) in serving, return_dtype=pl.Boolean)
            .alias("_serving")
        )
        return _with(pods, hit, share & pl.col("_serving").all())

    def price(hits: pl.DataFrame) -> Decimal:
        if hits["resource_id"][0] in inputs.quantization:
            return Decimal(0)  # the quantization finding prices the same change on this resource
        return _share(BATCHING_SPEEDUP)(hits)

    def extra(rows: pl.DataFrame, hits: pl.DataFrame) -> dict:
        linked = inputs.quantization.get(rows["resource_id"][0])
        return {
            "dram_active_pct": round(100 * _mean(hits, "dram"), 1),
            "dram_active_p95_pct": round(100 * _max(hits, "dram_p95"), 1),
            "tensor_pipe_pct": round(100 * _mean(hits, "tensor"), 1),
            "quantization_finding": linked,
            "priced_as": "priced by the quantization finding on the same resource (one plan)"
            if linked
            else f"its memory-bound GPU-hours less 1/{BATCHING_SPEEDUP} of them (a conservative batching gain)",
        }

    return findings(MEMORY_BOUND, inputs, mark, price, extra)
