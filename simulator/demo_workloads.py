"""The simulated demo fleet: its machines, GPU hardware, run schedules, utilisation profiles, logs.

Used by :mod:`simulator.demo_fleet`, which prices the fleet and writes its exports. :data:`FLEET` lists
every machine with its workload and, for the machines with planted waste, what was planted. Everything here is a pure function of its arguments and a seeded
``numpy.random.Generator``: the same generator state gives the same samples on any day.

A profile returns one value per nvidia-smi sample (every 15 minutes, four per hour) for the whole
window; the caller keeps the samples of the hours the machine ran. Values are what nvidia-smi
prints: whole-percent utilisation, whole MiB of memory, power in watts (two decimals).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

SAMPLES_PER_HOUR = 4          # nvidia-smi -l 900
WORK_START_HOUR, WORK_END_HOUR = 9, 18   # working hours, UTC, Monday to Friday
SMI_HEADER = ("timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], "
              "memory.total [MiB], memory.used [MiB], power.draw [W]")

INSTANCE_GPUS = {  # instance / machine type -> (canonical GPU model, GPU count)
    "p4d.24xlarge": ("A100-40GB", 8), "p4de.24xlarge": ("A100-80GB", 8), "p5.48xlarge": ("H100-SXM", 8),
    "g5.xlarge": ("A10G", 1), "g5.12xlarge": ("A10G", 4), "g5.48xlarge": ("A10G", 8),
    "g6.xlarge": ("L4", 1), "g6.12xlarge": ("L4", 4), "g4dn.xlarge": ("T4", 1), "g4dn.12xlarge": ("T4", 4),
    "a2-highgpu-1g": ("A100-40GB", 1), "a2-highgpu-4g": ("A100-40GB", 4), "a2-highgpu-8g": ("A100-40GB", 8),
    "a2-ultragpu-1g": ("A100-80GB", 1), "a3-highgpu-8g": ("H100-SXM", 8),
    "g2-standard-4": ("L4", 1), "g2-standard-48": ("L4", 4),
    "onprem-a40x4": ("A40", 4), "onprem-a100x8": ("A100-80GB", 8),
}


@dataclass(frozen=True)
class Spec:
    provider: str
    instance_type: str
    zone: str
    team: str
    workload: str            # training | batch_inference | online_inference | notebook
    pricing: str             # on_demand | spot | committed
    schedule: str            # see demo_workloads.running_hours
    profile: str             # see demo_workloads.gpu_samples
    checkpointing: bool = False
    precision: str | None = None
    plant: tuple[str, str] | None = None    # (kind, variant)
    name: str | None = None                 # GCP VM name
    team_label: bool = True                 # False: the bill carries no team label (as real accounts do)


FLEET: tuple[Spec, ...] = (
    Spec("aws", "p4d.24xlarge", "us-east-1a", "research", "training", "on_demand", "always", "idle",
         plant=("idle_gpu", "always_idle")),
    Spec("aws", "p4d.24xlarge", "us-east-1b", "nlp", "training", "on_demand", "always", "training",
         checkpointing=True, plant=("spot_mix", "checkpointed_on_demand")),
    Spec("aws", "p5.48xlarge", "us-east-1c", "nlp", "training", "committed", "always", "training"),
    Spec("aws", "g5.xlarge", "us-east-1a", "vision", "notebook", "on_demand", "always", "notebook",
         plant=("idle_gpu", "idle_off_hours")),
    Spec("aws", "g5.xlarge", "us-east-1a", "vision", "notebook", "on_demand", "workhours", "notebook"),
    Spec("aws", "g5.12xlarge", "us-west-2b", "recsys", "online_inference", "on_demand", "always", "online",
         precision="fp16"),
    Spec("aws", "g5.12xlarge", "us-west-2a", "vision", "training", "spot", "spot", "training", checkpointing=True),
    Spec("aws", "g5.48xlarge", "us-east-1b", "speech", "training", "on_demand", "always", "two_of_eight",
         plant=("gpu_count", "two_of_eight_busy")),
    Spec("aws", "g6.xlarge", "us-east-1c", "speech", "online_inference", "on_demand", "always", "online",
         precision="int8"),
    Spec("aws", "g6.xlarge", "us-west-2b", "nlp", "online_inference", "on_demand", "always", "online",
         precision="fp16"),
    Spec("aws", "g6.12xlarge", "us-west-2a", "recsys", "batch_inference", "spot", "bursts", "batch",
         precision="fp16"),
    Spec("aws", "g4dn.xlarge", "us-east-1a", "platform", "online_inference", "committed", "always", "online",
         precision="fp16"),
    Spec("aws", "g4dn.12xlarge", "us-east-1b", "speech", "batch_inference", "on_demand", "nightly", "batch",
         precision="int8"),
    Spec("gcp", "a2-highgpu-4g", "us-central1-a", "research", "training", "on_demand", "always", "idle",
         plant=("idle_gpu", "always_idle"), name="research-a2-sweep"),
    Spec("gcp", "a2-highgpu-8g", "us-central1-b", "vision", "training", "spot", "spot", "training",
         checkpointing=True, name="vision-train-a2"),
    Spec("gcp", "a2-ultragpu-1g", "us-central1-c", "nlp", "online_inference", "on_demand", "always", "small_model",
         precision="fp16", plant=("gpu_type", "7b_model_on_a100_80gb"), name="nlp-llm7b-serve"),
    Spec("gcp", "a2-highgpu-1g", "us-central1-a", "recsys", "online_inference", "on_demand", "always",
         "fp32_serving", precision="fp32", plant=("quantization", "fp32_serving"), name="recsys-ranker-serve"),
    Spec("gcp", "a3-highgpu-8g", "us-central1-a", "nlp", "training", "on_demand", "window:0.15:0.8", "training",
         name="nlp-pretrain-a3"),
    Spec("gcp", "g2-standard-4", "europe-west4-a", "research", "notebook", "on_demand", "always", "notebook",
         plant=("idle_gpu", "idle_off_hours"), name="research-nb-l4"),
    Spec("gcp", "g2-standard-48", "europe-west4-b", "speech", "online_inference", "committed", "always", "online",
         precision="fp16", name="speech-asr-serve"),
    Spec("gcp", "g2-standard-4", "us-central1-b", "platform", "online_inference", "on_demand", "always", "online",
         precision="int8", name="platform-embed-serve"),
    Spec("gcp", "a2-highgpu-1g", "us-central1-c", "vision", "batch_inference", "spot", "bursts", "batch",
         precision="fp16", name="vision-batch-a2", team_label=False),
    Spec("gcp", "g2-standard-4", "us-central1-a", "vision", "notebook", "on_demand", "workhours", "notebook",
         name="vision-nb-l4"),
    Spec("onprem", "onprem-a40x4", "dc1", "vision", "training", "on_demand", "always", "training", checkpointing=True),
    Spec("onprem", "onprem-a40x4", "dc1", "speech", "batch_inference", "on_demand", "always", "batch",
         precision="fp16"),
    Spec("onprem", "onprem-a100x8", "dc1", "nlp", "training", "on_demand", "always", "training", checkpointing=True),
    Spec("onprem", "onprem-a100x8", "dc1", "research", "training", "on_demand", "always", "training"),
)




@dataclass(frozen=True)
class GpuHardware:
    smi_name: str             # nvidia-smi's "name" field
    memory_total_mib: int     # nvidia-smi's "memory.total"
    tdp_w: float
    idle_w: float


# memory.total as nvidia-smi reports it (H100: the real capture in shared/data/nvidia-smi-captures).
GPU_HARDWARE: dict[str, GpuHardware] = {
    "A100-40GB": GpuHardware("NVIDIA A100-SXM4-40GB", 40960, 400.0, 52.0),
    "A100-80GB": GpuHardware("NVIDIA A100-SXM4-80GB", 81920, 400.0, 60.0),
    "H100-SXM": GpuHardware("NVIDIA H100 80GB HBM3", 81559, 700.0, 70.0),
    "A10G": GpuHardware("NVIDIA A10G", 23028, 300.0, 24.0),
    "L4": GpuHardware("NVIDIA L4", 23034, 72.0, 16.0),
    "T4": GpuHardware("Tesla T4", 15360, 70.0, 10.0),
    "A40": GpuHardware("NVIDIA A40", 46068, 300.0, 30.0),
}

# PCI bus ids as the platforms number their GPUs (p4d/p5 and DGX-style nodes, single-GPU VMs).
_BUS_AWS_8 = ("10:1C.0", "10:1D.0", "20:1C.0", "20:1D.0", "90:1C.0", "90:1D.0", "A0:1C.0", "A0:1D.0")
_BUS_AWS_SMALL = ("00:1B.0", "00:1C.0", "00:1D.0", "00:1E.0")
_BUS_ONPREM = ("07:00.0", "0F:00.0", "47:00.0", "4E:00.0", "87:00.0", "90:00.0", "B7:00.0", "BD:00.0")


def bus_ids(provider: str, gpu_count: int) -> list[str]:
    ids: tuple[str, ...]
    if provider == "aws":
        ids = _BUS_AWS_8 if gpu_count > 4 else (_BUS_AWS_SMALL[-1:] if gpu_count == 1 else _BUS_AWS_SMALL)
    elif provider == "gcp":
        ids = tuple(f"00:{4 + i:02X}.0" for i in range(gpu_count))
    else:
        ids = _BUS_ONPREM
    return [f"00000000:{b}" for b in ids[:gpu_count]]


@dataclass(frozen=True)
class Clock:
    """The simulated window: whole hours from ``start`` (inclusive) to ``end`` (exclusive), UTC."""
    start: datetime
    end: datetime

    @property
    def hours(self) -> int:
        return int((self.end - self.start).total_seconds() // 3600)

    def hour_numbers(self) -> np.ndarray:
        """Hours since the Unix epoch of every hour in the window."""
        first = int(self.start.timestamp()) // 3600
        return np.arange(first, first + self.hours, dtype=np.int64)

    def hour_of_day(self) -> np.ndarray:
        return self.hour_numbers() % 24

    def weekday(self) -> np.ndarray:
        """Monday = 0 … Sunday = 6 (1970-01-01 was a Thursday)."""
        return (self.hour_numbers() // 24 + 3) % 7

    def working_hours(self) -> np.ndarray:
        hod = self.hour_of_day()
        return (self.weekday() < 5) & (hod >= WORK_START_HOUR) & (hod < WORK_END_HOUR)


def running_hours(schedule: str, clock: Clock, rng: np.random.Generator) -> np.ndarray:
    """Which hours a machine runs (and is billed): a bool per hour of the window.

    ``always``; ``window:A:B`` (from fraction A to B of the window); ``workhours`` (weekdays
    09–18 UTC, stopped otherwise); ``nightly`` (00–06 UTC); ``spot`` (always, less a few
    interruptions of 1–5 hours); ``bursts`` (batch runs of 3–10 hours with 2–12 hour gaps).
    """
    n = clock.hours
    if schedule == "always":
        return np.ones(n, dtype=bool)
    if schedule.startswith("window:"):
        _, a, b = schedule.split(":")
        mask = np.zeros(n, dtype=bool)
        mask[int(float(a) * n):max(int(float(b) * n), int(float(a) * n) + 1)] = True
        return mask
    if schedule == "workhours":
        return clock.working_hours()
    if schedule == "nightly":
        return clock.hour_of_day() < 6
    if schedule == "spot":
        mask = np.ones(n, dtype=bool)
        for day_start in range(0, n, 24):
            if rng.random() < 0.2:
                begin = day_start + int(rng.integers(0, 24))
                mask[begin:begin + int(rng.integers(1, 6))] = False
        return mask
    if schedule == "bursts":
        mask = np.zeros(n, dtype=bool)
        hour = int(rng.integers(0, 6))
        while hour < n:
            length = int(rng.integers(3, 11))
            mask[hour:hour + length] = True
            hour += length + int(rng.integers(2, 13))
        return mask
    raise ValueError(f"unknown schedule {schedule!r}")


@dataclass
class Samples:
    """Per sample (rows) and GPU (columns), for every sample of the window."""
    util: np.ndarray       # utilization.gpu [%], int
    mem_util: np.ndarray   # utilization.memory [%], int
    mem_used: np.ndarray   # memory.used [MiB], int
    power: np.ndarray      # power.draw [W], float rounded to 2 decimals


def _diurnal(clock: Clock) -> np.ndarray:
    """0…1 per sample, peaking at 15:00 UTC, 25 % lower at weekends."""
    hod = np.repeat(clock.hour_of_day(), SAMPLES_PER_HOUR) + np.tile(np.arange(SAMPLES_PER_HOUR) / 4, clock.hours)
    weekend = np.repeat(clock.weekday() >= 5, SAMPLES_PER_HOUR)
    return (0.5 + 0.5 * np.sin(2 * np.pi * (hod - 9) / 24)) * np.where(weekend, 0.75, 1.0)


def _per_sample(hourly: np.ndarray) -> np.ndarray:
    return np.repeat(hourly, SAMPLES_PER_HOUR)


def _busy(rng, shape, lo, hi, memory_mib, mem_lo, mem_hi):
    util = rng.uniform(lo, hi, shape)
    mem = memory_mib * rng.uniform(mem_lo, mem_hi, shape[1]) + rng.normal(0, 0.004 * memory_mib, shape)
    return util, mem


def gpu_samples(profile: str, hw: GpuHardware, gpu_count: int, clock: Clock, rng: np.random.Generator) -> Samples:
    """Utilisation, memory and power of ``gpu_count`` GPUs running ``profile`` over the window.

    Profiles: ``training`` (steady 85–99 %, dips at checkpoints, 78–92 % memory), ``batch``
    (bursty: most hours 55–95 %, others 8–25 %), ``online`` (diurnal 15–65 %), ``notebook``
    (working hours 6–75 %, 0–3 % at night and weekends, memory held by the live kernel), ``idle``
    (0–2 %, a few hundred MiB), ``two_of_eight`` (GPUs 0–1 busy 60–90 %, the rest under 5 %),
    ``small_model`` (a 7B model on a big GPU: 15–25 %, 16–18 GiB), ``fp32_serving`` (diurnal
    25–55 %, ~30 GiB of 40 in FP32).
    """
    n_samples = clock.hours * SAMPLES_PER_HOUR
    shape = (n_samples, gpu_count)
    total = float(hw.memory_total_mib)
    mem_util_factor = 0.45
    if profile == "training":
        util, mem = _busy(rng, shape, 85, 99, total, 0.78, 0.92)
        checkpoint = rng.random(n_samples) < 1 / 12
        util[checkpoint] = rng.uniform(25, 50, (int(checkpoint.sum()), gpu_count))
    elif profile == "batch":
        busy_hour = _per_sample(rng.random(clock.hours) < 0.85)[:, None]
        util = np.where(busy_hour, rng.uniform(55, 95, shape), rng.uniform(8, 25, shape))
        mem = total * rng.uniform(0.5, 0.7, gpu_count) + rng.normal(0, 0.01 * total, shape)
    elif profile in ("online", "fp32_serving", "small_model"):
        lo, hi = {"online": (15, 65), "fp32_serving": (25, 55), "small_model": (15, 25)}[profile]
        util = lo + (hi - lo) * _diurnal(clock)[:, None] + rng.normal(0, 2.5, shape)
        util = np.clip(util, lo, hi)
        if profile == "online":
            mem = total * rng.uniform(0.6, 0.8, gpu_count) + rng.normal(0, 0.01 * total, shape)
        elif profile == "fp32_serving":
            mem = rng.uniform(29.5 * 1024, 31 * 1024, shape)
        else:
            mem = rng.uniform(16 * 1024, 18 * 1024, shape)
        mem_util_factor = 0.35
    elif profile == "notebook":
        working = _per_sample(clock.working_hours())[:, None]
        active = rng.random(shape) < 0.7
        util = np.where(working, np.where(active, rng.uniform(20, 75, shape), rng.uniform(6, 15, shape)),
                        rng.integers(0, 4, shape))
        daily_level = rng.uniform(0.25, 0.55, (clock.hours // 24 + 1, gpu_count))
        mem = total * np.repeat(daily_level, 24 * SAMPLES_PER_HOUR, axis=0)[:n_samples] + rng.normal(0, 64, shape)
    elif profile == "idle":
        util = rng.integers(0, 3, shape).astype(float)
        mem = np.broadcast_to(rng.integers(0, 513, gpu_count).astype(float), shape)
        mem_util_factor = 0.0
    elif profile == "two_of_eight":
        util, mem = _busy(rng, shape, 60, 90, total, 0.6, 0.85)
        util[:, 2:] = rng.integers(0, 5, (n_samples, gpu_count - 2))
        mem[:, 2:] = rng.integers(0, 513, gpu_count - 2)
    else:
        raise ValueError(f"unknown profile {profile!r}")
    util = np.clip(np.floor(util), 0, 100).astype(np.int64)
    mem_used = np.clip(np.round(mem), 0, hw.memory_total_mib).astype(np.int64)
    mem_util = np.clip(np.round(util * mem_util_factor + rng.normal(0, 1.5, shape) * (util > 0)), 0, 100)
    power = hw.idle_w + (hw.tdp_w - hw.idle_w) * 0.92 * util / 100 + rng.normal(0, 0.01 * hw.tdp_w, shape)
    power = np.round(np.clip(power, 0.9 * hw.idle_w, hw.tdp_w), 2)
    return Samples(util, mem_util.astype(np.int64), mem_used, power)


def sample_stamps(clock: Clock) -> list[str]:
    """nvidia-smi's timestamp of every sample of the window (UTC)."""
    return [(clock.start + timedelta(minutes=15 * i)).strftime("%Y/%m/%d %H:%M:%S.000")
            for i in range(clock.hours * SAMPLES_PER_HOUR)]


