"""Real utilisation: Helios per-minute GPU occupancy of two real clusters, rolled up and checked.

Each minute of tests/data/helios-sensetime says how many of a virtual cluster's 64 GPUs ran a job.
GPU ``i`` is busy (100 %) in a minute when ``i < running_gpu_num``, else idle (0 %). The hourly
rollup must reproduce the busy GPU-hours and the GPUs idle for a whole hour that the csv module
computes from the same file.
"""

from __future__ import annotations

import csv
import functools
import gzip
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics import metrics_store
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from tests.conftest import DATA, query

VCS = ("vc3sl", "vchbv")
GPUS = 64


@functools.cache
def occupancy(vc: str) -> list[tuple[datetime, int]]:
    with gzip.open(DATA / "helios-sensetime" / f"{vc}_gpu_occupancy.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    assert all(int(r["total_gpu_num"]) == GPUS for r in rows)
    return [
        (datetime.strptime(r["time"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), int(r["running_gpu_num"])) for r in rows
    ]


def independent(vc: str, until: datetime | None = None) -> tuple[dict, dict]:
    """hour -> busy GPU-hours; hour -> GPUs idle for the whole hour (csv module and plain sums)."""
    busy: defaultdict[datetime, int] = defaultdict(int)
    peak: defaultdict[datetime, int] = defaultdict(int)
    for ts, running in occupancy(vc):
        if until and ts >= until:
            continue
        hour = ts.replace(minute=0)
        busy[hour] += running
        peak[hour] = max(peak[hour], running)
    return {h: b / 60 for h, b in busy.items()}, {h: GPUS - p for h, p in peak.items()}


def samples(vc: str, until: datetime | None = None) -> pa.Table:
    minutes = [(ts, n) for ts, n in occupancy(vc) if until is None or ts < until]
    stamps = np.array([int(ts.timestamp() * 1000) for ts, _ in minutes], dtype=np.int64)
    running = np.array([n for _, n in minutes])
    util = (np.arange(GPUS)[None, :] < running[:, None]) * 100.0
    n = len(minutes) * GPUS
    table = {
        name: pa.nulls(n, field.type)
        for name, field in zip(metrics_store.SAMPLE_SCHEMA.names, metrics_store.SAMPLE_SCHEMA)
    }
    table["ts"] = pa.array(np.repeat(stamps, GPUS)).cast(pa.timestamp("ms", tz="UTC"))
    names = pa.array([f"{vc}-gpu{i:02d}" for i in range(GPUS)])
    table["gpu_uuid"] = pa.DictionaryArray.from_arrays(np.tile(np.arange(GPUS), len(minutes)), names).cast(pa.string())
    table["host"] = pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), pa.array([vc])).cast(pa.string())
    table["util"] = pa.array(util.reshape(-1))
    return pa.table(table).cast(metrics_store.SAMPLE_SCHEMA)


def registry() -> Registry:
    r = Registry()
    r.register(DcgmExporter)
    return r


def check(warehouse, vc: str, busy: dict, idle: dict) -> None:
    rows = query(
        warehouse,
        "SELECT hour, sum(util_mean) / 100, count(*) FILTER (WHERE util_max = 0), count(*), "
        "min(samples), max(samples) FROM gpu_metrics_hourly WHERE host = ? GROUP BY hour",
        [vc],
    )
    assert {r[0] for r in rows} == set(busy)
    for hour, busy_hours, idle_gpus, gpus, min_samples, max_samples in rows:
        assert busy_hours == pytest.approx(busy[hour], abs=1e-9), (vc, hour)
        assert idle_gpus == idle[hour], (vc, hour)
        assert gpus == GPUS and min_samples == max_samples == 60


@pytest.mark.slow
def test_a_month_of_real_occupancy_rolls_up_to_the_independent_sums(tmp_path, warehouse):
    folder = warehouse.parent / "samples" / "helios"
    folder.mkdir(parents=True)
    # a month of samples already in the store, as a scraper would have left them
    metrics_store.write_samples(folder, pa.concat_tables([samples(vc) for vc in VCS]), "backfill")
    # a target exposing no GPU field (an empty exposition is an error): the run only rolls up the store
    (tmp_path / "idle.prom").write_text("# TYPE go_goroutines gauge\ngo_goroutines 7\n")
    result = run_source(registry(), warehouse, "helios", "dcgm_exporter", {"targets": str(tmp_path / "idle.prom")})
    assert result.status == "succeeded", result.error
    assert result.rows == len(VCS) * GPUS * 31 * 24
    for vc in VCS:
        busy, idle = independent(vc)
        check(warehouse, vc, busy, idle)
        total = query(warehouse, "SELECT sum(util_mean) / 100 FROM gpu_metrics_hourly WHERE host = ?", [vc])[0][0]
        assert total == pytest.approx(sum(n for _, n in occupancy(vc)) / 60, rel=1e-12)


def test_a_day_of_real_occupancy_through_the_exporter_format(tmp_path, warehouse):
    until = datetime(2020, 5, 2, tzinfo=UTC)
    for vc in VCS:
        lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
        series = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="{vc}-gpu{i:02d}",Hostname="{vc}"}}' for i in range(GPUS)]
        for ts, running in occupancy(vc):
            if ts < until:
                stamp = int(ts.timestamp() * 1000)
                lines += [f"{series[i]} {100 if i < running else 0} {stamp}" for i in range(GPUS)]
        (tmp_path / f"{vc}.prom").write_text("\n".join(lines) + "\n")
    result = run_source(registry(), warehouse, "helios", "dcgm_exporter", {"targets": str(tmp_path / "*.prom")})
    assert result.status == "succeeded", result.error
    for vc in VCS:
        busy, idle = independent(vc, until)
        assert len(busy) == 24
        check(warehouse, vc, busy, idle)
    assert until - timedelta(days=1) == min(r[0] for r in query(warehouse, "SELECT hour FROM gpu_metrics_hourly"))
