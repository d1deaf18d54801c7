"""A second simulated fleet, with laws of its own, for ``gpufinops evaluate``: the models were never tuned on it.

Where :mod:`simulator.demo_fleet` loads every GPU alike and bills fixed prices, here (laws in
:mod:`simulator.eval_laws`): the replicas of a service share one request stream, so how busy a replica is
follows the *published* throughput of its benchmark on its GPU (MLPerf, :mod:`simulator.eval_benchmarks`);
prices are drawn around the real lists and change mid-window; machines start and stop mid-window; a
billing month is delivered twice (late hours and a price correction arrive in the restatement); the
CUR carries no GPU counts; one host exports no metrics. The ground truth (:mod:`simulator.eval_truth`) is
derived from these laws for every machine, not from the models' formulas.

``generate(home, seed, days)`` writes, as the demo does::

    home/exports/aws/cur/…                 CUR 2.0 Data Export (Parquet + manifest per billing month)
    home/exports/gcp/billing/*.json        BigQuery billing export extract (JSONL per invoice month)
    home/metrics/nvidia-smi/<host>.csv     AWS hosts: nvidia-smi --query-gpu logs
    home/metrics/dcgm/<host>.prom          Google Cloud VMs: DCGM exporter expositions
    home/reference/…                       spot advisor feed, GCP price history (two revisions)
    home/ground_truth.json

and ``restate(home)`` writes the second delivery of the restated month (run the ingest again).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from simulator import cur2_export, eval_laws as laws, eval_truth
from simulator.eval_exports import (bill_rows, first_delivery, month_bounds, restated, write_config, write_gcp,
                               write_metrics, write_references)

END = datetime(2026, 10, 15, tzinfo=UTC)


@dataclass(frozen=True)
class Box:
    """One machine of the fleet. ``profile``: ``serve:<service>``, ``train``, ``batch``, ``idle``,
    ``notebook``, ``workday`` (busy weekdays 9–18, idle otherwise, never stopped), ``partial:<k>`` (k
    GPUs work, the rest are spare), ``shards:<k>`` (k GPUs busy, the rest stall but hold model shards).
    ``schedule``: ``always``, ``workhours``, ``bursts``, ``last:<days>`` (started that many days before the
    end), ``until:<days>`` (stopped that many days before the end)."""
    name: str
    provider: str
    instance_type: str
    team: str
    workload: str
    profile: str
    pricing: str = "on_demand"
    schedule: str = "always"
    precision: str | None = None
    checkpointing: bool = False
    checkpoint_interval_min: int | None = None
    metrics: bool = True
    role: tuple[str, str] | None = None   # (kind, why) of a planted finding, ("not <kind>", why) of a look-alike


def _serve(name, provider, it, service, team, role=None, **kw) -> Box:
    s = laws.SERVICES[service]
    return Box(name, provider, it, team, s.workload, f"serve:{service}", precision=s.precision, role=role, **kw)


FLEET: tuple[Box, ...] = (
    _serve("nlp-l4", "aws", "g6.xlarge", "nlp", "nlp"),
    _serve("nlp-a10g", "aws", "g5.xlarge", "nlp", "nlp", ("not gpu_type", "25 % busy on A10G: a T4 would need 240 %, an L4 saves 20 %")),
    _serve("nlp-l40s", "aws", "g6e.xlarge", "nlp", "nlp", ("not gpu_type", "20 % busy on L40S: an L4 or A10G would need 75 %")),
    _serve("nlp-h100", "aws", "p5.4xlarge", "nlp", "nlp", ("gpu_type", "H100 at 10 % fits an L40S")),
    _serve("speech-a10g", "aws", "g5.xlarge", "speech", "speech"),
    _serve("speech-l4", "aws", "g6.xlarge", "speech", "speech", ("not gpu_type", "43 % busy on L4: a T4 would need 170 %")),
    _serve("speech-l40s", "aws", "g6e.xlarge", "speech", "speech", ("gpu_type", "L40S at 15 % fits an L4")),
    _serve("vision-t4", "aws", "g4dn.xlarge", "vision", "vision"),
    _serve("vision-l4", "aws", "g6.xlarge", "vision", "vision"),
    # 25 % busy on A10G: a T4 would need 80 %; an L4 fits, but saves ~20 %, near the 25 % bar at moving prices
    _serve("vision-a10g", "aws", "g5.xlarge", "vision", "vision"),
    _serve("ranker-l40s", "aws", "g6e.xlarge", "ranker32", "recsys", ("quantization", "FP32 serving fits an L4 at FP16")),
    Box("det-batch-od", "aws", "g6.12xlarge", "vision", "batch_inference", "batch", schedule="bursts",
        precision="int8", checkpointing=True, role=("spot_mix", "checkpointed batch on on-demand")),
    Box("det-batch-spot", "aws", "g6.12xlarge", "vision", "batch_inference", "batch", pricing="spot",
        schedule="bursts", precision="int8", checkpointing=True),
    Box("asr-batch", "aws", "g4dn.12xlarge", "speech", "batch_inference", "batch", schedule="bursts",
        precision="fp16", role=("not spot_mix", "batch runs of 3–10 h that do not checkpoint")),
    Box("llm-train", "aws", "p4de.24xlarge", "nlp", "training", "train", precision="bf16", checkpointing=True,
        checkpoint_interval_min=30, role=("spot_mix", "checkpointed training on on-demand")),
    Box("pretrain-h100", "aws", "p5.48xlarge", "nlp", "training", "train", precision="bf16",
        role=("not spot_mix", "training on on-demand that does not checkpoint")),
    Box("pipeline-a100", "aws", "p4de.24xlarge", "research", "training", "shards:2", precision="bf16",
        role=("not gpu_count", "6 GPUs stall at < 10 % but hold model shards")),
    Box("sweep-l4x8", "aws", "g6.48xlarge", "speech", "training", "partial:2", precision="bf16",
        role=("gpu_count", "2 of 8 GPUs work; a g6.12xlarge holds them")),
    Box("sweep-a100x8", "aws", "p4d.24xlarge", "vision", "training", "partial:2", precision="bf16",
        role=("not gpu_count", "2 of 8 GPUs work, but AWS has no smaller A100-40GB type")),
    Box("forgotten-p4d", "aws", "p4d.24xlarge", "research", "training", "idle", role=("idle_gpu", "idle the whole window")),
    Box("late-g5x4", "aws", "g5.12xlarge", "research", "training", "idle", schedule="last:9",
        role=("idle_gpu", "started 9 days before the end, idle since")),
    Box("gone-g6ex4", "aws", "g6e.12xlarge", "research", "training", "idle", schedule="until:12",
        role=("not idle_gpu", "idle, but terminated 12 days before the end")),
    Box("nb-a10g", "aws", "g5.xlarge", "vision", "notebook", "notebook", schedule="workhours",
        role=("not idle_gpu", "a notebook already stopped nights and weekends")),
    _serve("dark-l4", "aws", "g6.xlarge", "vision", "platform", ("not idle_gpu", "busy, exports no metrics"), metrics=False),
    _serve("nlp-g2", "gcp", "g2-standard-4", "nlp", "nlp", ("commitment", "steady on-demand L4, busy every hour")),
    _serve("nlp-a100", "gcp", "a2-highgpu-1g", "nlp", "nlp", ("not gpu_type", "23 % busy on A100-40GB: an L4 would need 75 %")),
    # an A100-40GB cuts ~27 % off an A100-80GB: whether that clears the 25 % bar depends on the seed's prices
    _serve("nlp-a100-80", "gcp", "a2-ultragpu-1g", "nlp", "nlp"),
    _serve("speech-a100", "gcp", "a2-highgpu-1g", "speech", "speech", ("gpu_type", "A100 at 13 % fits an L4")),
    _serve("speech-a100-cud", "gcp", "a2-highgpu-1g", "speech", "speech", ("not gpu_type", "would fit an L4, but its CUD is paid anyway"),
           pricing="committed"),
    _serve("vision-a100", "gcp", "a2-highgpu-1g", "vision", "vision", ("gpu_type", "A100 at 10 % fits an L4")),
    _serve("vision-g2", "gcp", "g2-standard-4", "vision", "vision", ("commitment", "steady on-demand L4, busy every hour")),
    _serve("vision-g2-old", "gcp", "g2-standard-4", "vision", "vision", ("not commitment", "steady, but stopped 10 days before the end"),
           schedule="until:10"),
    _serve("ranker-a100", "gcp", "a2-highgpu-1g", "ranker32", "recsys", ("quantization", "FP32 serving fits an L4 at FP16")),
    _serve("ranker-a100-80", "gcp", "a2-ultragpu-1g", "ranker32", "recsys"),
    Box("fp32-train", "gcp", "a2-highgpu-1g", "recsys", "training", "train", precision="fp32",
        role=("not quantization", "FP32, but training")),
    Box("sweep-a2x8", "gcp", "a2-highgpu-8g", "research", "training", "partial:2", precision="bf16",
        role=("gpu_count", "2 of 8 GPUs work; an a2-highgpu-2g holds them")),
    Box("tune-a2x2", "gcp", "a2-highgpu-2g", "research", "training", "train", precision="bf16"),
    Box("pretrain-a3", "gcp", "a3-highgpu-8g", "research", "training", "train", precision="bf16", checkpointing=True,
        role=("spot_mix", "checkpointed training on on-demand")),
    Box("vision-train-spot", "gcp", "a2-highgpu-8g", "vision", "training", "train", pricing="spot",
        precision="bf16", checkpointing=True),
    Box("lab-a2x4", "gcp", "a2-highgpu-4g", "research", "notebook", "workday",
        role=("idle_gpu", "idle nights and weekends, never stopped")),
)


@dataclass
class Machine:
    box: Box
    host: str
    resource_id: str
    gpu_model: str
    gpu_count: int
    region: str
    running: np.ndarray = field(repr=False, default=None)     # bool per hour
    work: np.ndarray = field(repr=False, default=None)        # bool per hour: the machine does work (law)
    util: np.ndarray = field(repr=False, default=None)        # per sample × GPU, %
    mem_mib: np.ndarray = field(repr=False, default=None)
    demand: np.ndarray | None = field(repr=False, default=None)   # serve: work per second, per sample
    rates: list[Decimal] = field(repr=False, default_factory=list)   # billed $/h per hour (first delivery)


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _identity(box: Box, seed: int, number: int) -> tuple[str, str]:
    h = _digest("eval", seed, box.name)
    if box.provider == "aws":
        return f"ip-10-8-{number}-{int(h[:2], 16) % 250 + 4}", f"i-0{h[2:18]}"
    project = f"acme-{box.team}-prod"
    return box.name, f"//compute.googleapis.com/projects/{project}/zones/us-central1-a/instances/{box.name}"


def _running(box: Box, hours: int, start: datetime, rng: np.random.Generator) -> np.ndarray:
    stamps = np.array([start + timedelta(hours=h) for h in range(hours)])
    kind, _, arg = box.schedule.partition(":")
    mask = np.ones(hours, dtype=bool)
    if kind == "last":
        mask[:hours - int(arg) * 24] = False
    elif kind == "until":
        mask[hours - int(arg) * 24:] = False
    elif kind == "workhours":
        mask = np.array([t.weekday() < 5 and 9 <= t.hour < 18 for t in stamps])
    elif kind == "bursts":
        mask[:] = False
        hour = int(rng.integers(0, 6))
        while hour < hours:
            length = int(rng.integers(3, 11))
            mask[hour:hour + length] = True
            hour += length + int(rng.integers(2, 13))
    return mask


def _workday(hours: int, start: datetime) -> np.ndarray:
    return np.array([(t := start + timedelta(hours=h)).weekday() < 5 and 9 <= t.hour < 18 for h in range(hours)])


def _samples(m: Machine, start: datetime, hours: int, streams: dict, rng: np.random.Generator) -> None:
    """Utilisation and memory per sample and GPU, and the hours the machine works, from its profile."""
    box, n = m.box, hours * laws.SAMPLES_PER_HOUR
    shape, total = (n, m.gpu_count), laws.HARDWARE[m.gpu_model].memory_total_mib
    kind, _, arg = box.profile.partition(":")
    work = np.ones(hours, dtype=bool)
    if kind == "serve":
        service = laws.SERVICES[arg]
        gpu, level = service.anchor
        m.demand = level * laws.rate_on(service, gpu) * streams[arg] * (1 + rng.normal(0, 0.03, n))
        efficiency = float(rng.lognormal(0, 0.05))
        util = 100 * m.demand[:, None] / (laws.rate_on(service, m.gpu_model) * efficiency) + rng.normal(0, 1, shape)
        mem = laws.memory_gib(service) * 1024 * rng.uniform(0.97, 1.0, shape)
    elif kind in ("train", "batch"):
        util = rng.uniform(85, 98, shape)
        util[rng.random(n) < 1 / 12] = rng.uniform(30, 55, m.gpu_count)    # checkpoints, evaluation passes
        mem = total * rng.uniform(0.6, 0.85, m.gpu_count) + rng.normal(0, 0.005 * total, shape)
    elif kind in ("partial", "shards"):
        k = int(arg)
        util = rng.uniform(80, 97, shape)
        mem = total * rng.uniform(0.6, 0.8, m.gpu_count) + rng.normal(0, 0.005 * total, shape)
        if kind == "partial":
            util[:, k:], mem[:, k:] = rng.integers(0, 3, (n, m.gpu_count - k)), rng.integers(200, 500, m.gpu_count - k)
        else:
            util[:, k:] = rng.uniform(3, 9, (n, m.gpu_count - k))
    elif kind == "notebook":
        util = np.where(rng.random(shape) < 0.7, rng.uniform(20, 75, shape), rng.uniform(6, 15, shape))
        mem = total * rng.uniform(0.3, 0.5, m.gpu_count) + rng.normal(0, 64, shape)
    elif kind == "workday":
        work = _workday(hours, start)
        busy = np.repeat(work, laws.SAMPLES_PER_HOUR)[:, None]
        util = np.where(busy, rng.uniform(40, 95, shape), rng.integers(0, 3, shape))
        mem = np.where(busy, total * 0.5, 400) + rng.normal(0, 32, shape)
    elif kind == "idle":
        work[:] = False
        util, mem = rng.integers(0, 3, shape).astype(float), np.broadcast_to(rng.integers(0, 513, m.gpu_count), shape)
    else:
        raise ValueError(f"unknown profile {box.profile!r}")
    m.work = work & m.running
    m.util = np.clip(np.floor(util), 0, 100).astype(np.int64)
    m.mem_mib = np.clip(np.round(mem), 0, total).astype(np.int64)


def _rates(m: Machine, prices: dict, hours: int) -> list[Decimal]:
    law = prices[(m.box.provider, m.box.instance_type)]
    if m.box.pricing == "spot":
        return [law.spot_usd(h, m.box.provider) for h in range(hours)]
    if m.box.pricing == "committed":
        return [law.cud_usd(h) for h in range(hours)]
    return [law.list_usd(h) for h in range(hours)]


def build(seed: int, days: int, end: datetime = END) -> tuple[list[Machine], dict, datetime]:
    """The fleet's machines with their samples and hourly rates; the price laws; the window start."""
    hours, start = days * 24, end - timedelta(days=days)
    rng = np.random.default_rng((seed, 0))
    prices = laws.price_laws(hours, rng)
    stamps = laws.sample_stamps(start, hours)
    streams = {name: laws.demand_shape(stamps, s.peak_hour, np.random.default_rng((seed, 1, i)))
               for i, (name, s) in enumerate(sorted(laws.SERVICES.items()))}
    machines = []
    for number, box in enumerate(FLEET):
        offer = laws.CATALOGUE[(box.provider, box.instance_type)]
        host, rid = _identity(box, seed, number)
        m = Machine(box, host, rid, offer.gpu_model, offer.gpu_count, laws.region_of(box.provider))
        mrng = np.random.default_rng((seed, 2, number))
        m.running = _running(box, hours, start, mrng)
        _samples(m, start, hours, streams, mrng)
        m.rates = _rates(m, prices, hours)
        machines.append(m)
    return machines, prices, start


