"""The demo's MIG-partitioned GPU: one A100 split into GPU instances, a vLLM pod serving on one slice.

nlp's GCP VM ``nlp-mig-serve`` (``a2-highgpu-1g``: one A100-SXM4-40GB, on demand, always on) runs with MIG
enabled and four GPU instances (:data:`SLICES`): ``3g.20gb`` holds the vLLM pod ``llm/vllm-llama-3b-mig-0``
(Llama 3.2 3B; its token counters are :data:`SERVER`, recorded by :mod:`simulator.demo_serving`),
``2g.10gb`` an embedding service (``search/embed-bge-0``, no token counters), and two ``1g.5gb`` instances
no pod holds. The host's DCGM exporter (with its Kubernetes pod mapping) reports each instance as its own
series, as dcgm-exporter does on a MIG GPU: ``GPU_I_PROFILE`` / ``GPU_I_ID``, the ``namespace`` / ``pod`` /
``container`` of the pod holding the instance, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (``DCGM_FI_DEV_GPU_UTIL``
is not supported on MIG instances), the instance's ``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE``, and the GPU's
``DCGM_FI_DEV_POWER_USAGE`` repeated on each instance.

The shared-GPU allocation (``derived/allocation.py``) charges each pod its slice's share of the VM's
GPU-hour (3/7 for ``3g.20gb`` under ``mig_weight = "compute"``), the empty slices' share stays unallocated,
and ``gpufinops unit-costs`` prices the 3B model's tokens from its slice's allocated cost, not the whole GPU's.
The VM is billed on demand and busy every hour, so, like the fleet's steady machines, it is a commitment truth
(ground_truth.json "commitments": a 1-year CUD on ``a2-highgpu-1g`` covers the VM whatever its MIG layout).

Randomness comes only from ``numpy.random.default_rng((seed, MIG_STREAM))``: its own stream, so the
machine moves none of the rest of the fleet's draws (they are keyed by the machine's place in FLEET).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.simulator.dcgm_export import gauge_exposition, write_host_exposition
from gpufinops.simulator.demo_billing import Machine, compute_lines, daily_lines, gcp_resource_id, machine_truth
from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples
from gpufinops.simulator.demo_serving import SERVERS, load_curve
from gpufinops.simulator.demo_smi import bus_ids, gpu_uuid
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, INSTANCE_GPUS, Spec

MIG_STREAM = 0x4D4947  # "MIG": the machine's own random stream
SPEC = Spec(
    "gcp",
    "a2-highgpu-1g",
    "us-central1-b",
    "nlp",
    "online_inference",
    "on_demand",
    "always",
    "mig",
    precision="fp16",
    name="nlp-mig-serve",
)
SERVER = next(s for s in SERVERS if s.machine == SPEC.name)  # its token counters (simulator/demo_serving.py)


@dataclass(frozen=True)
class MigSlice:
    profile: str  # GPU_I_PROFILE
    instance: int  # GPU_I_ID
    memory_mib: int  # the instance's framebuffer (FB_USED + FB_FREE)
    namespace: str | None = None  # the pod holding the instance (None: no pod)
    pod: str | None = None
    container: str | None = None
    active: tuple[float, float] = (0.0, 0.0)  # GR_ENGINE_ACTIVE at night, at the weekday peak
    used: float = 0.0  # share of the instance's framebuffer the pod holds

    @property
    def compute_slices(self) -> int:
        return int(self.profile.split("g.", 1)[0])


SLICES = (
    MigSlice("3g.20gb", 2, 19968, SERVER.namespace, SERVER.pod, "vllm", (0.08, 0.78), 0.9),
    MigSlice("2g.10gb", 3, 9856, "search", "embed-bge-0", "embedder", (0.12, 0.55), 0.62),
    MigSlice("1g.5gb", 9, 4864),
    MigSlice("1g.5gb", 10, 4864),
)
GPU_SLICES = 7  # an A100's compute slices


def machine() -> Machine:
    model, count = INSTANCE_GPUS[SPEC.instance_type]
    assert SPEC.name is not None
    return Machine(SPEC, SPEC.name, gcp_resource_id(SPEC), model, count, SPEC.zone.rsplit("-", 1)[0])


@dataclass
class MigSamples:
    """Per sample (rows) and slice (columns, in SLICES order), for every sample of the window."""

    active: np.ndarray  # GR_ENGINE_ACTIVE, a ratio with 3 decimals
    used_mib: np.ndarray  # FB_USED, whole MiB
    power: np.ndarray  # the GPU's POWER_USAGE, W (one column)


def mig_samples(clock: Clock, rng: np.random.Generator) -> MigSamples:
    """Each slice's activity follows the serving day (:func:`simulator.demo_serving.load_curve`); the GPU
    draws its idle power plus its TDP's share of the compute-weighted activity."""
    hw = GPU_HARDWARE["A100-40GB"]
    n = clock.hours * SAMPLES_PER_HOUR
    moments = [clock.start + timedelta(minutes=15 * i) for i in range(n)]
    load = np.array([(load_curve(m) - 0.15) / 0.85 for m in moments])
    lo = np.array([s.active[0] for s in SLICES])
    hi = np.array([s.active[1] for s in SLICES])
    active = (lo + (hi - lo) * load[:, None]) * rng.uniform(0.9, 1.1, (n, len(SLICES)))
    active = np.round(np.clip(active, 0.0, 1.0), 3)
    total = np.array([s.memory_mib for s in SLICES], dtype=float)
    share = np.array([s.used for s in SLICES])
    used = np.where(share > 0, total * share + rng.normal(0, 48, (n, len(SLICES))), 13.0)
    used = np.clip(np.round(used), 0, total).astype(np.int64)
    weights = np.array([s.compute_slices for s in SLICES]) / GPU_SLICES
    busy = active @ weights
    power = hw.idle_w + (hw.tdp_w - hw.idle_w) * 0.92 * busy + rng.normal(0, 0.01 * hw.tdp_w, n)
    return MigSamples(active, used, np.round(np.clip(power, 0.9 * hw.idle_w, hw.tdp_w), 2))