def gpu_uuid(seed: int, host: str, index: int) -> str:
    h = hashlib.sha256(f"gpu|{seed}|{host}|{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def smi_log(provider: str, host: str, gpu_model: str, gpu_count: int, running: np.ndarray, samples: Samples,
            stamps: list[str], seed: int) -> tuple[bytes, int]:
    """The host's ``nvidia-smi --query-gpu=… --format=csv -l 900`` log: (bytes, data rows).

    One row per GPU per sample of every running hour, GPUs in index order within a sample.
    """
    hw = GPU_HARDWARE[gpu_model]
    prefix = [f", {hw.smi_name}, {bus}, {gpu_uuid(seed, host, i)}, {i}, "
              for i, bus in enumerate(bus_ids(provider, gpu_count))]
    total = f"{hw.memory_total_mib} MiB"
    keep = np.flatnonzero(np.repeat(running, SAMPLES_PER_HOUR))
    util, mem_util = samples.util[keep].tolist(), samples.mem_util[keep].tolist()
    mem, power = samples.mem_used[keep].tolist(), samples.power[keep].tolist()
    lines = [SMI_HEADER]
    for row, sample in enumerate(keep.tolist()):
        ts = stamps[sample]
        for g in range(gpu_count):
            lines.append(f"{ts}{prefix[g]}{util[row][g]} %, {mem_util[row][g]} %, {total}, "
                         f"{mem[row][g]} MiB, {power[row][g]:.2f} W")
    return ("\n".join(lines) + "\n").encode(), len(lines) - 1
