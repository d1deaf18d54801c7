"""Withheld, not guessed: a resource whose source exports none of a busy-waste kind's DCGM profiling fields
gets no diagnosis and a withheld reason naming the fields and how to turn them on; the real DCGM captures
in tests/data (an H100 node's, a T4's) get no busy-waste finding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import polars as pl
import pytest

from gpufinops.models import busy_findings, run
from gpufinops.models.busy_kinds import ENGINE, NO_TENSOR_CORES
from gpufinops.simulator.busy_phases import exposition_rows
from gpufinops.warehouse import db
from tests import busy_world as world
from tests.allocation_fleet import START, Line, write_focus_csv
from tests.conftest import DATA
from tests.gpu_series import exposition
from tests.prometheus_fixture import ExporterServer

BUSY = ("idle_held", "stalled_job", "input_bound", "no_tensor_cores", "memory_bound_inference")
DEVICE_ONLY = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")


def _analyse(warehouse):
    with db.writer(warehouse) as con:
        return run.analyse(con)


def test_an_exporter_without_profiling_fields_withholds_naming_them(tmp_path):
    rows = [r for r in exposition_rows(world.five_pods(), int(START.timestamp() * 1000), 7) if r[0] in DEVICE_ONLY]
    with ExporterServer() as server:
        server.bodies["/metrics"] = exposition(rows)
        world.load(tmp_path / "wh.duckdb", tmp_path, server.url("/metrics"))
    found = _analyse(tmp_path / "wh.duckdb")
    assert [r for r in found.recommendations if r.kind in BUSY] == []
    held = {w.kind: w for w in found.withheld if w.kind in BUSY and w.resource_id == "i-0busy"}
    assert set(held) == set(BUSY)
    assert held["idle_held"].reason == "no_profiling_fields"
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in held["idle_held"].detail
    assert "counters file" in held["idle_held"].detail
    assert "DCGM_FI_PROF_PIPE_FP32_ACTIVE" in held["no_tensor_cores"].detail
    assert "DCGM_FI_PROF_PCIE_RX_BYTES" in held["input_bound"].detail
    assert "default-counters.csv" in held["no_tensor_cores"].source_hint  # which fields are off by default


@pytest.mark.parametrize(("source_type", "says"), [("nvidia_smi_csv", "nvidia-smi"), ("cloudwatch_gpu", "CloudWatch")])
def test_nvidia_smi_and_cloudwatch_say_they_cannot_provide_them(source_type, says):
    hours = pl.DataFrame(
        {
            "resource_id": ["i-1"],
            "team": ["ml"],
            "provider": ["AWS"],
            "source": ["gpus"],
            "source_type": [source_type],
            **{c: pl.Series([None], dtype=pl.Float64) for c in {**ENGINE, **NO_TENSOR_CORES.fields}},
        }
    )
    (held,) = busy_findings.withheld("no_tensor_cores", hours, NO_TENSOR_CORES.fields)
    assert f"{says} cannot provide them" in held.detail
    assert "DCGM_FI_PROF_PIPE_FP32_ACTIVE" in held.detail


@pytest.mark.parametrize(
    ("capture", "host"),
    [
        (
            "nvidia-aicr-dcgm-h100/accelerator-metrics_2026-03-10_156a357e.dcgm-sampled.prom",
            "ip-10-0-171-111.ec2.internal",
        ),
        ("datadog-dcgm-fixture/metrics.txt", "424773df46e0"),
    ],
)
def test_real_captures_get_no_busy_waste_finding(tmp_path, capture, host):
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    (tmp_path / "bills").mkdir()
    write_focus_csv(
        tmp_path / "bills" / "focus.csv", [Line("i-real", h, Decimal("12"), team="ml") for h in range(4)], now
    )
    with ExporterServer() as server:
        server.bodies["/metrics"] = (DATA / capture).read_text()
        for name, kind, options in (
            ("bills", "focus_files", {"path": str(tmp_path / "bills" / "*.csv")}),
            ("dcgm", "dcgm_exporter", {"targets": [server.url("/metrics")], "resource_map": {host: "i-real"}}),
        ):
            result = world.run_source(world.registry(), tmp_path / "wh.duckdb", name, kind, options)
            assert result.status == "succeeded", result.error
    found = _analyse(tmp_path / "wh.duckdb")
    assert [(r.kind, r.workload) for r in found.recommendations if r.kind in BUSY] == []


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('DCGM_FI_PROF_SM_OCCUPANCY{gpu="0",UUID="GPU-1"} NaN 1793577600000', "NaN"),
        ('DCGM_FI_PROF_PCIE_RX_BYTES{gpu="0",UUID="GPU-1"} -5 1793577600000', "-5"),
        ('DCGM_FI_PROF_PIPE_FP64_ACTIVE{gpu="0",UUID="GPU-1"} 1.5 1793577600000', "1.5"),
        ('DCGM_FI_PROF_NVLINK_TX_BYTES{gpu="0",UUID="GPU-1"} +Inf 1793577600000', "inf"),
    ],
)
def test_a_hostile_profiling_value_is_refused_naming_its_line(line, says):
    from gpufinops.ingest.core.registry import IngestError
    from gpufinops.ingest.metrics.dcgm_exposition import ExpositionParser

    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 50 1793577600000\n' + line + "\n"
    with pytest.raises(IngestError) as raised:
        ExpositionParser().parse(text, 1793577600000, "node", "http://127.0.0.1/metrics")
    message = str(raised.value)
    assert "http://127.0.0.1/metrics" in message and "line 2" in message and says.lower() in message.lower()


def test_a_memory_bound_server_links_the_quantization_finding_and_prices_nothing_twice():
    from gpufinops.jobs import eval_busy
    from gpufinops.models import busy_kinds
    from gpufinops.models.busy_profile import BusyInputs
    from gpufinops.simulator.busy_fleet import fleet

    servers = [p for p in fleet(101) if p.case == "memory-bound server"][:1]
    hours = eval_busy.hours_of(eval_busy.samples(servers, 101))
    pod = (servers[0].pod.namespace, servers[0].pod.pod)
    resource = hours["resource_id"][0]
    alone = busy_kinds.memory_bound_inference(BusyInputs(hours, {}, frozenset([pod]), {}))
    linked = busy_kinds.memory_bound_inference(BusyInputs(hours, {}, frozenset([pod]), {resource: "quantization-1"}))
    (own,), (other,) = alone.recommendations, linked.recommendations
    assert own.monthly_savings_usd > 0 and own.evidence["quantization_finding"] is None
    assert other.monthly_savings_usd == 0 and other.evidence["quantization_finding"] == "quantization-1"
    not_serving = busy_kinds.memory_bound_inference(BusyInputs(hours, {}, frozenset([("x", "y")]), {}))
    assert not_serving.recommendations == []
