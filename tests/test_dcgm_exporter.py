"""``dcgm_exporter`` against a loopback HTTP exporter: exact rollups, MIG apart, gaps, attribution.

Expected figures come from tests/gpu_series.py (statistics / numpy over the generated values),
never from the ingestor.
"""

from __future__ import annotations

import csv
import random
import re
from datetime import UTC, datetime, timedelta

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics import metrics_attribution, metrics_store
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.ingest.metrics.dcgm_exposition import FIELDS, ExpositionParser
from gpufinops.warehouse import db, queries
from tests import gpu_series as gs
from tests.conftest import DATA, table_digest
from tests.prometheus_fixture import ExporterServer

FIGURES = (
    "util_mean",
    "util_p95",
    "util_max",
    "mem_used_max_mib",
    "mem_total_mib",
    "power_mean_w",
    "sm_active_mean",
    "tensor_active_mean",
)


def registry() -> Registry:
    r = Registry()
    r.register(DcgmExporter)
    return r


def options(*targets: str, **extra) -> dict:
    return {
        "targets": list(targets),
        "resource_map": gs.RESOURCE_MAP,
        "namespace_teams": gs.NAMESPACE_TEAMS,
        "retries": 2,
        "timeout_s": 5,
        **extra,
    }


def hourly(warehouse, source: str = "dcgm") -> dict[tuple, dict]:
    with db.reader(warehouse) as con:
        frame = con.sql("SELECT * FROM gpu_metrics_hourly WHERE source = ?", params=[source]).to_arrow_table()
    return {(r["hour"], r["gpu_uuid"], r["mig_instance"]): r for r in frame.to_pylist()}


def check_known_series(rows: dict[tuple, dict], *, samples: bool = True) -> None:
    """Every row equals the independent calculation; MIG slices apart; the gap hour has no row."""
    expected_keys = set()
    for i, gpu in enumerate(gs.GPUS):
        for hour, figures in gs.expected(i).items():
            key = (hour, gpu.uuid, gpu.mig_instance)
            expected_keys.add(key)
            row = rows[key]
            for name in FIGURES:
                assert row[name] == pytest.approx(figures[name], rel=1e-9, abs=1e-9), (i, hour, name)
            if samples:
                assert row["samples"] == figures["samples"]
            assert row["host"] == gpu.host
            assert row["resource_id"] == gs.EXPECTED_RESOURCE[i], (i, gpu.host)
            assert row["team"] == gs.EXPECTED_TEAM[i], i
    assert set(rows) == expected_keys
    gap = gs.START + timedelta(hours=2)
    assert (gap, gs.GPUS[1].uuid, None) not in rows  # a gap is unknown: no row, never a zero


@pytest.fixture
def exporter():
    with ExporterServer() as server:
        yield server


def test_scrape_rolls_up_known_series_exactly_with_duplicates_and_disorder(tmp_path, warehouse, exporter):
    gs.insert_bills(warehouse)
    rows = gs.samples()
    shuffled = rows + rows[::7]  # every 7th sample served twice
    random.Random(5).shuffle(shuffled)
    half = len(shuffled) // 2
    exporter.bodies["/a/metrics"] = gs.exposition(sorted(shuffled[:half]))
    exporter.bodies["/b/metrics"] = gs.exposition(shuffled[half:])
    result = run_source(
        registry(), warehouse, "dcgm", "dcgm_exporter", options(exporter.url("/a/metrics"), exporter.url("/b/metrics"))
    )
    assert result.status == "succeeded", result.error
    got = hourly(warehouse)
    check_known_series(got)
    mig = {k[2]: r for k, r in got.items() if k[1] == gs.GPUS[2].uuid and k[0] == gs.START}
    assert set(mig) == {"1g.10gb/9", "3g.40gb/2"} and mig["1g.10gb/9"]["util_mean"] != mig["3g.40gb/2"]["util_mean"]
    assert {r["gpu_model"] for r in got.values()} == {"H100-SXM", "L40S", "A100-80GB"}
    # samples are kept as day-partitioned Parquet beside the warehouse
    store = warehouse.parent / "samples" / "dcgm"
    assert [p.name for p in store.iterdir()] == ["day=2026-11-20"]

    with db.reader(warehouse) as con:
        share = queries.gpu_hours_attribution(con).to_dicts()
        unattributed = queries.unattributed_gpu_hours(con).to_dicts()
        side = queries.gpu_resource_hours(con)
    stray_hours = len(gs.expected(5))
    total_hours = sum(len(gs.expected(i)) for i in range(len(gs.GPUS)))
    assert share == [
        {
            "source": "dcgm",
            "gpu_hours": total_hours,
            "attributed_gpu_hours": total_hours - stray_hours,
            "unattributed_gpu_hours": stray_hours,
            "team_gpu_hours": total_hours - stray_hours,
            "unattributed_share": stray_hours / total_hours,
        }
    ]
    assert [(u["host"], u["gpu_hours"], u["gpus"]) for u in unattributed] == [("stray-host", stray_hours, 1)]
    # cost and utilisation side by side per billed resource-hour; the gap hour keeps its cost, util unknown
    gap = side.filter((side["resource_id"] == "host-b") & (side["hour"] == gs.START + timedelta(hours=2))).to_dicts()[0]
    assert str(gap["effective_cost"]).startswith("2.5") and gap["util_max"] is None
    a = side.filter(side["resource_id"] == "i-0123456789abcdef0").sort("hour").to_dicts()
    assert [r["util_max"] for r in a] == [gs.expected(0)[h]["util_max"] for h in sorted(gs.expected(0))]