@dataclass
class EvalFleet:
    home: Path
    config_path: Path
    truth_path: Path
    machines: list[Machine]
    final_rows: dict[str, list[dict]]     # provider -> the bill as restated


def generate(home: Path, *, seed: int, days: int = 35, end: datetime = END) -> EvalFleet:
    """Write the first deliveries, metrics, references, config and ground truth; :func:`restate` follows."""
    if days < 21:
        raise ValueError(f"days must be at least 21 (got {days}): machines start and stop weeks before the end")
    home = Path(home)
    machines, prices, start = build(seed, days, end)
    rows = {"aws": [], "gcp": []}
    for m in machines:
        rows[m.box.provider] += bill_rows(m, prices, start)
    month = month_bounds(start)[0]
    final = {p: restated(r, month) for p, r in rows.items()}
    cur2_export.write_cur2(home / "exports" / "aws" / "cur", first_delivery(rows["aws"], month))
    write_gcp(home / "exports" / "gcp" / "billing", first_delivery(rows["gcp"], month))
    write_metrics(home, machines, start, seed)
    write_references(home, prices, start)
    truth = eval_truth.ground_truth(machines, prices, start, final, seed=seed, days=days)
    truth_path = home / "ground_truth.json"
    truth_path.write_text(json.dumps(truth, indent=1, default=str) + "\n")
    return EvalFleet(home, write_config(home, machines), truth_path, machines, final)


def restate(fleet: EvalFleet) -> None:
    """The second delivery of the restated month: its late hours and corrected costs."""
    cur2_export.write_cur2(fleet.home / "exports" / "aws" / "cur", fleet.final_rows["aws"])
    write_gcp(fleet.home / "exports" / "gcp" / "billing", fleet.final_rows["gcp"])
