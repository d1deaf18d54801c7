"""Job phases as DCGM exporter samples: minute by minute, what the profiling fields read while a pod trains,
waits for input, stalls, sits in an idle notebook or serves a memory-bound model, and the healthy phases
that look like them (a checkpoint pause, an evaluation pass, a warm-up, a tensor-core job's optimizer
step). The busy-waste evaluation (jobs/eval_busy.py) plants them; the tests serve them from a loopback
DCGM exporter. Values follow what the profiling fields mean (DCGM's field reference: ratios of cycles
0-1, PCIe in bytes per second); the noise is seeded.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

GIB = 1024.0  # MiB

# field -> DCGM exporter metric
METRICS = {
    "engine": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "sm": "DCGM_FI_PROF_SM_ACTIVE",
    "occupancy": "DCGM_FI_PROF_SM_OCCUPANCY",
    "tensor": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "fp16": "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "fp32": "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "dram": "DCGM_FI_PROF_DRAM_ACTIVE",
    "rx": "DCGM_FI_PROF_PCIE_RX_BYTES",
    "tx": "DCGM_FI_PROF_PCIE_TX_BYTES",
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "mem": "DCGM_FI_DEV_FB_USED",
    "free": "DCGM_FI_DEV_FB_FREE",
}
BUSY_BF16 = {"engine": 0.92, "sm": 0.85, "occupancy": 0.45, "tensor": 0.42, "fp16": 0.25, "fp32": 0.08, "dram": 0.45}
BUSY_FP32 = {"engine": 0.93, "sm": 0.88, "occupancy": 0.5, "tensor": 0.003, "fp16": 0.0, "fp32": 0.42, "dram": 0.5}
IDLE = {"engine": 0.0, "sm": 0.0, "occupancy": 0.0, "tensor": 0.0, "fp16": 0.0, "fp32": 0.0, "dram": 0.0}
SERVING = {"engine": 0.85, "sm": 0.55, "occupancy": 0.12, "tensor": 0.1, "fp16": 0.05, "fp32": 0.03, "dram": 0.86}
EVAL = {"engine": 0.7, "sm": 0.6, "occupancy": 0.3, "tensor": 0.22, "fp16": 0.12, "fp32": 0.12, "dram": 0.5}
LIGHT = {"engine": 0.1, "sm": 0.08, "occupancy": 0.05, "tensor": 0.03, "fp16": 0.02, "fp32": 0.02, "dram": 0.06}
NOTEBOOK = {"engine": 0.45, "sm": 0.4, "occupancy": 0.2, "tensor": 0.1, "fp16": 0.05, "fp32": 0.15, "dram": 0.2}

PHASES = (
    "train_bf16",
    "train_fp32",
    "input_bound",
    "stalled",
    "notebook_idle",
    "notebook_active",
    "serving_memory_bound",
    "checkpoint_pause",
    "fp32_checkpoint_pause",
    "eval_pass",
    "warmup",
    "optimizer_step",
    "light_serving",
)


def _jitter(rng: random.Random, base: dict[str, float], scale: float = 0.04) -> dict[str, float]:
    return {k: min(1.0, max(0.0, v + rng.uniform(-scale, scale) * (v > 0))) for k, v in base.items()}


def hour_minutes(phase: str, rng: random.Random, mem_gib: float, total_gib: float = 80.0) -> Iterator[dict]:
    """60 minutes of one phase: each a dict of METRICS fields."""
    bursts = _plan(phase, rng)
    for base in bursts:
        values = _jitter(rng, base)
        busy = values["engine"] >= 0.05
        if phase == "input_bound" and not busy:
            rx = rng.uniform(400e6, 900e6)  # the next batch crossing PCIe while the engine waits
        elif phase in ("stalled", "notebook_idle") or not busy:
            rx = rng.uniform(0, 2e5)
        else:
            rx = rng.uniform(80e6, 200e6)
        values["rx"], values["tx"] = rx, rx * rng.uniform(0.05, 0.2)
        values["util"] = 100.0 * values["engine"] if phase == "light_serving" else 100.0 * busy
        values["mem"] = mem_gib * GIB * rng.uniform(0.98, 1.0)
        values["free"] = total_gib * GIB - values["mem"]
        yield values


def _plan(phase: str, rng: random.Random) -> list[dict[str, float]]:
    """The 60 minutes' base values of a phase."""
    steady = {"train_bf16": BUSY_BF16, "train_fp32": BUSY_FP32, "stalled": IDLE, "notebook_idle": IDLE}
    if phase in steady or phase == "serving_memory_bound":
        return [steady.get(phase, SERVING)] * 60
    if phase == "light_serving":  # a model server at low traffic: short kernels in most minutes, never long idle
        return [LIGHT if rng.random() < 0.85 else IDLE for _ in range(60)]
    if phase == "eval_pass":
        return [EVAL] * 60
    if phase in ("checkpoint_pause", "fp32_checkpoint_pause"):  # one pause of 4-12 minutes to write a checkpoint
        work = BUSY_FP32 if phase == "fp32_checkpoint_pause" else BUSY_BF16
        pause = rng.randint(4, 12)
        at = rng.randint(5, 60 - pause - 1)
        return [work] * at + [IDLE] * pause + [work] * (60 - at - pause)
    if phase == "warmup":  # compile and load for 10-20 minutes, a few stops, then steady work
        ramp = rng.randint(10, 20)
        out = [IDLE if m % 5 == 4 else {**BUSY_BF16, "engine": 0.3, "tensor": 0.1} for m in range(ramp)]
        return out + [BUSY_BF16] * (60 - ramp)
    if phase == "optimizer_step":  # a tensor-core job: minutes of FP32-heavy optimizer work between its steps
        return [{**BUSY_BF16, "fp32": 0.45, "tensor": 0.05} if m % 4 == 0 else BUSY_BF16 for m in range(60)]
    if phase == "notebook_active":  # someone runs cells: bursts of work between reading and typing
        return [NOTEBOOK if rng.random() < 0.4 else IDLE for _ in range(60)]
    if phase == "input_bound":  # bursts of 1-3 busy minutes, 1-3 idle minutes waiting for the loader
        waits: list[dict[str, float]] = []
        while len(waits) < 60:
            waits += [BUSY_BF16] * rng.randint(1, 3) + [IDLE] * rng.randint(1, 3)
        return waits[:60]
    raise ValueError(f"unknown job phase {phase!r} (known: {', '.join(PHASES)})")


