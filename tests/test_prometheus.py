"""``prometheus`` against a real Prometheus server (Debian package) on loopback.

The server's TSDB is backfilled with ``promtool tsdb create-blocks-from openmetrics`` from the known
series of tests/gpu_series.py and the real nvidia_gpu_exporter capture; it also scrapes a loopback
DCGM exporter live. Expected figures are computed independently in tests/gpu_series.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.prometheus import Prometheus
from tests import gpu_series as gs
from tests.conftest import free_port, table_digest
from tests.prometheus_fixture import ExporterServer, PrometheusServer, requires_prometheus
from tests.test_dcgm_exporter import check_known_series, hourly

pytestmark = [requires_prometheus, pytest.mark.emulator]

LIVE_UUID = "GPU-9f8e7d6c-0000-1111-2222-333344445555"
LIVE_BODY = (
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{LIVE_UUID}",device="nvidia0",modelName="NVIDIA L40S",Hostname="live-node"}} 37\n'
    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    f'DCGM_FI_DEV_FB_USED{{gpu="0",UUID="{LIVE_UUID}",device="nvidia0",modelName="NVIDIA L40S",Hostname="live-node"}} 1234\n'
)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    with ExporterServer() as exporter:
        exporter.bodies["/metrics"] = LIVE_BODY
        history = gs.openmetrics(gs.samples() + gs.nvidia_smi_series())
        prom = PrometheusServer(tmp_path_factory.mktemp("prometheus"), history, [f"127.0.0.1:{exporter.port}"])
        try:
            prom.wait_ready()
            yield prom, exporter
        finally:
            prom.stop()


def registry() -> Registry:
    r = Registry()
    r.register(Prometheus)
    return r


def options(prom: PrometheusServer, **extra) -> dict:
    return {
        "url": prom.url,
        "resource_map": gs.RESOURCE_MAP,
        "namespace_teams": gs.NAMESPACE_TEAMS,
        "selector": 'job!="dcgm"',
        "retries": 2,
        **extra,
    }


def run(warehouse, opts, **kw):
    return run_source(registry(), warehouse, "prom", "prometheus", opts, **kw)


def test_pushed_down_hourly_rollups_equal_the_known_series(servers, warehouse):
    prom, _ = servers
    gs.insert_bills(warehouse)
    result = run(warehouse, options(prom), since=gs.START, until=gs.START + timedelta(hours=gs.HOURS))
    assert result.status == "succeeded", result.error
    rows = hourly(warehouse, "prom")
    smi = {k: r for k, r in rows.items() if k[1] == "00000000-0000-0000-0000-000000000000"}
    check_known_series({k: r for k, r in rows.items() if k not in smi})


def test_nvidia_smi_dialect_from_the_real_exporter_capture(servers, warehouse):
    prom, _ = servers
    result = run(warehouse, options(prom), since=gs.START, until=gs.START + timedelta(hours=gs.HOURS))
    assert result.status == "succeeded", result.error
    rows = [r for k, r in hourly(warehouse, "prom").items() if k[1] == "00000000-0000-0000-0000-000000000000"]
    # the capture: utilization_gpu_ratio 1, memory used 2.0780679168e+10 B of 8.5520809984e+10 B, 631.95 W
    assert len(rows) == 1 and rows[0]["hour"] == gs.START
    row = rows[0]
    assert row["util_mean"] == row["util_max"] == row["util_p95"] == 100.0 and row["samples"] == 60
    assert row["mem_used_max_mib"] == 2.0780679168e10 / 1048576 and row["mem_total_mib"] == 8.5520809984e10 / 1048576
    assert row["power_mean_w"] == pytest.approx(631.95) and row["gpu_model"] == "H100-SXM"
    assert row["host"] == "smi-host" and row["mig_instance"] is None and row["resource_id"] is None


def test_incremental_runs_from_the_cursor_with_a_lookback_and_skip_when_nothing_changed(servers, warehouse):
    prom, _ = servers
    gs.insert_bills(warehouse)
    opts = options(prom, lookback_hours=2)
    first = run(warehouse, opts, since=gs.START, until=gs.START + timedelta(hours=2))
    assert first.status == "succeeded", first.error
    assert {k[0] for k in hourly(warehouse, "prom")} == {gs.START, gs.START + timedelta(hours=1)}
    second = run(warehouse, opts, until=gs.START + timedelta(hours=gs.HOURS))  # from the cursor - 2 h
    assert second.status == "succeeded", second.error
    assert second.watermark == (gs.START + timedelta(hours=gs.HOURS)).isoformat()
    rows = hourly(warehouse, "prom")
    check_known_series({k: r for k, r in rows.items() if k[1] != "00000000-0000-0000-0000-000000000000"})
    before = table_digest(warehouse, "gpu_metrics_hourly")
    third = run(warehouse, opts, until=gs.START + timedelta(hours=gs.HOURS))
    assert third.status == "skipped" and table_digest(warehouse, "gpu_metrics_hourly") == before


def test_a_live_scrape_of_a_loopback_exporter(servers, warehouse):
    prom, _ = servers
    prom.wait_scraped()
    now = datetime.now(UTC)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    result = run(
        warehouse, {"url": prom.url, "selector": 'job="dcgm"'}, since=this_hour, until=this_hour + timedelta(hours=1)
    )
    assert result.status == "succeeded", result.error
    rows = [r for k, r in hourly(warehouse, "prom").items() if k[1] == LIVE_UUID]
    assert rows and all(r["util_mean"] == r["util_max"] == 37.0 and r["mem_used_max_mib"] == 1234.0 for r in rows)
    assert rows[-1]["host"] == "live-node" and rows[-1]["gpu_model"] == "L40S" and rows[-1]["samples"] >= 1


def test_a_bad_query_and_an_unreachable_server_fail_with_one_sentence(servers, warehouse):
    prom, _ = servers
    bad = run(warehouse, options(prom, selector='job=~"('), since=gs.START, until=gs.START + timedelta(hours=1))
    assert bad.status == "failed" and "refused /api/v1/query_range" in bad.error and "bad_data" in bad.error
    down = run(
        warehouse,
        {"url": f"http://127.0.0.1:{free_port()}", "retries": 1, "timeout_s": 1},
        since=gs.START,
        until=gs.START + timedelta(hours=1),
    )
    assert down.status == "failed" and "unreachable" in down.error
