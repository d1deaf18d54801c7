"""Tests for the ``nvidia_smi_csv`` ingestor, on real nvidia-smi captures and logs built from them.

Expected figures are always computed here from the input (csv module, statistics, numpy), never
copied from the ingestor's output.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import os
import random
import shutil
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.nvidia_smi_csv import NvidiaSmiCsv
from gpufinops.ingest.metrics.nvidia_smi_format import file_host
from gpufinops.warehouse import db
from gpufinops.warehouse.metrics_schema import GPU_METRICS_HOURLY

DATA = Path(__file__).parent / "data" / "nvidia-smi"
CAPTURES = sorted(DATA.glob("*__query-gpu.csv"))
H100_LOAD = DATA / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-gpu.csv"
NA_MARKERS = ("[N/A]", "N/A", "[Not Supported]", "[Requested functionality has been deprecated]")
MODEL_BY_FILE = {"h100": "H100-SXM", "h200": "H200", "l40s": "L40S"}
# what a snapshot compares: the table's keys and figures, up to the sample count (not run ids nor hints)
METRIC_COLUMNS = tuple(GPU_METRICS_HOURLY.names[: GPU_METRICS_HOURLY.names.index("samples") + 1])


# ---------- helpers -------------------------------------------------------------------------------


def read_log(path: Path) -> list[dict[str, str]]:
    """The data rows of an nvidia-smi CSV log, keyed by header name (independent of the ingestor)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[1:] if r and r != header]


def number(text: str) -> float | None:
    text = text.strip()
    if text in NA_MARKERS:
        return None
    return float(text.split()[0])


def parse_ts(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)


def run(warehouse: Path, options: dict, source: str = "smi"):
    registry = Registry()
    registry.register(NvidiaSmiCsv)
    return run_source(registry, warehouse, source, "nvidia_smi_csv", options)


def rows(warehouse: Path, where: str = "true") -> list[dict]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        cur = con.execute(f"SELECT * FROM gpu_metrics_hourly WHERE {where} ORDER BY hour, gpu_uuid")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()


def snapshot(warehouse: Path) -> list[tuple]:
    return [tuple(r[c] for c in METRIC_COLUMNS + ("ingest_run_id",)) for r in rows(warehouse)]


def metrics(warehouse: Path) -> list[tuple]:
    """The metric rows, floats rounded: a parallel float sum may differ in its last bit between runs."""
    return [
        tuple(round(v, 9) if isinstance(v, float) else v for v in (r[c] for c in METRIC_COLUMNS))
        for r in rows(warehouse)
    ]


class CaptureLog:
    """An ``-l 1`` capture as a template: its header, and its first row whose cells a line replaces."""

    def __init__(self, template: Path):
        lines = template.read_text().splitlines()
        self.header_line = lines[0]
        self.header = lines[0].split(", ")
        self.template = lines[1].split(", ")
        assert len(self.template) == len(self.header)

    def filled(self, cells: dict[str, str]) -> str:
        """The template row with ``cells`` (column -> text) in place of its own."""
        values = list(self.template)
        for column, text in cells.items():
            values[self.header.index(column)] = text
        return ", ".join(values)

    def write(self, path: Path, lines: list[str]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([self.header_line, *lines]) + "\n")
        return path


class LogBuilder(CaptureLog):
    """Writes ``-l 1`` style logs in the real capture's format, from its header and row as a template."""

    def __init__(self, template: Path = H100_LOAD):
        super().__init__(template)

    def line(self, ts: datetime, util: float | None, mem: float, power: float | None, uuid: str | None = None) -> str:
        cells = {
            "timestamp": ts.strftime("%Y/%m/%d %H:%M:%S.") + f"{ts.microsecond // 1000:03d}",
            "utilization.gpu [%]": "[N/A]" if util is None else f"{util:g} %",
            "memory.used [MiB]": f"{mem:g} MiB",
            "power.draw [W]": "[N/A]" if power is None else f"{power:.2f} W",
        }
        return self.filled(cells | ({"uuid": uuid} if uuid else {}))