def test_unchanged_targets_skip_and_new_samples_roll_up(tmp_path, warehouse, exporter):
    gs.insert_bills(warehouse)
    rows = gs.samples()
    first_hours = [r for r in rows if r[3] < int((gs.START + timedelta(hours=2)).timestamp() * 1000)]
    exporter.bodies["/metrics"] = gs.exposition(first_hours)
    opts = options(exporter.url("/metrics"))
    assert run_source(registry(), warehouse, "dcgm", "dcgm_exporter", opts).status == "succeeded"
    before = table_digest(warehouse, "gpu_metrics_hourly")
    again = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", opts)
    assert again.status == "skipped" and table_digest(warehouse, "gpu_metrics_hourly") == before
    exporter.bodies["/metrics"] = gs.exposition(rows)  # the next scrape: the later hours, and the earlier again
    later = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", opts)
    assert later.status == "succeeded", later.error
    check_known_series(hourly(warehouse))


def test_retries_a_failing_exporter_and_fails_loudly_on_one_that_stays_down(tmp_path, warehouse, exporter):
    gs.insert_bills(warehouse)
    rows = gs.samples()
    exporter.bodies["/ok"] = gs.exposition(rows)
    exporter.fail_first["/ok"] = 1  # one 503, then the body
    exporter.bodies["/slow"] = gs.exposition(rows[:10])
    exporter.stall_s["/slow"] = 2.0  # longer than the timeout, every time
    result = run_source(
        registry(),
        warehouse,
        "dcgm",
        "dcgm_exporter",
        options(exporter.url("/ok"), exporter.url("/slow"), timeout_s=0.5, retries=2),
    )
    assert result.status == "failed"
    assert exporter.url("/slow") in result.error and "1 of 2 target(s) failed" in result.error
    assert exporter.requests.count("/ok") == 2 and exporter.requests.count("/slow") == 2
    # the good target's samples were kept; once the slow one is dropped, they roll up
    retry = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", options(exporter.url("/ok")))
    assert retry.status == "succeeded", retry.error
    check_known_series(hourly(warehouse))


def test_a_live_scrape_without_timestamps_is_stamped_with_the_scrape_time(warehouse, exporter):
    body = "\n".join(
        line.rsplit(" ", 1)[0]
        for line in gs.exposition([r for r in gs.samples() if r[3] == int(gs.START.timestamp() * 1000)]).splitlines()
        if not line.startswith("#")
    )
    exporter.bodies["/metrics"] = body + "\n"
    before = datetime.now(UTC).replace(microsecond=0)
    result = run_source(registry(), warehouse, "live", "dcgm_exporter", options(exporter.url("/metrics")))
    assert result.status == "succeeded", result.error
    rows = hourly(warehouse, "live")
    assert len(rows) == len(gs.GPUS) and all(r["samples"] == 1 for r in rows.values())
    assert {k[0] for k in rows} <= {
        before.replace(minute=0, second=0),
        datetime.now(UTC).replace(minute=0, second=0, microsecond=0),
    }
    second = run_source(registry(), warehouse, "live", "dcgm_exporter", options(exporter.url("/metrics")))
    assert second.status == "succeeded"  # the same gauges at a new time are new samples
    assert sum(r["samples"] for r in hourly(warehouse, "live").values()) in (2 * len(gs.GPUS), len(gs.GPUS))