@dataclass(frozen=True)
class Pod:
    """A pod on some GPUs of a node: its phase in each hour (None: not running)."""

    namespace: str
    pod: str
    gpu_uuids: tuple[str, ...]
    phases: tuple[str | None, ...]
    mem_gib: float
    model_name: str = "NVIDIA A100-SXM4-80GB"
    host: str = "node-a"


def exposition_rows(pods: list[Pod], start_ms: int, seed: int) -> list[tuple[str, str, float, int]]:
    """(metric, labels, value, timestamp ms) rows of every pod's minutes, as dcgm-exporter labels them."""
    rng = random.Random(seed)
    rows = []
    for pod in pods:
        for index, uuid in enumerate(pod.gpu_uuids):
            labels = (
                f'{{gpu="{index}",UUID="{uuid}",device="nvidia{index}",modelName="{pod.model_name}",'
                f'Hostname="{pod.host}",container="main",namespace="{pod.namespace}",pod="{pod.pod}"}}'
            )
            for hour, phase in enumerate(pod.phases):
                if phase is None:
                    continue
                for minute, values in enumerate(hour_minutes(phase, rng, pod.mem_gib)):
                    ts = start_ms + (hour * 60 + minute) * 60_000
                    rows += [(metric, labels, round(values[f], 6), ts) for f, metric in METRICS.items()]
    return rows