def samples(start: datetime, seconds: int, rng: random.Random) -> list[tuple[datetime, float, float, float | None]]:
    """(ts, util, mem_used, power) at a 1 s cadence; every 37th power reading is N/A."""
    out = []
    for i in range(seconds):
        ts = start + timedelta(seconds=i, milliseconds=rng.randrange(1000))
        out.append(
            (
                ts,
                float(rng.randrange(101)),
                float(rng.randrange(1000, 80000)),
                None if i % 37 == 5 else round(rng.uniform(70, 700), 2),
            )
        )
    return out


def expected_hourly(points: Sequence[tuple[datetime, float | None, float, float | None]]) -> dict[datetime, dict]:
    """Hourly rollup computed independently: one sample per distinct timestamp."""
    by_hour: dict[datetime, dict[datetime, tuple]] = {}
    for ts, util, mem, power in points:
        by_hour.setdefault(ts.replace(minute=0, second=0, microsecond=0), {})[ts] = (util, mem, power)
    out = {}
    for hour, by_ts in by_hour.items():
        utils = [u for u, _, _ in by_ts.values() if u is not None]
        powers = [p for _, _, p in by_ts.values() if p is not None]
        out[hour] = {
            "util_mean": statistics.fmean(utils),
            "util_p95": float(np.percentile(utils, 95)),
            "util_max": max(utils),
            "mem_used_max_mib": max(m for _, m, _ in by_ts.values()),
            "power_mean_w": statistics.fmean(powers),
            "samples": len(by_ts),
        }
    return out


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "wh" / "gpufinops.duckdb"


# ---------- real captures -------------------------------------------------------------------------


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name.split("__")[1] + "-" + p.name.split("__")[3])
def test_real_capture_loads_with_file_values(capture: Path, warehouse: Path):
    result = run(warehouse, {"path": str(capture)})
    assert result.status == "succeeded", result.error
    (source_row,) = read_log(capture)
    (row,) = rows(warehouse)
    ts = parse_ts(source_row["timestamp"])
    util = number(source_row["utilization.gpu [%]"])
    assert row["hour"] == ts.replace(minute=0, second=0, microsecond=0)
    assert row["hour"].utcoffset() == timedelta(0)
    assert row["gpu_uuid"] == source_row["uuid"]
    assert row["gpu_model"] == next(m for key, m in MODEL_BY_FILE.items() if f"nvidia-{key}" in capture.name)
    assert row["host"] == capture.name.removesuffix(".csv")
    assert row["mig_instance"] is None
    assert row["util_mean"] == util and row["util_p95"] == util and row["util_max"] == util
    assert row["mem_used_max_mib"] == number(source_row["memory.used [MiB]"])
    assert row["mem_total_mib"] == number(source_row["memory.total [MiB]"])
    assert row["power_mean_w"] == pytest.approx(number(source_row["power.draw [W]"]))
    assert row["sm_active_mean"] is None and row["tensor_active_mean"] is None
    assert row["samples"] == 1
    assert row["source"] == "smi" and row["ingest_run_id"] == result.run_id
    if source_row["mig.mode.current"] == "Enabled":  # MIG: the parent GPU's utilisation is N/A, not 0
        assert source_row["utilization.gpu [%]"] == "[N/A]" and row["util_mean"] is None


def test_raw_samples_written_beside_the_warehouse(tmp_path: Path, warehouse: Path):
    log_path = shutil.copy(H100_LOAD, tmp_path / "node1.csv")
    assert run(warehouse, {"path": str(log_path)}).status == "succeeded"
    sample_file = warehouse.parent / "samples" / "smi" / f"{hashlib.sha1(str(log_path).encode()).hexdigest()}.parquet"
    con = duckdb.connect()
    ((count, host, util),) = con.execute(
        f"SELECT count(*), any_value(host), any_value(util) FROM '{sample_file}'"
    ).fetchall()
    assert (count, host, util) == (1, "node1", number(read_log(H100_LOAD)[0]["utilization.gpu [%]"]))
    assert not list(sample_file.parent.glob("*.tmp"))


