"""Tests for per-process GPU memory (``nvidia-smi --query-compute-apps`` logs) in ``nvidia_smi_csv``.

Expected figures are computed here from the input (csv module, statistics), never copied from the
ingestor's output.
"""

from __future__ import annotations

import random
import shutil
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.nvidia_smi_csv import NvidiaSmiCsv
from gpufinops.warehouse import db
from tests.conftest import table_digest
from tests.test_nvidia_smi_csv import CaptureLog, number, parse_ts, read_log  # the same independent log reading

DATA = Path(__file__).parent / "data" / "nvidia-smi"
# The compute-apps captures ship beside the query-gpu ones; until they are copied into tests/data,
# the shared capture folder they come from is read.
CAPTURE_DIR = DATA
APPS_CAPTURES = sorted(CAPTURE_DIR.glob("*__query-compute-apps.csv"))
LOAD = [p for p in APPS_CAPTURES if "__load__" in p.name]
IDLE = [p for p in APPS_CAPTURES if "__idle__" in p.name]
H100_APPS = CAPTURE_DIR / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-compute-apps.csv"
H100_GPU = DATA / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-gpu.csv"
MEMORY = "used_gpu_memory [MiB]"
TABLES = ("gpu_metrics_hourly", "gpu_processes_hourly")


# ---------- helpers -------------------------------------------------------------------------------


def hour_of(ts: datetime) -> datetime:
    return ts.replace(minute=0, second=0, microsecond=0)


def run(warehouse: Path, options: dict, source: str = "smi"):
    registry = Registry()
    registry.register(NvidiaSmiCsv)
    return run_source(registry, warehouse, source, "nvidia_smi_csv", options)


def processes(warehouse: Path) -> list[dict]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        cur = con.execute("SELECT * FROM gpu_processes_hourly ORDER BY hour, host, gpu_uuid, pid, process_name")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()


def digests(warehouse: Path) -> dict[str, tuple[int, str]]:
    return {table: table_digest(warehouse, table) for table in TABLES}


def ts_text(ts: datetime) -> str:
    return ts.strftime("%Y/%m/%d %H:%M:%S.") + f"{ts.microsecond // 1000:03d}"


class AppsLogBuilder(CaptureLog):
    """Writes ``-l 1`` compute-apps logs in the real capture's format, from its header and first row."""

    def __init__(self, template: Path = H100_APPS):
        super().__init__(template)

    def line(self, ts: datetime, uuid: str, pid: int, name: str, mem: float | None) -> str:
        cells = {"timestamp": ts_text(ts), "gpu_uuid": uuid, "pid": str(pid), "process_name": name}
        return self.filled(cells | {MEMORY: "[N/A]" if mem is None else f"{mem:g} MiB"})


def process_samples(
    start: datetime, seconds: int, rng: random.Random
) -> list[tuple[datetime, str, int, str, float | None]]:
    """(ts, gpu_uuid, pid, process_name, MiB) at a 1 s cadence: a trainer on two GPUs throughout, a
    tool that exits after 100 s, and a memory reading that is [N/A] every 23rd sample."""
    out = []
    for i in range(seconds):
        ts = start + timedelta(seconds=i, milliseconds=rng.randrange(1000))
        procs = [("GPU-a", 4242, "python3 train.py"), ("GPU-b", 4242, "python3 train.py")]
        procs += [("GPU-a", 77, "/root/tools/memhog")] if i < 100 else []
        for uuid, pid, name in procs:
            out.append((ts, uuid, pid, name, None if i % 23 == 4 else float(rng.randrange(500, 70000))))
    return out


def expected_processes(points, host: str) -> dict[tuple, dict]:
    """Hourly per (hour, host, gpu_uuid, pid, name), one sample per distinct timestamp, computed independently."""
    by_key: dict[tuple, dict[datetime, float | None]] = {}
    for ts, uuid, pid, name, mem in points:
        by_key.setdefault((hour_of(ts), host, uuid, pid, name), {})[ts] = mem
    out = {}
    for key, by_ts in by_key.items():
        known = [m for m in by_ts.values() if m is not None]
        out[key] = {"mem_used_max_mib": max(known), "mem_used_mean_mib": statistics.fmean(known), "samples": len(by_ts)}
    return out