def test_bad_exposition_names_the_target_and_line(warehouse, exporter):
    exporter.bodies["/metrics"] = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 12\nDCGM_FI_DEV_GPU_UTIL{gpu="1" 3\n'
    result = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", options(exporter.url("/metrics")))
    assert result.status == "failed" and "line 2" in result.error and exporter.url("/metrics") in result.error


def test_file_targets_and_compaction(tmp_path, warehouse, monkeypatch):
    monkeypatch.setattr(metrics_store, "COMPACT_AFTER_FILES", 2)
    gs.insert_bills(warehouse)
    rows = gs.samples()
    folder = tmp_path / "expo"
    folder.mkdir()
    for n in range(4):  # four recorded scrapes, one per hour, read as files
        part = [r for r in rows if (r[3] - int(gs.START.timestamp() * 1000)) // 3_600_000 == n]
        (folder / f"scrape-{n}.prom").write_text(gs.exposition(part))
        result = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", options(str(folder / "scrape-*.prom")))
        assert result.status == "succeeded", result.error
    files = list((warehouse.parent / "samples" / "dcgm" / "day=2026-11-20").glob("*.parquet"))
    assert len(files) <= 2
    check_known_series(hourly(warehouse))


def test_every_mapped_field_is_a_real_dcgm_exporter_counter():
    exported = set()
    for name in ("default-counters.csv", "dcp-metrics-included.csv"):
        for row in csv.reader((DATA / "dcgm-exporter" / name).read_text().splitlines()):
            if row and row[0].strip().lstrip("# ").startswith("DCGM_FI_"):
                exported.add(re.sub(r"^#\s*", "", row[0]).strip())
    # NVLink's profiling rates are DCGM fields 1011/1012 (dcgm_fields.h) that these counters files do not list
    nvlink = {"DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}
    assert set(FIELDS) - nvlink <= exported
    assert not nvlink & exported  # the day a counters file lists them, they join the check above


def test_parser_reads_labels_with_the_prometheus_client_grammar():
    text = (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA \\"H100\\" 80GB",Hostname="h{1}",'
        'instance_id="i-1"} 7 1763596800000\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA \\"H100\\" 80GB",Hostname="h{1}",'
        'instance_id="i-1"} 1024 1763596800000\nDCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a"} 0\n'
    )
    table, stamped = ExpositionParser().parse(text, 0, "fallback", "t")
    row = table.to_pylist()
    assert len(row) == 1 and row[0]["name"] == 'NVIDIA "H100" 80GB' and row[0]["host"] == "h{1}"
    assert row[0]["util"] == 7 and row[0]["mem_used_mib"] == 1024 and row[0]["resource_hint"] == "i-1"
    assert not stamped  # the XID line has no timestamp


def test_provider_ids_name_the_billed_resource():
    assert metrics_attribution.provider_id_resource("aws:///us-east-1a/i-0fedcba9876543210") == "i-0fedcba9876543210"
    assert (
        metrics_attribution.provider_id_resource("gce://ml-prod-4821/us-central1-a/vision-train-a2")
        == "//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-a/instances/vision-train-a2"
    )
    assert metrics_attribution.provider_id_resource(None) is None


def test_a_gpu_shared_by_two_namespaces_in_an_hour_goes_to_the_team_with_most_samples(warehouse, exporter):
    gs.insert_bills(warehouse)
    minute_ms = 60_000
    start = int(gs.START.timestamp() * 1000)
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for minute in range(60):
        namespace = "ml-train" if minute < 40 else "ml-serve"
        lines.append(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-shared",Hostname="ip-10-0-0-9",namespace="{namespace}",'
            f'pod="p-{namespace}"}} {minute} {start + minute * minute_ms}'
        )
    exporter.bodies["/metrics"] = "\n".join(lines) + "\n"
    result = run_source(registry(), warehouse, "dcgm", "dcgm_exporter", options(exporter.url("/metrics")))
    assert result.status == "succeeded", result.error
    (row,) = hourly(warehouse).values()
    assert row["team"] == "vision" and row["samples"] == 60 and row["util_mean"] == 29.5
    assert row["resource_id"] == "i-0mapped000000000c"