# ---------- multi-sample logs ---------------------------------------------------------------------


def test_hourly_rollup_matches_independent_calculation(tmp_path: Path, warehouse: Path):
    rng = random.Random(7)
    logs = LogBuilder()
    real = read_log(H100_LOAD)[0]
    mem_used = number(real["memory.used [MiB]"])
    assert mem_used is not None  # the real capture's row reads its memory
    real_point = (
        parse_ts(real["timestamp"]),
        number(real["utilization.gpu [%]"]),
        mem_used,
        number(real["power.draw [W]"]),
    )
    day = real_point[0].replace(hour=0, minute=0, second=0, microsecond=0)
    # 08:58–09:03 crosses an hour; 11:00–11:02 follows a gap hour (10:00) with no samples at all.
    points = samples(day + timedelta(hours=8, minutes=58), 300, rng) + samples(day + timedelta(hours=11), 150, rng)
    lines = [logs.line(*p) for p in points]
    lines.insert(40, lines[39])  # the same sample logged twice
    lines[100:110] = list(reversed(lines[100:110]))  # out of order
    lines.insert(200, logs.header_line)  # nvidia-smi restarted, appending its header
    lines.insert(0, ", ".join(logs.template))  # the real capture's own row
    logs.write(tmp_path / "node1.csv", lines)
    result = run(warehouse, {"path": str(tmp_path / "*.csv")})
    assert result.status == "succeeded", result.error
    expected = expected_hourly([real_point, *points])
    got = {r["hour"]: r for r in rows(warehouse)}
    assert sorted(got) == sorted(expected)
    assert day + timedelta(hours=10) not in got  # unknown, not zero
    for hour, want in expected.items():
        for column, value in want.items():
            assert got[hour][column] == pytest.approx(value), (hour, column)
        assert got[hour]["mem_total_mib"] == number(real["memory.total [MiB]"])
        assert got[hour]["gpu_model"] == "H100-SXM"


def test_minimal_log_index_fallback_and_changed_header(tmp_path: Path, warehouse: Path):
    """Only the asked-for columns; no uuid (GPU = host:index); a restart with a wider query."""
    path = tmp_path / "gpu-node-3.log"
    path.write_text(
        "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
        "2026/07/14 09:00:01.000, NVIDIA H200, 0, 40 %, 1000 MiB, 143771 MiB\n"
        "2026/07/14 09:00:02.000, NVIDIA H200, 0, 60 %, 3000 MiB, 143771 MiB\n"
        "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
        "2026/07/14 09:00:03.000, NVIDIA H200, 0, 80 %, 2000 MiB, 143771 MiB, 300.50 W\n"
        "2026/07/14 09:00:04.000, NVIDIA H2"
    )  # a line nvidia-smi was still writing
    result = run(warehouse, {"path": str(path)})
    assert result.status == "succeeded", result.error
    (row,) = rows(warehouse)
    assert row["gpu_uuid"] == "gpu-node-3:0" and row["host"] == "gpu-node-3" and row["gpu_model"] == "H200"
    assert row["samples"] == 3
    assert row["util_mean"] == pytest.approx(statistics.fmean([40, 60, 80]))
    assert row["util_p95"] == pytest.approx(float(np.percentile([40, 60, 80], 95)))
    assert row["mem_used_max_mib"] == 3000 and row["power_mean_w"] == pytest.approx(300.5)


@pytest.mark.parametrize(
    "name, host",
    [
        ("node7.csv", "node7"),
        ("node7.csv.1", "node7"),
        ("node7.log.gz", "node7"),
        ("ip-10-0-0-1.ec2.internal.csv", "ip-10-0-0-1.ec2.internal"),
        ("10.0.0.1.csv", "10.0.0.1"),
    ],
)
def test_host_from_file_name(name: str, host: str):
    assert file_host(f"/logs/{name}") == host


# ---------- idempotency ---------------------------------------------------------------------------