def key(row: dict) -> tuple:
    return row["hour"], row["host"], row["gpu_uuid"], row["pid"], row["process_name"]


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "wh" / "gpufinops.duckdb"


# ---------- real captures -------------------------------------------------------------------------


@pytest.mark.parametrize("capture", LOAD, ids=lambda p: p.name.split("__")[1])
def test_real_load_capture_lands_with_file_values(capture: Path, warehouse: Path):
    result = run(warehouse, {"path": str(capture)})
    assert result.status == "succeeded", result.error
    source_rows = read_log(capture)
    assert len(source_rows) >= 2
    want = sorted(
        (
            hour_of(parse_ts(r["timestamp"])),
            capture.name.removesuffix(".csv"),
            r["gpu_uuid"],
            int(r["pid"]),
            r["process_name"],
            number(r[MEMORY]),
        )
        for r in source_rows
    )
    got = processes(warehouse)
    assert sorted(key(r) + (r["mem_used_max_mib"],) for r in got) == want
    for row in got:
        assert row["hour"].utcoffset() == timedelta(0)
        assert row["mem_used_mean_mib"] == row["mem_used_max_mib"] and row["samples"] == 1
        assert row["resource_id"] is None and row["team"] is None  # nothing billed in this warehouse
        assert row["source"] == "smi" and row["ingest_run_id"] == result.run_id
    assert result.rows == len(source_rows)


@pytest.mark.parametrize("capture", IDLE, ids=lambda p: p.name.split("__")[1])
def test_idle_capture_is_a_succeeded_run_without_rows(capture: Path, warehouse: Path):
    assert read_log(capture) == [] and capture.read_text().startswith("timestamp, ")  # a header, no processes
    result = run(warehouse, {"path": str(capture)})
    assert result.status == "succeeded", result.error
    assert result.rows == 0 and processes(warehouse) == []
    with db.writer(warehouse) as con:
        assert con.execute("SELECT status, rows FROM ingest_runs WHERE run_id = ?", [result.run_id]).fetchall() == [
            ("succeeded", 0)
        ]


def test_gpu_and_process_logs_load_in_one_run_and_attribute_alike(tmp_path: Path, warehouse: Path):
    """Logs of both kinds under one glob, a folder per kind (the file's name is the host)."""
    with db.writer(warehouse) as con:
        con.execute(
            'INSERT INTO cost_line_items ("ResourceId", "ChargePeriodStart", "x_Team") '
            "VALUES ('i-0abc123', '2026-07-01 00:00:00+00', 'vision')"
        )
    for folder in ("gpu", "apps"):
        (tmp_path / folder).mkdir()
    shutil.copy(H100_GPU, tmp_path / "gpu" / "i-0abc123.csv")
    shutil.copy(H100_APPS, tmp_path / "apps" / "i-0abc123.csv")
    shutil.copy(H100_APPS, tmp_path / "apps" / "gpu-node-7.csv")
    shutil.copy(IDLE[0], tmp_path / "apps" / "idle-node.csv")
    result = run(warehouse, {"path": str(tmp_path / "*" / "*.csv"), "resource_map": {"gpu-node-7": "i-0abc123"}})
    assert result.status == "succeeded", result.error
    with db.writer(warehouse) as con:
        ((gpu_host, gpu_resource, gpu_team, gpu_run),) = con.execute(
            "SELECT host, resource_id, team, ingest_run_id FROM gpu_metrics_hourly"
        ).fetchall()
    assert (gpu_host, gpu_resource, gpu_team, gpu_run) == ("i-0abc123", "i-0abc123", "vision", result.run_id)
    got = processes(warehouse)
    per_file = len(read_log(H100_APPS))
    assert len(got) == 2 * per_file and result.rows == 1 + 2 * per_file
    assert {(r["host"], r["resource_id"], r["team"], r["ingest_run_id"]) for r in got} == {
        ("i-0abc123", "i-0abc123", "vision", result.run_id),
        ("gpu-node-7", "i-0abc123", "vision", result.run_id),
    }


# ---------- multi-sample logs ---------------------------------------------------------------------


