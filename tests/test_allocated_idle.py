"""Allocated but idle, on real DCGM readings: NVIDIA's H100 EKS evidence has a vLLM pod holding 74 GB of a GPU
at 0 % utilisation (tests/data/nvidia-aicr-dcgm-h100); the idle model must name it. Also the real T4 scrape
(tests/data/datadog-dcgm-fixture) through ``dcgm_exporter``.

The aicr readings are Prometheus instant-query answers: one instant per GPU, not a series. The idle model
needs a run of hours, so the tests *replay* each answer as a series — the same labels and value once a minute
for six hours (longer than the model's three-hour minimum run) — through ``dcgm_exporter`` (as a recorded
exposition with timestamps) and through a real Prometheus (backfilled with promtool) read by ``prometheus``.
The node is billed as what it is, a p5.48xlarge (8 × H100) at the on-demand price in
warehouse/data/aws_ondemand_karpenter.csv ($55.04/h).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.ingest.metrics.prometheus import Prometheus
from gpufinops.models import run as models_run
from gpufinops.warehouse import db
from tests.allocation_fleet import Line, write_focus_csv
from tests.conftest import DATA, query
from tests.prometheus_fixture import PrometheusServer, requires_prometheus

AICR = DATA / "nvidia-aicr-dcgm-h100"
ANSWERS = AICR / "accelerator-metrics_2026-02-19_4ddf3b88.prometheus-query-responses.json"
T4_SCRAPE = DATA / "datadog-dcgm-fixture" / "metrics.txt"
NODE = "ip-100-64-171-120.ec2.internal"
INSTANCE = "i-0aicr0h100node001"
POD, NAMESPACE = "vllm-agg-0-vllmdecodeworker-5fljt", "dynamo-workload"
START = datetime(2026, 2, 19, tzinfo=UTC)  # the evidence's own day
HOURS = 6
P5_HOURLY = Decimal("55.04")


def registry() -> Registry:
    r = Registry()
    for cls in (DcgmExporter, Prometheus, FocusFiles):
        r.register(cls)
    return r


def replayed_series() -> list[tuple[str, dict, float, int]]:
    """(metric, labels, value, ms) for every GPU of every answer, once a minute for HOURS hours."""
    answers = json.loads(ANSWERS.read_text())
    rows = []
    for answer in answers.values():
        for result in answer["data"]["result"]:
            labels = dict(result["metric"])
            metric = labels.pop("__name__")
            for minute in range(HOURS * 60):
                rows.append(
                    (
                        metric,
                        labels,
                        float(result["value"][1]),
                        int((START + timedelta(minutes=minute)).timestamp() * 1000),
                    )
                )
    return rows


def _labels(labels: dict) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def bill(tmp_path, warehouse) -> None:
    (tmp_path / "bills").mkdir(exist_ok=True)
    write_focus_csv(
        tmp_path / "bills" / "cur.csv",
        [Line(INSTANCE, h, P5_HOURLY, team="ml-platform", gpu_count=8, gpu_model="H100-SXM") for h in range(HOURS)],
        start=START,
    )
    result = run_source(
        registry(),
        warehouse,
        "cur",
        "focus_files",
        {"path": str(tmp_path / "bills" / "*.csv")},
        team_tag_keys=("team",),
    )
    assert result.status == "succeeded", result.error


def check_the_vllm_pod_is_found(warehouse) -> dict:
    with db.writer(warehouse) as con:
        found = models_run.analyse(con, ["idle_gpu"])
    pods = [r for r in found.recommendations if r.evidence.get("pattern") == "allocated_idle"]
    assert len(pods) == 1, [r.evidence for r in found.recommendations]
    rec = pods[0]
    assert rec.kind == "idle_gpu" and rec.resource_id == INSTANCE
    assert rec.workload == f"{NAMESPACE}/{POD}" and rec.team == "inference"
    assert rec.evidence["pod"] == POD and rec.evidence["namespace"] == NAMESPACE and rec.evidence["container"] == "main"
    assert rec.evidence["mem_max_gib"] == round(74198 / 1024, 2) and rec.evidence["util_max"] == 0
    assert rec.evidence["idle_hours"] == HOURS and rec.current["gpu_count"] == 1
    # what allocation charged the pod: one of eight GPUs, the whole six hours
    assert rec.evidence["idle_cost_usd"] == (P5_HOURLY / 8 * HOURS).quantize(Decimal("0.01"))
    node = [r for r in found.recommendations if r.evidence.get("pattern") == "always_idle"]
    assert [r.resource_id for r in node] == [INSTANCE]  # the whole node idles too: its own finding
    # releasing the node frees the pod's GPU with the seven others: the pod's finding is the release's
    # alternative (models/plans.py), never added to it
    assert (node[0].plan, rec.plan) == ("primary", "alternative") and rec.evidence["instead_of"] == [node[0].id]
    assert rec.evidence["gpu_units"] == [rec.evidence["gpu_uuids"][0]] and rec.evidence["gpu_sharing"] == ["whole"]
    stored = query(
        warehouse,
        "SELECT workload, json_extract_string(evidence, '$.pattern') FROM recommendations "
        "WHERE kind = 'idle_gpu' ORDER BY 2",
    )
    assert (f"{NAMESPACE}/{POD}", "allocated_idle") in stored
    return rec.to_dict()


def test_the_vllm_pod_holding_74_gb_of_an_idle_h100_is_found_through_dcgm_exporter(tmp_path, warehouse):
    lines = [f"{metric}{_labels(labels)} {value!r} {ms}" for metric, labels, value, ms in replayed_series()]
    (tmp_path / "aicr.prom").write_text("\n".join(lines) + "\n")
    result = run_source(
        registry(),
        warehouse,
        "dcgm",
        "dcgm_exporter",
        {
            "targets": [str(tmp_path / "aicr.prom")],
            "resource_map": {NODE: INSTANCE},
            "namespace_teams": {NAMESPACE: "inference"},
        },
    )
    assert result.status == "succeeded", result.error
    # the exporter's own pod labels (Prometheus relabelling without honor_labels) are not a workload
    assert query(warehouse, "SELECT DISTINCT namespace, pod FROM gpu_workloads_hourly") == [(NAMESPACE, POD)]
    bill(tmp_path, warehouse)
    check_the_vllm_pod_is_found(warehouse)
    # seven GPUs without a pod and the pod's own GPU: the node's GPU bill, split and unallocated
    rows = dict(query(warehouse, "SELECT basis, sum(cost_usd) FROM gpu_allocation_hourly GROUP BY 1"))
    assert rows == {"whole": P5_HOURLY / 8 * HOURS, "unallocated": P5_HOURLY * 7 / 8 * HOURS}


@pytest.mark.emulator
@requires_prometheus
def test_the_same_pod_through_a_real_prometheus(tmp_path, warehouse):
    history = []
    seen = set()
    for metric, labels, value, ms in replayed_series():
        if metric not in seen:
            seen.add(metric)
            history.append(f"# TYPE {metric} gauge")
        history.append(f"{metric}{_labels(labels)} {value!r} {ms / 1000:.3f}")
    server = PrometheusServer(tmp_path / "prometheus", "\n".join(history) + "\n", [])
    try:
        server.wait_ready()
        bill(tmp_path, warehouse)
        result = run_source(
            registry(),
            warehouse,
            "prom",
            "prometheus",
            {
                "url": server.url,
                "resource_map": {NODE: INSTANCE},
                "namespace_teams": {NAMESPACE: "inference"},
                "retries": 2,
            },
            since=START,
            until=START + timedelta(hours=HOURS),
        )
        assert result.status == "succeeded", result.error
    finally:
        server.stop()
    assert query(warehouse, "SELECT DISTINCT namespace, pod FROM gpu_workloads_hourly") == [(NAMESPACE, POD)]
    check_the_vllm_pod_is_found(warehouse)


def test_a_pod_holding_an_idle_gpu_without_a_bill_is_withheld_as_unpriced(tmp_path, warehouse):
    lines = [f"{metric}{_labels(labels)} {value!r} {ms}" for metric, labels, value, ms in replayed_series()]
    (tmp_path / "aicr.prom").write_text("\n".join(lines) + "\n")
    assert (
        run_source(
            registry(),
            warehouse,
            "dcgm",
            "dcgm_exporter",
            {"targets": [str(tmp_path / "aicr.prom")], "resource_map": {NODE: INSTANCE}},
        ).status
        == "succeeded"
    )
    with db.writer(warehouse) as con:  # no bill: nothing is allocated, the GPU-hours are not even attributed
        found = models_run.analyse(con, ["idle_gpu"])
    assert not [r for r in found.recommendations if r.evidence.get("pattern") == "allocated_idle"]


def test_the_real_t4_scrape_loads_through_dcgm_exporter(warehouse):
    result = run_source(registry(), warehouse, "t4", "dcgm_exporter", {"targets": [str(T4_SCRAPE)]})
    assert result.status == "succeeded", result.error
    rows = {
        r[0]: r[1:]
        for r in query(
            warehouse,
            """
        SELECT gpu_uuid, host, gpu_model, util_max, mem_used_max_mib, power_mean_w, samples FROM gpu_metrics_hourly""",
        )
    }
    # two real T4 hosts (the label-less "dummy values" block of the file belongs to no GPU and is left out)
    assert rows["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"] == ("424773df46e0", "T4", 0.0, 0.0, 8.969, 1)
    assert rows["GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5"][:2] == ("551bdf382151", "T4")
    assert rows["GPU-abc"][:2] == ("ip-11111", "A10G")  # the pod-labelled A10G line (DRAM activity only)
    assert set(rows) == {
        "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e",
        "GPU-9ef1b6d0-3643-5dd7-b823-c0ec20dcf2d5",
        "GPU-abc",
    }
    assert query(warehouse, "SELECT gpu_uuid, namespace, pod, container FROM gpu_workloads_hourly") == [
        ("GPU-abc", "ray-llm", "ray-1111111", "ray-worker")
    ]


def test_only_the_pods_with_an_idle_held_hour_are_read_and_those_whole(warehouse):
    """workload_hours(pods_holding_idle=…) drops the pods that can never be a finding (no hour present,
    holding memory, on an idle GPU), keeps every hour of the others (their totals and runs) and a pod
    without a namespace, and the findings are the same as from every pod-hour."""
    from gpufinops.models import allocated_idle, idle
    from gpufinops.warehouse import allocation_queries

    pods = {  # pod: (namespace, GPU util per hour, memory MiB)
        "busy": ("serve", [60.0] * 6, 40000.0),
        "idle-half": ("serve", [60.0, 60.0, 1.0, 1.0, 1.0, 60.0], 40000.0),
        "no-ns": (None, [1.0] * 6, 40000.0),
        "empty-handed": ("serve", [1.0] * 6, 10.0),  # on an idle GPU but holding nothing
    }
    with db.writer(warehouse) as con:
        for i, (pod, (namespace, utils, mem)) in enumerate(pods.items()):
            for h, util in enumerate(utils):
                hour = START + timedelta(hours=h)
                con.execute(
                    "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, resource_id, util_max, samples, source) "
                    "VALUES (?, ?, 'i-node', ?, 60, 'dcgm')",
                    [hour, f"GPU-{i}", util],
                )
                con.execute(
                    "INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, host, namespace, pod, container, samples, "
                    "occupied_samples, util_mean, mem_used_max_mib, source) "
                    "VALUES (?, ?, 'node', ?, ?, 'main', 60, 60, ?, ?, 'dcgm')",
                    [hour, f"GPU-{i}", namespace, pod, util, mem],
                )
        p = idle.IdleParams()
        kept = allocation_queries.workload_hours(con, pods_holding_idle=idle.held_idle(p))
        every = allocation_queries.workload_hours(con)
    assert every.height == 24 and kept.height == 12
    assert sorted(set(kept["pod"])) == ["idle-half", "no-ns"]
    assert kept.to_dicts() == every.filter(every["pod"].is_in(["idle-half", "no-ns"])).to_dicts()
    found, withheld = allocated_idle.analyse(kept, p)
    assert (found, withheld) == allocated_idle.analyse(every, p)
    assert not found and sorted(w.resource_id for w in withheld) == ["i-node", "i-node"]  # no bill: unpriced
    assert all(w.reason == "unpriced" for w in withheld), [w.reason for w in withheld]