def _two_day_logs(tmp_path: Path, rng: random.Random) -> tuple[LogBuilder, Path, Path, datetime]:
    logs = LogBuilder()
    day1 = datetime(2026, 7, 14, tzinfo=UTC)
    a = logs.write(
        tmp_path / "node-a.csv", [logs.line(*p, uuid="GPU-a") for p in samples(day1 + timedelta(hours=9), 120, rng)]
    )
    b = logs.write(
        tmp_path / "node-b.csv",
        [logs.line(*p, uuid="GPU-b") for p in samples(day1 + timedelta(days=1, hours=3), 120, rng)],
    )
    return logs, a, b, day1


def test_second_run_is_skipped_and_changes_nothing(tmp_path: Path, warehouse: Path):
    _two_day_logs(tmp_path, random.Random(1))
    options = {"path": str(tmp_path / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    before = snapshot(warehouse)
    second = run(warehouse, options)
    assert second.status == "skipped" and second.rows == 0
    assert snapshot(warehouse) == before


def test_lost_samples_are_rebuilt_from_the_logs(tmp_path: Path, warehouse: Path):
    _two_day_logs(tmp_path, random.Random(6))
    options = {"path": str(tmp_path / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    before = metrics(warehouse)
    shutil.rmtree(warehouse.parent / "samples")
    again = run(warehouse, options)
    assert again.status == "succeeded", again.error
    assert metrics(warehouse) == before


def test_modified_file_replaces_only_its_days(tmp_path: Path, warehouse: Path):
    rng = random.Random(2)
    logs, a, b, day1 = _two_day_logs(tmp_path, rng)
    options = {"path": str(tmp_path / "*.csv")}
    first = run(warehouse, options)
    new_points = samples(day1 + timedelta(hours=9), 90, rng)
    logs.write(a, [logs.line(*p, uuid="GPU-a") for p in new_points])
    second = run(warehouse, options)
    assert second.status == "succeeded", second.error
    by_gpu = {r["gpu_uuid"]: r for r in rows(warehouse)}
    assert len(rows(warehouse)) == 2
    assert by_gpu["GPU-b"]["ingest_run_id"] == first.run_id  # the other day was left alone
    assert by_gpu["GPU-a"]["ingest_run_id"] == second.run_id
    assert by_gpu["GPU-a"]["samples"] == 90
    assert by_gpu["GPU-a"]["util_mean"] == pytest.approx(
        expected_hourly(new_points)[day1 + timedelta(hours=9)]["util_mean"]
    )
    before_touch = metrics(warehouse)
    stat = b.stat()
    os.utime(b, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # touched, same content
    third = run(warehouse, options)
    assert third.status == "succeeded" and third.rows == 1
    assert metrics(warehouse) == before_touch


def test_removed_file_removes_its_rows_and_samples(tmp_path: Path, warehouse: Path):
    _, a, b, _ = _two_day_logs(tmp_path, random.Random(3))
    options = {"path": str(tmp_path / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    b.unlink()
    assert run(warehouse, options).status == "succeeded"
    assert [r["gpu_uuid"] for r in rows(warehouse)] == ["GPU-a"]
    assert len(list((warehouse.parent / "samples" / "smi").glob("*.parquet"))) == 1


def test_rotated_log_split_rolls_up_into_one_row(tmp_path: Path, warehouse: Path):
    logs = LogBuilder()
    points = samples(datetime(2026, 7, 14, 11, tzinfo=UTC), 600, random.Random(4))
    lines = [logs.line(*p) for p in points]
    rotated = logs.write(tmp_path / "node-c.csv.1", lines[:320])  # rotated away, overlapping by 20 samples
    with open(rotated, "rb") as f, gzip.open(f"{rotated}.gz", "wb") as z:  # and compressed, as logrotate does
        shutil.copyfileobj(f, z)
    rotated.unlink()
    logs.write(tmp_path / "node-c.csv", lines[300:])
    result = run(warehouse, {"path": str(tmp_path / "node-c.csv*")})
    assert result.status == "succeeded", result.error
    (row,) = rows(warehouse)
    want = expected_hourly(points)[datetime(2026, 7, 14, 11, tzinfo=UTC)]
    assert row["host"] == "node-c" and row["samples"] == want["samples"] == 600
    assert row["util_p95"] == pytest.approx(want["util_p95"])
    assert row["power_mean_w"] == pytest.approx(want["power_mean_w"])


# ---------- attribution ---------------------------------------------------------------------------


def _bill(warehouse: Path, resource_id: str, teams: list[tuple[str, str | None]]) -> None:
    with db.writer(warehouse) as con:
        for period, team in teams:
            con.execute(
                'INSERT INTO cost_line_items ("ResourceId", "ChargePeriodStart", "x_Team") VALUES (?, ?, ?)',
                [resource_id, period, team],
            )


def test_attribution_direct_mapped_and_unknown(tmp_path: Path, warehouse: Path):
    _bill(
        warehouse,
        "i-0abc123",
        [("2026-06-01 00:00:00+00", "search"), ("2026-07-01 00:00:00+00", "vision"), ("2026-07-10 00:00:00+00", None)],
    )
    logs = LogBuilder()
    start = datetime(2026, 7, 14, 9, tzinfo=UTC)
    for host, uuid in (("i-0abc123", "GPU-direct"), ("gpu-node-7", "GPU-mapped"), ("mystery", "GPU-unknown")):
        logs.write(tmp_path / f"{host}.csv", [logs.line(*p, uuid=uuid) for p in samples(start, 5, random.Random(5))])
    result = run(warehouse, {"path": str(tmp_path / "*.csv"), "resource_map": {"gpu-node-7": "i-0abc123"}})
    assert result.status == "succeeded", result.error
    got = {r["gpu_uuid"]: (r["host"], r["resource_id"], r["team"]) for r in rows(warehouse)}
    assert got == {
        "GPU-direct": ("i-0abc123", "i-0abc123", "vision"),  # most recent non-null x_Team
        "GPU-mapped": ("gpu-node-7", "i-0abc123", "vision"),
        "GPU-unknown": ("mystery", None, None),
    }


def test_host_column_overrides_file_name(tmp_path: Path, warehouse: Path):
    _bill(warehouse, "i-0host", [("2026-07-01 00:00:00+00", "nlp")])
    path = tmp_path / "collector.csv"
    path.write_text(
        "timestamp, uuid, utilization.gpu [%], host\n"
        "2026/07/14 09:00:01.000, GPU-x, 10 %, i-0host\n"
        "2026/07/14 09:00:02.000, GPU-y, 20 %, [N/A]\n"
    )
    assert run(warehouse, {"path": str(path)}).status == "succeeded"
    got = {r["gpu_uuid"]: (r["host"], r["resource_id"], r["team"]) for r in rows(warehouse)}
    assert got == {"GPU-x": ("i-0host", "i-0host", "nlp"), "GPU-y": ("collector", None, None)}


# ---------- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, words",
    [
        ("", ["empty"]),
        (
            "timestamp, name, uuid, memory.used [MiB]\n2026/07/14 09:00:01.000, NVIDIA H100 80GB HBM3, GPU-1, 10 MiB\n",
            ["utilization.gpu"],
        ),
        (
            "timestamp, uuid, utilization.gpu [%]\n2026/07/14 09:00:01.000, GPU-1, 10 %\n"
            "2026/07/14 09:00:02.000, GPU-1, lots %\n",
            ["utilization.gpu [%]", "lots %"],
        ),
        ("timestamp, uuid, utilization.gpu [%]\nyesterday, GPU-1, 10 %\n", ["timestamp", "yesterday"]),
    ],
    ids=["empty", "missing-utilization", "garbage-value", "garbage-timestamp"],
)
def test_bad_file_fails_the_run_and_leaves_the_table(tmp_path: Path, warehouse: Path, content: str, words: list[str]):
    shutil.copy(H100_LOAD, tmp_path / "good.csv")
    options = {"path": str(tmp_path / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    before = snapshot(warehouse)
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    result = run(warehouse, options)
    assert result.status == "failed"
    assert str(bad) in result.error and all(w in result.error for w in words), result.error
    assert "\n" not in result.error
    assert snapshot(warehouse) == before
