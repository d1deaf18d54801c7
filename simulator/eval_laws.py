"""The second fleet generator's laws: catalogue, prices that move, and what each GPU does.

Nothing here is shared with the models or with :mod:`simulator.demo_workloads`' profiles:

* **Throughput** (:func:`service_throughput`): a serving workload's work rate on each GPU model is the
  published per-GPU throughput of its MLPerf benchmark (:mod:`simulator.eval_benchmarks`); a replica's
  utilisation is its request rate ÷ (that throughput × the machine's own efficiency, ±5 %). FP32
  serving runs at half its FP16 throughput (an assumption of this generator: no table measures FP32).
* **Memory**: weights + activations + a 0.6 GiB CUDA context per GPU; at FP16 the weights and
  activations halve, the context does not.
* **Prices**: the real list prices (AWS: Karpenter's us-east-1 list; Google Cloud: Cyclenerd's
  pricing.yml, us-central1), each type's price drawn around its list and changed once mid-window;
  AWS spot follows a random walk around a level drawn around the spot advisor's typical saving (the
  market is not the advisor); interruptions a month are drawn inside the advisor's band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np

from gpufinops.simulator import eval_benchmarks
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, GpuHardware

SAMPLES_PER_HOUR = 4
HOURS_PER_MONTH = Decimal("730.5")
FP32_SLOWDOWN = 2.0  # FP32 serving throughput = FP16's / this (assumed)
CONTEXT_GIB = 0.6  # CUDA context + runtime per GPU, whatever the precision
HARDWARE: dict[str, GpuHardware] = {**GPU_HARDWARE, "L40S": GpuHardware("NVIDIA L40S", 46068, 350.0, 35.0)}
MEASURED_AS = {"A10G": "A10"}  # AWS's A10G is measured as NVIDIA's A10 (same GA102, 24 GB): an approximation


@dataclass(frozen=True)
class Offer:
    gpu_model: str
    gpu_count: int
    list_usd: str  # on-demand $/h
    spot: str  # AWS: the advisor's typical saving %, GCP: spot $/h
    band: int | None = None  # AWS spot advisor interruption band (0 … 4)
    cud_month: str | None = None  # Google Cloud 1-year CUD $/month


AWS_REGION, GCP_REGION = "us-east-1", "us-central1"
# us-east-1 on-demand from warehouse/data/aws_ondemand_karpenter.csv (Karpenter, generated 2026-07-20); spot
# advisor (s, r) from the Spot Instance Advisor feed of 2025-06 (spot-advisor-data.json; p5.4xlarge is
# not in that feed: p5.48xlarge's figures are used).
CATALOGUE: dict[tuple[str, str], Offer] = {
    ("aws", "g4dn.xlarge"): Offer("T4", 1, "0.526", "64", 3),
    ("aws", "g4dn.12xlarge"): Offer("T4", 4, "3.912", "64", 2),
    ("aws", "g5.xlarge"): Offer("A10G", 1, "1.006", "59", 4),
    ("aws", "g5.12xlarge"): Offer("A10G", 4, "5.672", "58", 4),
    ("aws", "g6.xlarge"): Offer("L4", 1, "0.8048", "49", 4),
    ("aws", "g6.12xlarge"): Offer("L4", 4, "4.6016", "59", 4),
    ("aws", "g6.48xlarge"): Offer("L4", 8, "13.3504", "69", 4),
    ("aws", "g6e.xlarge"): Offer("L40S", 1, "1.861", "58", 1),
    ("aws", "g6e.12xlarge"): Offer("L40S", 4, "10.49264", "56", 4),
    ("aws", "p4d.24xlarge"): Offer("A100-40GB", 8, "21.957642", "67", 2),
    ("aws", "p4de.24xlarge"): Offer("A100-80GB", 8, "27.44705", "65", 0),
    ("aws", "p5.4xlarge"): Offer("H100-SXM", 1, "6.88", "52", 4),
    ("aws", "p5.48xlarge"): Offer("H100-SXM", 8, "55.04", "52", 4),
    # us-central1 from Cyclenerd's GCP pricing.yml (hour, hour_spot, month_1y; tests/data/gcp-pricing-cyclenerd/SOURCE.md)
    ("gcp", "g2-standard-4"): Offer("L4", 1, "0.706832255", "0.397336", None, "325.07215214"),
    ("gcp", "a2-highgpu-1g"): Offer("A100-40GB", 1, "3.673385", "1.92802", None, "1689.3711392"),
    ("gcp", "a2-highgpu-2g"): Offer("A100-40GB", 2, "7.34677", "3.85604", None, "3378.7422784"),
    ("gcp", "a2-highgpu-4g"): Offer("A100-40GB", 4, "14.69354", "7.71208", None, "6757.4845568"),
    ("gcp", "a2-highgpu-8g"): Offer("A100-40GB", 8, "29.38708", "15.42416", None, "13514.9691136"),
    ("gcp", "a2-ultragpu-1g"): Offer("A100-80GB", 1, "5.06879789041096", "2.75954630136986"),
    ("gcp", "a3-highgpu-8g"): Offer("H100-SXM", 8, "88.4899999025753", "50.6095408219178", None, "44810.08066464"),
}
BAND_EDGES = ((0, 5), (5, 11), (11, 16), (16, 22), (22, 30))  # interruptions a month in %, per band
GCP_PREEMPTIONS_PER_MONTH = (0.1, 0.5)  # no feed publishes them: assumed


def region_of(provider: str) -> str:
    return AWS_REGION if provider == "aws" else GCP_REGION


@dataclass(frozen=True)
class Service:
    """A serving workload whose replicas on different GPU models share one request stream (round-robin)."""

    benchmark: str
    scenario: str
    workload: str  # the `workload` tag
    precision: str  # the `precision` tag
    weights_gib: float
    activations_gib: float
    anchor: tuple[str, float]  # (GPU model, p95 utilisation there) that sets the request rate
    peak_hour: int = 15


SERVICES = {
    "nlp": Service("bert-99", "Server", "online_inference", "int8", 1.4, 4.0, ("L4", 0.75), 14),
    "speech": Service("rnnt", "Server", "online_inference", "fp16", 2.2, 5.5, ("A10G", 0.70), 11),
    "vision": Service("resnet50", "Server", "serving", "int8", 0.4, 3.8, ("T4", 0.80), 17),
    "ranker32": Service("bert-99.9", "Offline", "inference", "fp32", 22.0, 3.5, ("A100-40GB", 0.40), 20),
}
FLEET_ROUND = "v3.1"
FLEET_GPUS = ("T4", "L4", "A10G", "L40S", "A100-40GB", "A100-80GB", "H100-SXM")


def service_throughput(service: Service) -> tuple[dict[str, float], set, dict[str, str]]:
    """FP16/INT8 work rate per GPU model (the benchmark's), the benchmark groups used and their origin."""
    gpus = {g: MEASURED_AS.get(g, g) for g in FLEET_GPUS}
    return eval_benchmarks.fleet_law(service.benchmark, service.scenario, FLEET_ROUND, gpus)


def rate_on(service: Service, gpu_model: str, precision: str | None = None) -> float:
    """Work per second one GPU sustains at full utilisation, at ``precision`` (default: the service's)."""
    rate = service_throughput(service)[0][gpu_model]
    return rate / FP32_SLOWDOWN if (precision or service.precision) == "fp32" else rate


def memory_gib(service: Service) -> float:
    """GiB one replica holds on each GPU at the service's own precision."""
    return service.weights_gib + service.activations_gib + CONTEXT_GIB


def fp16_memory_gib(service: Service) -> float:
    """GiB at FP16: weights and activations halve from FP32, the CUDA context does not."""
    shrink = 0.5 if service.precision == "fp32" else 1.0
    return (service.weights_gib + service.activations_gib) * shrink + CONTEXT_GIB


def demand_shape(stamps: np.ndarray, peak_hour: int, rng: np.random.Generator) -> np.ndarray:
    """Request rate ÷ the peak rate, per sample: diurnal (trough 55 % of peak), 20 % lower at weekends,
    ±5 % noise, and a burst hour now and then."""
    hours = stamps.astype("datetime64[h]").astype(np.int64)
    hod = (hours % 24) + (stamps.astype("datetime64[m]").astype(np.int64) % 60) / 60
    weekday = (hours // 24 + 3) % 7
    wave = 0.5 + 0.5 * np.cos(2 * np.pi * (hod - peak_hour) / 24)
    shape = (0.55 + 0.45 * wave) * np.where(weekday >= 5, 0.8, 1.0)
    bursts = np.repeat(rng.random(len(stamps) // SAMPLES_PER_HOUR + 1) < 0.01, SAMPLES_PER_HOUR)[: len(stamps)]
    return shape * (1 + rng.normal(0, 0.05, len(stamps))) * np.where(bursts, 1.25, 1.0)


@dataclass
class PriceLaw:
    """One type's prices over the window: list × factor before/after ``change_hour`` (and spot)."""

    offer: Offer
    factors: tuple[float, float]
    change_hour: int
    spot_ratio: np.ndarray  # AWS: spot / list per hour; GCP: spot factor per hour
    interruptions_per_month: float

    def list_usd(self, hour: int) -> Decimal:
        f = self.factors[0] if hour < self.change_hour else self.factors[1]
        return Decimal(f"{float(self.offer.list_usd) * f:.6f}")

    def spot_usd(self, hour: int, provider: str) -> Decimal:
        if provider == "aws":
            return Decimal(f"{float(self.list_usd(hour)) * self.spot_ratio[hour]:.4f}")
        return Decimal(f"{float(self.offer.spot) * self.spot_ratio[hour]:.6f}")

    def cud_usd(self, hour: int) -> Decimal | None:
        if self.offer.cud_month is None:
            return None
        f = self.factors[0] if hour < self.change_hour else self.factors[1]
        return Decimal(f"{float(self.offer.cud_month) * f / 730:.6f}")


def price_laws(hours: int, rng: np.random.Generator) -> dict[tuple[str, str], PriceLaw]:
    """Every catalogue type's prices over a window of ``hours``: one change in the middle third."""
    laws = {}
    for (provider, instance_type), offer in sorted(CATALOGUE.items()):
        factors = (float(rng.uniform(0.98, 1.04)), float(rng.uniform(0.95, 1.07)))
        change = int(rng.integers(hours // 3, 2 * hours // 3))
        if provider == "aws":
            level = (1 - float(offer.spot) / 100) * float(rng.uniform(0.85, 1.25))
            walk = np.exp(np.cumsum(rng.normal(0, 0.02, hours // 6 + 1)))
            ratio = np.clip(level * np.repeat(walk / walk.mean(), 6)[:hours], 0.1, 0.95)
            if offer.band is None:
                raise ValueError(f"{instance_type}: an AWS offer needs its spot advisor interruption band")
            lo, hi = BAND_EDGES[offer.band]
            interruptions = float(rng.uniform(lo, hi)) / 100
        else:
            s1, s2 = float(rng.uniform(0.85, 1.15)), float(rng.uniform(0.85, 1.15))
            ratio = np.where(np.arange(hours) < change, s1, s2)
            interruptions = float(rng.uniform(*GCP_PREEMPTIONS_PER_MONTH))
        laws[(provider, instance_type)] = PriceLaw(offer, factors, change, ratio, interruptions)
    return laws


def sample_stamps(start: datetime, hours: int) -> np.ndarray:
    first = np.datetime64(start.replace(tzinfo=None), "m")
    return first + np.arange(hours * SAMPLES_PER_HOUR) * np.timedelta64(60 // SAMPLES_PER_HOUR, "m")


def hour_start(start: datetime, hour: int) -> datetime:
    return start + timedelta(hours=hour)


def p95(values: np.ndarray) -> float:
    return float(np.percentile(values, 95)) if len(values) else math.nan
