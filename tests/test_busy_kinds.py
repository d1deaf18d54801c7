"""The busy-waste kinds end to end: a loopback DCGM exporter serving five pods of one billed 8-GPU A100
node, loaded with its FOCUS bill by the real ingestors, then every model run. The expected dollars are
the bill's rate split per GPU (the node's GPUs, whole) times the hours that show each pattern, computed
here from the world's definition (tests/busy_world.py), never from the models."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpufinops.models import run
from gpufinops.warehouse import db
from tests import busy_world as world
from tests.prometheus_fixture import ExporterServer

MONTH_DAYS = Decimal("30.4375")
PER_GPU_HOUR = world.RATE / world.GPUS


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    folder = tmp_path_factory.mktemp("busy")
    warehouse = folder / "wh.duckdb"
    with ExporterServer() as server:
        server.bodies["/metrics"] = world.body()
        world.load(warehouse, folder, server.url("/metrics"))
    with db.writer(warehouse) as con:
        found = run.analyse(con)
        hourly = con.sql(
            "SELECT pod, count(*) AS n, sum(held_idle_minutes) AS idle, max(idle_dips) AS dips "
            "FROM gpu_metrics_hourly GROUP BY pod"
        ).fetchall()
    return found, {row[0]: row[1:] for row in hourly}


def _by_pod(found, kind: str) -> dict[str, object]:
    return {r.workload: r for r in found.recommendations if r.kind == kind}


def _monthly(hours: int, gpus: int, window_hours: int) -> Decimal:
    return (PER_GPU_HOUR * hours * gpus) / (Decimal(window_hours) / 24) * MONTH_DAYS


def test_the_rollup_keeps_the_minute_shape(outcome):
    _, hourly = outcome
    n, idle, dips = hourly["notebook-alice"]
    assert n == 24 and idle >= 20 * 59  # 20 hours idle with 30 GB held, minute by minute
    assert hourly["resnet-trainer"][2] >= 6  # the loader's gaps: drops to idle and back within the hour


def test_the_notebook_is_idle_held_priced_as_its_held_gpu_hours(outcome):
    found, _ = outcome
    rec = _by_pod(found, "idle_held")["research/notebook-alice"]
    assert rec.evidence["hours_showing_it"] == 20
    assert rec.evidence["gpu_uuids"] == [world._uuid(1)]
    assert abs(rec.monthly_savings_usd - _monthly(20, 1, 24)) <= Decimal("0.05")
    assert rec.evidence["idle_held_minutes"] >= 20 * 59
    assert len(rec.evidence["engine_by_hour"]) == 24
    assert [h["idle_min"] for h in rec.evidence["hourly_profile"]].count(60) >= 20


def test_the_stalled_job_is_priced_per_stalled_hour(outcome):
    found, _ = outcome
    rec = _by_pod(found, "stalled_job")["train/llm-finetune-7"]
    assert rec.evidence["stalled_hours"] == 6 and rec.evidence["busy_hours_before"] == 10
    assert rec.evidence["cost_per_stalled_hour_usd"] == (PER_GPU_HOUR * 2).quantize(Decimal("0.01"))
    assert abs(rec.monthly_savings_usd - _monthly(6, 2, 16)) <= Decimal("0.05")
    assert "research/notebook-alice" not in _by_pod(found, "stalled_job")
    assert "train/llm-finetune-7" not in _by_pod(found, "idle_held")


def test_the_input_bound_trainer_is_priced_as_its_idle_share(outcome):
    found, _ = outcome
    rec = _by_pod(found, "input_bound")["vision/resnet-trainer"]
    share = Decimal(str(rec.evidence["idle_share"]))
    assert Decimal("0.3") < share < Decimal("0.7")
    assert abs(rec.monthly_savings_usd - _monthly(24, 1, 24) * share) <= Decimal("0.5") + _monthly(24, 1, 24) / 1000
    assert rec.evidence["host_to_device_in_gaps_mbps"] > 300


def test_the_fp32_trainer_on_an_a100_needs_mixed_precision(outcome):
    found, _ = outcome
    rec = _by_pod(found, "no_tensor_cores")["research/bert-fp32"]
    assert rec.current["gpu_model"] == "A100-80GB"
    assert abs(rec.monthly_savings_usd - _monthly(24, 1, 24) / 3) <= Decimal("0.05")  # 1 - 1/1.5 of its hours
    assert rec.evidence["tensor_pipe_pct"] < 2


def test_the_healthy_bf16_trainer_gets_nothing(outcome):
    found, _ = outcome
    kinds = ("idle_held", "stalled_job", "input_bound", "no_tensor_cores", "memory_bound_inference")
    assert [r.kind for r in found.recommendations if r.workload == "train/llm-bf16" and r.kind in kinds] == []
    planted = {
        "idle_held": "research/notebook-alice",
        "stalled_job": "train/llm-finetune-7",
        "input_bound": "vision/resnet-trainer",
        "no_tensor_cores": "research/bert-fp32",
    }
    for kind in kinds:
        assert set(_by_pod(found, kind)) == ({planted[kind]} if kind in planted else set())


def test_the_stalled_job_alerts_its_owner_through_the_alert_pipeline(tmp_path):
    from gpufinops.models import alerts
    from gpufinops.models.alert_records import AlertSettings

    with ExporterServer() as server:
        server.bodies["/metrics"] = world.body()
        world.load(tmp_path / "wh.duckdb", tmp_path, server.url("/metrics"))
    with db.writer(tmp_path / "wh.duckdb") as con:
        (outcome,) = alerts.evaluate(con, AlertSettings(rules=("stalled_job",)))
    (alert,) = outcome.alerts
    assert alert.scope == "i-0busy/train/llm-finetune-7" and alert.teams == ("ml",)
    assert alert.details["stalled_hours"] == 6
    assert alert.value_usd == (PER_GPU_HOUR * 2).quantize(Decimal("0.01"))
