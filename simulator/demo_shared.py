"""The demo's shared Kubernetes node: one g5.12xlarge (4 × A10G) whose GPUs four pods of three teams hold.

platform's EKS node ``ip-10-0-40-12`` (on demand, always on, billed to ``platform``) runs one pod per GPU
(:data:`PODS`): research's Jupyter notebook on GPU 0 holds 14 GiB and idles except weekday mornings
(09:00-12:00 UTC), nlp's fine-tuning job on GPU 1 trains for the first :data:`NLP_BUSY_SHARE` of the window
and then stalls at 0 % with its memory held, and speech's two trainers keep GPUs 2 and 3 busy. The host's
DCGM exporter (with its Kubernetes pod mapping) records each GPU's ``DCGM_FI_DEV_GPU_UTIL``,
``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE`` and ``DCGM_FI_DEV_POWER_USAGE`` with the pod's ``namespace`` / ``pod``
/ ``container`` labels; the metrics source maps those namespaces to their teams (:data:`NAMESPACE_TEAMS`).

The node is never idle as a whole (the trainers run every hour), so no node-level idle finding takes it;
research and nlp each leave a GPU idle, and the idle model finds two ``allocated_idle`` findings on
disjoint GPUs: two primary plans, each in its own team's scope (docs/models.md, *Shared nodes*).

Randomness comes only from ``numpy.random.default_rng((seed, SHARED_STREAM))``: its own stream, so the
node moves none of the rest of the fleet's draws.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.simulator.dcgm_export import gauge_exposition, write_host_exposition
from gpufinops.simulator.demo_billing import Machine, compute_lines, daily_lines, machine_truth
from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples
from gpufinops.simulator.demo_smi import bus_ids, gpu_uuid
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, INSTANCE_GPUS, Spec

SHARED_STREAM = 0x534852  # "SHR": the node's own random stream
HOST = "ip-10-0-40-12"  # the fleet's AWS hosts are ip-10-0-{1..31}-*: never this one
SPEC = Spec("aws", "g5.12xlarge", "us-east-1a", "platform", "training", "on_demand", "always", "shared")
NLP_BUSY_SHARE = 0.4  # nlp's job trains for this share of the window, then stalls holding its GPU


@dataclass(frozen=True)
class Pod:
    namespace: str
    pod: str
    container: str
    mem_mib: int  # what it holds, busy or idle
    pattern: str  # notebook (weekday mornings) | stalled (busy, then 0 %) | busy


PODS = (
    Pod("research", "jupyter-hchen-0", "notebook", 14336, "notebook"),
    Pod("nlp", "finetune-mistral-7b-0", "trainer", 20480, "stalled"),
    Pod("speech", "asr-train-0", "trainer", 21504, "busy"),
    Pod("speech", "asr-train-1", "trainer", 21504, "busy"),
)
NAMESPACE_TEAMS = {"research": "research", "nlp": "nlp", "speech": "speech"}


def machine() -> Machine:
    model, count = INSTANCE_GPUS[SPEC.instance_type]
    resource_id = "i-0" + hashlib.sha256(f"shared-node|{HOST}".encode()).hexdigest()[:16]
    return Machine(SPEC, HOST, resource_id, model, count, SPEC.zone[:-1])


def _busy(clock: Clock, n: int) -> np.ndarray:
    """Per sample and GPU: does the pod on it work (``True``) or hold its GPU idle."""
    moments = [clock.start + timedelta(minutes=15 * i) for i in range(n)]
    mornings = np.array([m.weekday() < 5 and 9 <= m.hour < 12 for m in moments])
    stalled_from = int(NLP_BUSY_SHARE * n)
    columns = {
        "notebook": mornings,
        "stalled": np.arange(n) < stalled_from,
        "busy": np.ones(n, dtype=bool),
    }
    return np.stack([columns[p.pattern] for p in PODS], axis=1)


def samples(clock: Clock, rng: np.random.Generator) -> tuple[Samples, np.ndarray]:
    """The GPUs' samples (what the bill's ``compute_lines`` takes) and the busy mask they follow."""
    hw = GPU_HARDWARE["A10G"]
    n = clock.hours * SAMPLES_PER_HOUR
    busy = _busy(clock, n)
    util = np.where(busy, rng.integers(70, 96, (n, len(PODS))), 0).astype(np.int64)
    held = np.array([p.mem_mib for p in PODS])
    mem = np.clip(held + rng.integers(-64, 65, (n, len(PODS))), 0, hw.memory_total_mib).astype(np.int64)
    power = hw.idle_w + (hw.tdp_w - hw.idle_w) * util / 100 + rng.normal(0, 0.01 * hw.tdp_w, (n, len(PODS)))
    power = np.round(np.clip(power, 0.9 * hw.idle_w, hw.tdp_w), 2)
    return Samples(util, util // 2, mem, power), busy


def exposition(m: Machine, clock: Clock, gpu: Samples, seed: int) -> str:
    """The host's DCGM exporter ``/metrics`` history: every family lists its samples scrape by scrape."""
    hw = GPU_HARDWARE[m.gpu_model]
    buses = bus_ids("aws", m.gpu_count)
    labels = [
        f'gpu="{i}",UUID="{gpu_uuid(seed, m.host, i)}",pci_bus_id="{buses[i]}",device="nvidia{i}",'
        f'modelName="{hw.smi_name}",Hostname="{m.host}",container="{p.container}",namespace="{p.namespace}",'
        f'pod="{p.pod}"'
        for i, p in enumerate(PODS)
    ]
    stamps = [int((clock.start + timedelta(minutes=15 * i)).timestamp() * 1000) for i in range(len(gpu.util))]
    families = (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", gpu.util, "{}"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gpu.mem_used, "{}"),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", hw.memory_total_mib - gpu.mem_used, "{}"),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", gpu.power, "{:.2f}"),
    )
    return gauge_exposition(families, labels, stamps)


