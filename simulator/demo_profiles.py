"""The demo fleet's time: its window, run schedules and utilisation profiles.

Everything here is a pure function of its arguments and a seeded ``numpy.random.Generator``: the same
generator state gives the same samples on any day. A profile returns one value per nvidia-smi sample
(every 15 minutes, four per hour) for the whole window; the caller keeps the samples of the hours the
machine ran. Values are what nvidia-smi prints: whole-percent utilisation, whole MiB of memory, power in
watts (two decimals).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from gpufinops.simulator.demo_workloads import GpuHardware

SAMPLES_PER_HOUR = 4  # nvidia-smi -l 900
WORK_START_HOUR, WORK_END_HOUR = 9, 18  # working hours, UTC, Monday to Friday


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
        mask[int(float(a) * n) : max(int(float(b) * n), int(float(a) * n) + 1)] = True
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
                mask[begin : begin + int(rng.integers(1, 6))] = False
        return mask
    if schedule == "bursts":
        return burst_hours(rng, n)
    raise ValueError(f"unknown schedule {schedule!r}")


def burst_hours(rng: np.random.Generator, n: int) -> np.ndarray:
    """Which of ``n`` hours an ad-hoc job runs in: bursts of 3-10 hours, 2-12 hours apart (from hour 0-5)."""
    mask = np.zeros(n, dtype=bool)
    hour = int(rng.integers(0, 6))
    while hour < n:
        length = int(rng.integers(3, 11))
        mask[hour : hour + length] = True
        hour += length + int(rng.integers(2, 13))
    return mask


@dataclass
class Samples:
    """Per sample (rows) and GPU (columns), for every sample of the window."""

    util: np.ndarray  # utilization.gpu [%], int
    mem_util: np.ndarray  # utilization.memory [%], int
    mem_used: np.ndarray  # memory.used [MiB], int
    power: np.ndarray  # power.draw [W], float rounded to 2 decimals


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
        util = np.where(
            working, np.where(active, rng.uniform(20, 75, shape), rng.uniform(6, 15, shape)), rng.integers(0, 4, shape)
        )
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
