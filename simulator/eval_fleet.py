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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.simulator import cur2_export, eval_truth
from gpufinops.simulator import eval_laws as laws
from gpufinops.simulator.demo_profiles import burst_hours
from gpufinops.simulator.eval_exports import (
    bill_rows,
    first_delivery,
    month_bounds,
    restated,
    write_config,
    write_gcp,
    write_metrics,
    write_references,
)
from gpufinops.simulator.eval_machines import FLEET, Box, Machine

END = datetime(2026, 10, 15, tzinfo=UTC)


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
        mask[: hours - int(arg) * 24] = False
    elif kind == "until":
        mask[hours - int(arg) * 24 :] = False
    elif kind == "workhours":
        mask = np.array([t.weekday() < 5 and 9 <= t.hour < 18 for t in stamps])
    elif kind == "bursts":
        mask = burst_hours(rng, hours)
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
        util[rng.random(n) < 1 / 12] = rng.uniform(30, 55, m.gpu_count)  # checkpoints, evaluation passes
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
    streams = {
        name: laws.demand_shape(stamps, s.peak_hour, np.random.default_rng((seed, 1, i)))
        for i, (name, s) in enumerate(sorted(laws.SERVICES.items()))
    }
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
    final_rows: dict[str, list[dict]]  # provider -> the bill as restated


def generate(home: Path, *, seed: int, days: int = 35, end: datetime = END) -> EvalFleet:
    """Write the first deliveries, metrics, references, config and ground truth; :func:`restate` follows."""
    if days < 21:
        raise ValueError(f"days must be at least 21 (got {days}): machines start and stop weeks before the end")
    home = Path(home)
    machines, prices, start = build(seed, days, end)
    rows: dict[str, list[dict]] = {"aws": [], "gcp": []}
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