def whole_gpu(samples: MigSamples) -> Samples:
    """The GPU's samples as one device (the bill's ``compute_lines`` takes them; cloud prices ignore them)."""
    weights = np.array([s.compute_slices for s in SLICES]) / GPU_SLICES
    util = np.floor(100 * (samples.active @ weights)).astype(np.int64)[:, None]
    return Samples(util, util // 2, samples.used_mib.sum(axis=1)[:, None], samples.power[:, None])


def exposition(m: Machine, clock: Clock, samples: MigSamples, seed: int) -> str:
    """The host's DCGM exporter ``/metrics`` history: every family lists its samples scrape by scrape."""
    hw = GPU_HARDWARE[m.gpu_model]
    uuid, bus = gpu_uuid(seed, m.host, 0), bus_ids("gcp", 1)[0]
    labels = []
    for s in SLICES:
        text = (
            f'gpu="0",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia0",modelName="{hw.smi_name}",'
            f'Hostname="{m.host}",GPU_I_PROFILE="{s.profile}",GPU_I_ID="{s.instance}"'
        )
        if s.pod:
            text += f',container="{s.container}",namespace="{s.namespace}",pod="{s.pod}"'
        labels.append(text)
    stamps = [int((clock.start + timedelta(minutes=15 * i)).timestamp() * 1000) for i in range(len(samples.power))]
    families = (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", samples.active, "{:.3f}"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", samples.used_mib, "{}"),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", _free(samples.used_mib), "{}"),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", np.repeat(samples.power[:, None], len(SLICES), 1), "{:.2f}"),
    )
    return gauge_exposition(families, labels, stamps)


def _free(used: np.ndarray) -> np.ndarray:
    return np.array([s.memory_mib for s in SLICES], dtype=np.int64) - used


@dataclass(frozen=True)
class MigFleet:
    machine: Machine
    lines: list[dict]  # the VM's bill (FOCUS-named rows, like the fleet's)
    effective: dict[int, Decimal]  # hour index -> the GPU-hour's EffectiveCost
    running: np.ndarray  # a bool per hour of the window: billed (always on)
    exposition: str  # what its DCGM exporter recorded


def generate(clock: Clock, seed: int) -> MigFleet:
    """The MIG machine's bill and DCGM exposition over the window."""
    rng = np.random.default_rng((seed, MIG_STREAM))
    m = machine()
    running = np.ones(clock.hours, dtype=bool)
    samples = mig_samples(clock, rng)
    compute, effective = compute_lines(m, clock, running, rng, whole_gpu(samples))
    lines = compute + daily_lines(m, clock, running, rng)
    return MigFleet(m, lines, effective, running, exposition(m, clock, samples, seed))


def truth(m: Machine) -> dict:
    """The machine's ground_truth.json entry: the fleet's fields, and its MIG layout."""
    return {
        **machine_truth(m, None),
        "mig_slices": [
            {"mig_instance": f"{s.profile}/{s.instance}", "namespace": s.namespace, "pod": s.pod} for s in SLICES
        ],
    }


def write_exposition(out_dir: Path, fleet: MigFleet) -> Path:
    """``out_dir/<host>.prom`` (rewritten only when its bytes change); stale files of other hosts removed."""
    return write_host_exposition(out_dir, fleet.machine.host, fleet.exposition)
