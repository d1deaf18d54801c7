"""Counters that cannot be double-counted: one series twice in an exposition, one pod through two targets,
a server that labels no model, and nvidia-smi lines whose field count is not the header's.

Expositions are served by a real HTTP server on 127.0.0.1 (tests.prometheus_fixture.ExporterServer) in
the vLLM format the recorded body in tests/data/serving-metrics shows; nvidia-smi logs are cut from the
recorded capture in tests/data/nvidia-smi. Every failed run is checked to leave the warehouse unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.nvidia_smi_csv import NvidiaSmiCsv
from gpufinops.ingest.metrics.serving_exporter import ServingExporter
from gpufinops.interfaces import cli
from gpufinops.warehouse import db
from tests.prometheus_fixture import ExporterServer
from tests.test_serving_ingest import MS, rows, tgi, totals

SMI = Path(__file__).parent / "data" / "nvidia-smi"
H100_LOAD = SMI / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load__query-gpu.csv"


def serving() -> Registry:
    r = Registry()
    r.register(ServingExporter)
    return r


def vllm(prompt: float, ms: int, pod: str | None = None, replica: str | None = None) -> str:
    """A vLLM exposition of the prompt-token counter (the labels vLLM writes, ``pod`` when a proxy adds it)."""
    labels = 'model_name="llama-3.1-8b"' + (f',pod="{pod}"' if pod else "")
    line = f"vllm:prompt_tokens_total{{{labels}}} {prompt} {ms}\n"
    head = (
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n# TYPE vllm:prompt_tokens_total counter\n"
    )
    return head + line if replica is None else head + line + replica


@pytest.fixture
def exporter():
    with ExporterServer() as server:
        yield server


def test_one_series_twice_in_an_exposition_is_refused_naming_it(warehouse, exporter):
    """Two replicas behind one Service target: the issue stored 4,910 tokens where each grew by 10."""
    options = {"targets": [exporter.url("/svc")], "retries": 0, "timeout_s": 5}
    exporter.bodies["/svc"] = vllm(100, MS)
    assert run_source(serving(), warehouse, "serving", "serving_exporter", options).ok
    exporter.bodies["/svc"] = vllm(110, MS + 60_000)
    assert run_source(serving(), warehouse, "serving", "serving_exporter", options).ok
    before = rows(warehouse)
    assert totals(before)["input_tokens"] == 10.0
    # both replicas answer in one body, in either order: replica A at 120, replica B at 5,000
    for first, second in ((120, 5000), (5000, 120)):
        extra = f'vllm:prompt_tokens_total{{model_name="llama-3.1-8b"}} {second} {MS + 120_000}\n'
        exporter.bodies["/svc"] = vllm(first, MS + 120_000, replica=extra)
        failed = run_source(serving(), warehouse, "serving", "serving_exporter", options)
        assert failed.status == "failed"
        assert (
            "appears twice in one exposition at one time" in failed.error and "vllm:prompt_tokens_total" in failed.error
        )
        assert exporter.url("/svc") in failed.error
        assert rows(warehouse) == before


def test_one_pod_through_two_targets_is_refused_naming_both(warehouse, exporter):
    """The pod IP and its Service both scraped: the issue summed 14,000 tokens for a pod that served 7,000."""
    pod_ip, service = exporter.url("/pod-ip"), exporter.url("/service")
    options = {
        "targets": [pod_ip, service],
        "retries": 0,
        "timeout_s": 5,
        "target_pods": {pod_ip: "llm/vllm-0", service: "llm/vllm-0"},
    }
    for path in ("/pod-ip", "/service"):
        exporter.bodies[path] = vllm(0, MS)
    failed = run_source(serving(), warehouse, "serving", "serving_exporter", options)
    assert failed.status == "failed" and pod_ip in failed.error and service in failed.error
    assert "two targets" in failed.error and rows(warehouse) == []
    # the pod's counters through one target: 7,000 tokens counted once
    once = {**options, "targets": [pod_ip], "target_pods": {pod_ip: "llm/vllm-0"}}
    assert run_source(serving(), warehouse, "serving", "serving_exporter", once).ok
    exporter.bodies["/pod-ip"] = vllm(7000, MS + 60_000)
    assert run_source(serving(), warehouse, "serving", "serving_exporter", once).ok
    assert totals(rows(warehouse))["input_tokens"] == 7000.0


def test_two_servers_without_pod_names_are_two_servers_and_are_summed(warehouse, exporter):
    options = {"targets": [exporter.url("/a"), exporter.url("/b")], "retries": 0, "timeout_s": 5}
    exporter.bodies = {"/a": vllm(0, MS), "/b": vllm(0, MS)}
    assert run_source(serving(), warehouse, "serving", "serving_exporter", options).ok
    exporter.bodies = {"/a": vllm(300, MS + 60_000), "/b": vllm(400, MS + 60_000)}
    assert run_source(serving(), warehouse, "serving", "serving_exporter", options).ok
    assert totals(rows(warehouse))["input_tokens"] == 700.0


def test_tgi_without_the_model_option_is_a_config_error_naming_it(tmp_path, warehouse):
    path = tmp_path / "tgi.prom"
    path.write_text(tgi(10, 10, 1, MS))
    failed = run_source(serving(), warehouse, "serving", "serving_exporter", {"targets": [str(path)]})
    assert failed.status == "failed" and failed.config_error
    assert failed.error.startswith("sources.serving.model:") and "tgi_request" in failed.error
    assert rows(warehouse) == []
    with db.reader(warehouse) as con:
        assert con.execute("SELECT count(*) FROM ingest_state WHERE source = 'serving'").fetchall()[0][0] == 0


def test_the_cli_exits_2_for_a_tgi_source_without_model(tmp_path, capsys):
    path = tmp_path / "tgi.prom"
    path.write_text(tgi(10, 10, 1, MS))
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"\n\n'
        f'[sources.tgi]\ntype = "serving_exporter"\ntargets = ["{path}"]\n'
    )
    assert cli.main(["--config", str(config), "ingest"]) == 2
    err = capsys.readouterr().err
    assert "sources.tgi.model" in err and "\n" not in err.strip()


def _smi_log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "node1.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("damage", ["extra", "short"])
def test_an_nvidia_smi_line_with_more_or_fewer_fields_is_refused_naming_the_line(tmp_path, warehouse, damage):
    header, sample = [ln for ln in H100_LOAD.read_text().splitlines() if ln.strip()][:2]
    data = [sample.replace("08:12:53.353", f"08:12:5{s}.353") for s in range(4)]  # four seconds of samples
    width = len(header.split(","))
    good = data[:3]
    bad = data[1] + ", 1, 2, 3" if damage == "extra" else ", ".join(data[1].split(", ")[: width - 5])
    path = _smi_log(tmp_path, [header, good[0], bad, *good[1:]])
    registry = Registry()
    registry.register(NvidiaSmiCsv)
    failed = run_source(registry, warehouse, "smi", "nvidia_smi_csv", {"path": str(path)})
    assert failed.status == "failed", "a misaligned line was loaded"
    fields = width + 3 if damage == "extra" else width - 5
    assert f"line 3 has {fields} fields where the header has {width}" in failed.error
    assert str(path) in failed.error
    with db.reader(warehouse) as con:
        assert con.execute("SELECT count(*) FROM gpu_metrics_hourly").fetchall()[0][0] == 0
    # the same log with its last line partly written (nvidia-smi still writing it) loads
    _smi_log(tmp_path, [header, *good, data[3][:40]])
    assert run_source(registry, warehouse, "smi", "nvidia_smi_csv", {"path": str(path)}).ok