def test_hourly_rollup_matches_independent_calculation(tmp_path: Path, warehouse: Path):
    rng = random.Random(11)
    logs = AppsLogBuilder()
    real = read_log(H100_APPS)
    day = hour_of(parse_ts(real[0]["timestamp"])).replace(hour=0)
    # 08:58–09:03 crosses an hour; 11:00–11:02 follows an hour (10:00) in which nothing was logged.
    points = process_samples(day + timedelta(hours=8, minutes=58), 300, rng)
    points += process_samples(day + timedelta(hours=11), 150, rng)
    lines = [logs.line(*p) for p in points]
    lines.insert(40, lines[39])  # the same sample logged twice
    lines[100:110] = list(reversed(lines[100:110]))  # out of order
    lines.insert(200, logs.header_line)  # nvidia-smi restarted, appending its header
    lines.insert(0, ", ".join(logs.template))  # the real capture's own row
    lines.append(lines[-1][: len(lines[-1]) // 2])  # a line nvidia-smi was still writing
    logs.write(tmp_path / "node1.csv", lines)
    result = run(warehouse, {"path": str(tmp_path / "*.csv")})
    assert result.status == "succeeded", result.error
    first = real[0]
    real_point = (
        parse_ts(first["timestamp"]),
        first["gpu_uuid"],
        int(first["pid"]),
        first["process_name"],
        number(first[MEMORY]),
    )
    expected = expected_processes([real_point, *points], "node1")
    got = {key(r): r for r in processes(warehouse)}
    assert sorted(got) == sorted(expected)
    assert not [k for k in got if k[0] == day + timedelta(hours=10)]  # unknown, not zero
    for k, want in expected.items():
        for column, value in want.items():
            assert got[k][column] == pytest.approx(value), (k, column)
    assert result.rows == len(expected)


# ---------- idempotency and bad input -------------------------------------------------------------


def _mixed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    for capture in APPS_CAPTURES + sorted(DATA.glob("*__query-gpu.csv")):
        shutil.copy(capture, folder / capture.name)
    return folder


def test_second_run_is_skipped_and_changes_nothing(tmp_path: Path, warehouse: Path):
    options = {"path": str(_mixed_folder(tmp_path) / "*.csv")}
    first = run(warehouse, options)
    assert first.status == "succeeded", first.error
    before = digests(warehouse)
    assert before["gpu_processes_hourly"][0] == sum(len(read_log(p)) for p in LOAD)
    second = run(warehouse, options)
    assert second.status == "skipped" and second.rows == 0
    assert digests(warehouse) == before


def test_removed_process_log_removes_its_rows_only(tmp_path: Path, warehouse: Path):
    folder = _mixed_folder(tmp_path)
    options = {"path": str(folder / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    gpu_before = table_digest(warehouse, "gpu_metrics_hourly")
    (folder / H100_APPS.name).unlink()
    result = run(warehouse, options)
    assert result.status == "succeeded", result.error
    assert H100_APPS.name.removesuffix(".csv") not in {r["host"] for r in processes(warehouse)}
    assert len(processes(warehouse)) == sum(len(read_log(p)) for p in LOAD if p.name != H100_APPS.name)
    assert table_digest(warehouse, "gpu_metrics_hourly") == gpu_before


@pytest.mark.parametrize(
    "value, words", [("lots MiB", ["used_gpu_memory [MiB]", "lots MiB"]), ("12x", ["used_gpu_memory [MiB]", "12x"])]
)
def test_bad_memory_value_fails_the_run_and_leaves_both_tables(
    tmp_path: Path, warehouse: Path, value: str, words: list[str]
):
    options = {"path": str(_mixed_folder(tmp_path) / "*.csv")}
    assert run(warehouse, options).status == "succeeded"
    before = digests(warehouse)
    logs = AppsLogBuilder()
    bad = logs.write(
        tmp_path / "logs" / "bad-node.csv",
        [
            logs.line(datetime(2026, 7, 14, 9, 0, 1, tzinfo=UTC), "GPU-z", 1, "python3", 100.0),
            logs.line(datetime(2026, 7, 14, 9, 0, 2, tzinfo=UTC), "GPU-z", 1, "python3", 100.0).replace(
                "100 MiB", value
            ),
        ],
    )
    shutil.copy(H100_GPU, tmp_path / "logs" / "new-gpu-node.csv")  # a good new log in the same run
    result = run(warehouse, options)
    assert result.status == "failed"
    assert str(bad) in result.error and all(w in result.error for w in words), result.error
    assert "\n" not in result.error
    assert digests(warehouse) == before
