"""Real data for the on-prem tests: Helios *Earth* virtual clusters as on-prem node groups, and their
per-minute GPU occupancy rolled up into ``gpu_metrics_hourly`` by the DCGM ingestor's own rollup.

``Earth_gpu_number.csv`` gives each virtual cluster's GPU count per day; the Helios artifact gives its
nodes as 8 x Tesla V100-SXM2. GPU ``i`` of a VC sits on node ``<vc>-n<i // 8>`` and is busy (100 %)
in a minute when ``i < running_gpu_num`` (as tests/test_helios_rollup.py reads the occupancy).
"""

from __future__ import annotations

import csv
import functools
import gzip
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics import metrics_store
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.ingest.onprem.onprem import Onprem
from tests.conftest import DATA

VCS = ("vc3sl", "vchbv")
GPUS_PER_NODE = 8  # "8 x Tesla V100-SXM2" (HeliosArtifact README)
START = datetime(2020, 5, 1, tzinfo=UTC)
SPECS_CSV = Path(__file__).parent.parent / "warehouse" / "data" / "gpu_specs.csv"


def registry() -> Registry:
    r = Registry()
    r.register(DcgmExporter)
    r.register(Onprem)
    return r


def vc_gpu_count(vc: str, day: str = "2020-05-01") -> int:
    with open(DATA / "onprem" / "Earth_gpu_number.csv", newline="") as f:
        return next(int(row[vc]) for row in csv.DictReader(f) if row["date"] == day)


@functools.cache
def occupancy(vc: str) -> tuple[tuple[datetime, int, int], ...]:
    """(minute, running GPUs, total GPUs) per minute of May 2020."""
    with gzip.open(DATA / "helios-sensetime" / f"{vc}_gpu_occupancy.csv.gz", "rt", newline="") as f:
        return tuple(
            (
                datetime.strptime(r["time"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC),
                int(r["running_gpu_num"]),
                int(r["total_gpu_num"]),
            )
            for r in csv.DictReader(f)
        )


def nodes(vc: str) -> list[str]:
    return [f"{vc}-n{k}" for k in range(vc_gpu_count(vc) // GPUS_PER_NODE)]


def samples(vc: str, start: datetime, until: datetime) -> pa.Table:
    minutes = [(ts, n) for ts, n, _ in occupancy(vc) if start <= ts < until]
    gpus = vc_gpu_count(vc)
    stamps = np.array([int(ts.timestamp() * 1000) for ts, _ in minutes], dtype=np.int64)
    running = np.array([n for _, n in minutes])
    util = (np.arange(gpus)[None, :] < running[:, None]) * 100.0
    n = len(minutes) * gpus
    table = {f.name: pa.nulls(n, f.type) for f in metrics_store.SAMPLE_SCHEMA}
    table["ts"] = pa.array(np.repeat(stamps, gpus)).cast(pa.timestamp("ms", tz="UTC"))
    table["gpu_uuid"] = pa.array([f"{vc}-gpu{i:02d}" for i in range(gpus)] * len(minutes))
    table["host"] = pa.array([f"{vc}-n{i // GPUS_PER_NODE}" for i in range(gpus)] * len(minutes))
    table["name"] = pa.array(["Tesla V100-SXM2-16GB"] * n)
    table["util"] = pa.array(util.reshape(-1))
    return pa.table(table).cast(metrics_store.SAMPLE_SCHEMA)


def load_metrics(warehouse: Path, tmp: Path, start: datetime, until: datetime, run_tag: str = "backfill") -> None:
    """The VCs' occupancy in [start, until) as minute samples in the store, rolled up by dcgm_exporter."""
    folder = warehouse.parent / "samples" / "helios"
    folder.mkdir(parents=True, exist_ok=True)
    metrics_store.write_samples(folder, pa.concat_tables([samples(vc, start, until) for vc in VCS]), run_tag)
    # a target exposing no GPU field (an empty exposition is an error): the run only rolls up the store
    (tmp / "idle.prom").write_text("# TYPE go_goroutines gauge\ngo_goroutines 7\n")
    result = run_source(registry(), warehouse, "helios", "dcgm_exporter", {"targets": str(tmp / "idle.prom")})
    assert result.status == "succeeded", result.error


def cluster_options(**overrides) -> dict:
    """The two VCs as node groups (V100 list price from gpu_specs: no gpu_price_usd)."""
    groups = [
        {
            "name": vc,
            "nodes": nodes(vc),
            "gpu_model": "Tesla V100-SXM2",
            "gpus_per_node": GPUS_PER_NODE,
            "server_price_usd": 30000,
            "network_price_usd": 4000,
            "storage_price_usd": 2500.5,
            "host_power_w": 1200,
            "team": f"team-{vc}",
        }
        for vc in VCS
    ]
    options = {
        "cluster": "earth",
        "node_groups": groups,
        "amortisation_years": 4,
        "pue": 1.4,
        "energy_usd_per_kwh": 0.11,
        "facility_usd_per_node_month": 150,
        "operations_usd_per_node_month": 400,
        "node_teams": {nodes("vchbv")[0]: "speech"},
    }
    options.update(overrides)
    return options


def spec(model: str) -> dict[str, str]:
    with open(SPECS_CSV, newline="") as f:
        return next(row for row in csv.DictReader(f) if row["gpu_model"] == model)


def busy_minutes(vc: str, start: datetime, until: datetime) -> dict[tuple[int, datetime], int]:
    """(GPU index, hour) -> minutes busy, by plain counting."""
    busy: dict[tuple[int, datetime], int] = defaultdict(int)
    for ts, running, _ in occupancy(vc):
        if start <= ts < until:
            hour = ts.replace(minute=0)
            for i in range(vc_gpu_count(vc)):
                busy[(i, hour)] += i < running
    return busy


def expected_gpu_hour(util_pct: Decimal) -> tuple[Decimal, Decimal, Decimal]:
    """(hardware, energy, facility) of one V100 GPU-hour of cluster_options(), written out plainly."""
    q = Decimal("1E-10")
    tdp = Decimal(spec("V100-16GB")["tdp_w"])
    price = Decimal(spec("V100-16GB")["list_price_usd"])
    idle = tdp * Decimal("0.1")
    node_price = Decimal(30000) + Decimal(4000) + Decimal("2500.5")
    hardware = ((price + node_price / 8) / (4 * 12 * 730)).quantize(q)
    gpu_w = idle + (tdp - idle) * util_pct / 100
    energy = ((gpu_w + Decimal(1200) / 8) / 1000 * Decimal("1.4") * Decimal("0.11")).quantize(q)
    facility = ((Decimal(150) + Decimal(400)) / 8 / 730).quantize(q)
    return hardware, energy, facility


def conformance_input(tmp: Path) -> tuple[dict, datetime]:
    """For tests/test_conformance.py: a day of the VCs' real occupancy rolled up into the test's
    warehouse (conftest's ``warehouse`` fixture, beside ``tmp``), and the cluster's options."""
    load_metrics(tmp.parent / "wh" / "gpufinops.duckdb", tmp, START, datetime(2020, 5, 2, tzinfo=UTC))
    return cluster_options(), START