@dataclass(frozen=True)
class SharedNode:
    machine: Machine
    lines: list[dict]  # the node's bill (FOCUS-named rows, like the fleet's)
    effective: dict[int, Decimal]  # hour index -> the node's EffectiveCost in that hour
    idle_hours: dict[str, int]  # namespace -> hours its pod held its GPU at 0 % (every sample of the hour)
    exposition: str
    idle_cost: dict[str, Decimal] = field(default_factory=dict)  # namespace -> its GPU's share of those hours


def generate(clock: Clock, seed: int) -> SharedNode:
    """The shared node's bill and DCGM exposition over the window."""
    rng = np.random.default_rng((seed, SHARED_STREAM))
    m = machine()
    running = np.ones(clock.hours, dtype=bool)
    gpu, busy = samples(clock, rng)
    compute, effective = compute_lines(m, clock, running, rng, gpu)
    lines = compute + daily_lines(m, clock, running, rng)
    hourly_idle = np.logical_not(busy.reshape(clock.hours, SAMPLES_PER_HOUR, len(PODS)).any(axis=1))
    idle = {p.namespace: int(hourly_idle[:, i].sum()) for i, p in enumerate(PODS) if p.pattern != "busy"}
    share = Decimal(len(PODS))  # one GPU of the node's: its quarter of each hour's EffectiveCost
    idle_cost = {
        p.namespace: sum((effective[h] / share for h in np.flatnonzero(hourly_idle[:, i]).tolist()), Decimal(0))
        for i, p in enumerate(PODS)
        if p.pattern != "busy"
    }
    return SharedNode(m, lines, effective, idle, exposition(m, clock, gpu, seed), idle_cost)


def truth(node: SharedNode) -> dict:
    """The node's ground_truth.json entry: the fleet's fields, its pods and the GPU-hours each idle pod
    held (allocation charges each a quarter of the node's hour: the GPU it holds)."""
    return {
        **machine_truth(node.machine, None),
        "pods": [
            {"gpu": i, "namespace": p.namespace, "pod": p.pod, "team": NAMESPACE_TEAMS[p.namespace]}
            for i, p in enumerate(PODS)
        ],
        "idle_pod_hours": node.idle_hours,
        # what each idle pod's GPU cost in its idle hours (evaluate prices a pod's finding by it)
        "idle_pod_cost_usd": {ns: str(cost) for ns, cost in node.idle_cost.items()},
    }


def write_exposition(out_dir: Path, node: SharedNode) -> Path:
    """``out_dir/<host>.prom`` (rewritten only when its bytes change); stale files of other hosts removed."""
    return write_host_exposition(out_dir, node.machine.host, node.exposition)
