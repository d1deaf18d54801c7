"""Serving metrics: the inference servers' counters into ``serving_metrics_hourly``, resets and hostile values.

The vLLM and SGLang bodies are recorded ``/metrics`` text (tests/data/serving-metrics/README.md); TGI and
Triton (TensorRT-LLM backend) expositions are generated here in the exact format those projects document
(names, types and labels as in the README there), since no recorded body could be copied. Each expected
figure is worked out by hand from the counters written in the test, never read back from the code.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from gpufinops.ingest.core.registry import Registry, default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics import serving_counters as sc
from gpufinops.ingest.metrics.serving_exporter import ServingExporter
from gpufinops.ingest.metrics.serving_prometheus import PrometheusServing
from gpufinops.warehouse import db
from tests.conftest import DATA
from tests.prometheus_fixture import ExporterServer, PrometheusServer, requires_prometheus

SAMPLES = DATA / "serving-metrics"
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
MS = int(T0.timestamp() * 1000)


def registry() -> Registry:
    r = Registry()
    r.register(ServingExporter)
    return r


def rows(warehouse, source: str = "serving") -> list[dict]:
    with db.reader(warehouse) as con:
        return (
            con.sql(
                "SELECT * FROM serving_metrics_hourly WHERE source = ? ORDER BY hour, server, model, pod",
                params=[source],
            )
            .to_arrow_table()
            .to_pylist()
        )


def totals(found: list[dict], server: str | None = None) -> dict[str, float]:
    keep = [r for r in found if server is None or r["server"] == server]
    return {f: sum(r[f] or 0 for r in keep) for f in ("input_tokens", "output_tokens", "requests")}


def tgi(input_sum: float, output_sum: float, count: float, ts_ms: int) -> str:
    """A TGI exposition: histograms of tokens per request and the request counter (no _total, no model)."""
    return (
        "# HELP tgi_request_input_length Input token length per request\n"
        "# TYPE tgi_request_input_length histogram\n"
        f'tgi_request_input_length_bucket{{le="+Inf"}} {count} {ts_ms}\n'
        f"tgi_request_input_length_sum {input_sum} {ts_ms}\n"
        f"tgi_request_input_length_count {count} {ts_ms}\n"
        "# TYPE tgi_request_generated_tokens histogram\n"
        f'tgi_request_generated_tokens_bucket{{le="+Inf"}} {count} {ts_ms}\n'
        f"tgi_request_generated_tokens_sum {output_sum} {ts_ms}\n"
        f"tgi_request_generated_tokens_count {count} {ts_ms}\n"
        "# TYPE tgi_request_count counter\n"
        f"tgi_request_count {count} {ts_ms}\n"
    )


def triton(input_sum: float, output_sum: float, success: float, ts_ms: int) -> str:
    """A Triton exposition with the TensorRT-LLM backend's token histograms and the success counter."""
    common = 'model="tensorrt_llm",version="1"'
    return (
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n"
        "# TYPE nv_inference_request_success counter\n"
        f"nv_inference_request_success{{{common}}} {success} {ts_ms}\n"
        "# HELP nv_inference_count Number of inferences performed (does not include cached requests)\n"
        "# TYPE nv_inference_count counter\n"
        f"nv_inference_count{{{common}}} {success * 8} {ts_ms}\n"
        "# TYPE nv_llm_input_token_len histogram\n"
        f'nv_llm_input_token_len_bucket{{{common},response_metric_type="total_input_tokens",le="+Inf"}} {success} {ts_ms}\n'
        f'nv_llm_input_token_len_sum{{{common},response_metric_type="total_input_tokens"}} {input_sum} {ts_ms}\n'
        f'nv_llm_input_token_len_count{{{common},response_metric_type="total_input_tokens"}} {success} {ts_ms}\n'
        "# TYPE nv_llm_output_token_len histogram\n"
        f'nv_llm_output_token_len_bucket{{{common},response_metric_type="total_output_tokens",le="+Inf"}} {success} {ts_ms}\n'
        f'nv_llm_output_token_len_sum{{{common},response_metric_type="total_output_tokens"}} {output_sum} {ts_ms}\n'
        f'nv_llm_output_token_len_count{{{common},response_metric_type="total_output_tokens"}} {success} {ts_ms}\n'
    )


def test_increases_handle_a_reset_and_never_count_a_pair_twice():
    samples = [(0.0, 100.0), (60.0, 160.0), (120.0, 10.0), (3660.0, 40.0), (60.0, 160.0)]  # 60 s twice
    hours, last = sc.increases(samples)
    assert hours == {0: (60.0 + 10.0, 1, 3), 1: (30.0, 0, 1)}  # 100→160, restart → 10, then 10→40
    assert last == (3660.0, 40.0)
    again, _ = sc.increases(samples, baseline=last)  # the same samples after their own last: nothing new
    assert again == {}
    later, _ = sc.increases([(3700.0, 5.0)], baseline=last)  # restarted again: its 5 tokens are new
    assert later == {1: (5.0, 1, 1)}


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-3", "abc", None])
def test_a_counter_sample_that_is_not_a_count_is_refused_naming_the_series(value):
    with pytest.raises(sc.CounterError, match=r"vllm:prompt_tokens_total\{pod=\"p\"\}.*2026-11-02T10:00"):
        sc.checked(value, 'vllm:prompt_tokens_total{pod="p"}', T0.timestamp())
    assert sc.checked("8.128902e+06", "x", 0.0) == 8_128_902.0


def test_every_counter_is_a_serving_counter_the_registry_loads():
    names = default_registry().names()
    assert {"prometheus_serving", "serving_exporter"} <= set(names)
    assert {c.server for cs in sc.COUNTERS.values() for c in cs} == {"vllm", "tgi", "triton", "sglang"}
    assert "nv_inference_count" not in sc.COUNTERS  # batch items, not requests


@pytest.fixture
def exporter():
    with ExporterServer() as server:
        yield server


def test_recorded_vllm_and_sglang_bodies_then_growth_and_a_restart(warehouse, exporter):
    vllm = (SAMPLES / "vllm-aibrix-docs.prom").read_text()
    sglang = (SAMPLES / "sglang-docs.prom").read_text()
    exporter.bodies = {"/vllm": vllm, "/sglang": sglang}
    options = {
        "targets": [exporter.url("/vllm"), exporter.url("/sglang")],
        "retries": 1,
        "timeout_s": 5,
        "target_pods": {exporter.url("/vllm"): "llm/vllm-0", exporter.url("/sglang"): "llm/sglang-0"},
    }
    first = run_source(registry(), warehouse, "serving", "serving_exporter", options)
    assert first.status == "succeeded" and first.rows == 0, first.error  # the first scrape sets baselines only
    assert rows(warehouse) == []
    exporter.bodies["/vllm"] = (
        vllm.replace("} 148.0", "} 1148.0")
        .replace("} 955.0", "} 3955.0")
        .replace(
            'finished_reason="stop",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 4.0',
            'finished_reason="stop",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 14.0',
        )
    )
    exporter.bodies["/sglang"] = sglang.replace("8.128902e+06", "8.228902e+06")
    second = run_source(registry(), warehouse, "serving", "serving_exporter", options)
    assert second.status == "succeeded", second.error
    found = rows(warehouse)
    assert totals(found, "vllm") == {"input_tokens": 1000.0, "output_tokens": 3000.0, "requests": 10.0}
    assert totals(found, "sglang") == {"input_tokens": 100_000.0, "output_tokens": 0.0, "requests": 0.0}
    assert {(r["namespace"], r["pod"], r["model"]) for r in found} == {
        ("llm", "vllm-0", "Qwen/Qwen2.5-Coder-1.5B-Instruct"),
        ("llm", "sglang-0", "meta-llama/Llama-3.1-8B-Instruct"),
    }
    third = run_source(registry(), warehouse, "serving", "serving_exporter", options)  # nothing grew
    assert third.status in ("succeeded", "skipped") and totals(rows(warehouse), "vllm")["input_tokens"] == 1000.0
    exporter.bodies["/vllm"] = vllm.replace("} 148.0", "} 20.0")  # the pod restarted: 20 new prompt tokens
    fourth = run_source(registry(), warehouse, "serving", "serving_exporter", options)
    assert fourth.status == "succeeded", fourth.error
    after = rows(warehouse)
    assert totals(after, "vllm")["input_tokens"] == 1020.0
    assert sum(r["counter_resets"] for r in after if r["server"] == "vllm") >= 1
    assert all(
        r[f] is None or (r[f] >= 0 and math.isfinite(r[f]))
        for r in after
        for f in ("input_tokens", "output_tokens", "requests")
    )


def test_doctor_checks_a_serving_exporter_target(exporter, tmp_path):
    from gpufinops.ingest.metrics import doctor as doctor_serving
    from gpufinops.jobs.config import parse_source

    exporter.bodies["/vllm"] = (SAMPLES / "vllm-aibrix-docs.prom").read_text()
    exporter.bodies["/other"] = "node_load1 0.5\n"
    for targets, status in (
        ([exporter.url("/vllm")], "ok"),
        ([exporter.url("/other")], "warn"),
        ([str(tmp_path / "none-*.prom")], "FAIL"),
    ):
        source = parse_source("serving", {"type": "serving_exporter", "targets": targets})
        assert doctor_serving.serving_exporter(source, tmp_path, 5)[0] == status, targets


def test_tgi_and_triton_counters_across_hours_with_a_reset(tmp_path, warehouse):
    tgi_file, triton_file = tmp_path / "tgi.prom", tmp_path / "triton.prom"
    options = {
        "targets": [str(tgi_file), str(triton_file)],
        "model": "mistral-7b",
        "target_pods": {tgi_file.as_uri(): "chat/tgi-0", triton_file.as_uri(): "chat/triton-0"},
    }
    scrapes = [  # (minutes after T0, TGI input, output, requests, Triton input, output, successes)
        (0, 1000, 500, 10, 2000, 800, 20),
        (30, 4000, 2500, 40, 5000, 1800, 50),
        (70, 300, 100, 3, 9000, 2800, 90),  # TGI restarted between 10:30 and 11:10
    ]
    for minutes, ti, to, tc, ri, ro, rs in scrapes:
        ms = MS + minutes * 60_000
        tgi_file.write_text(tgi(ti, to, tc, ms))
        triton_file.write_text(triton(ri, ro, rs, ms))
        result = run_source(registry(), warehouse, "serving", "serving_exporter", options)
        assert result.ok, result.error
    found = {(r["server"], r["hour"]): r for r in rows(warehouse)}
    t10, t11 = T0, T0 + timedelta(hours=1)
    assert (found["tgi", t10]["input_tokens"], found["tgi", t10]["requests"]) == (3000.0, 30.0)
    assert (found["tgi", t11]["input_tokens"], found["tgi", t11]["counter_resets"]) == (300.0, 3)
    assert found["tgi", t11]["model"] == "mistral-7b"  # TGI labels no model: the option names it
    assert (found["triton", t10]["input_tokens"], found["triton", t11]["input_tokens"]) == (3000.0, 4000.0)
    assert (found["triton", t10]["requests"], found["triton", t11]["requests"]) == (30.0, 40.0)
    assert found["triton", t10]["model"] == "tensorrt_llm" and found["triton", t10]["pod"] == "triton-0"
    again = run_source(registry(), warehouse, "serving", "serving_exporter", options)  # the same recorded body
    assert again.ok and {k: v["input_tokens"] for k, v in found.items()} == {
        (r["server"], r["hour"]): r["input_tokens"] for r in rows(warehouse)
    }


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-Inf", "-12"])
def test_a_hostile_counter_fails_the_run_and_changes_nothing_or_is_quarantined(tmp_path, warehouse, bad):
    path = tmp_path / "tgi.prom"
    options = {"targets": [str(path)], "model": "m"}
    path.write_text(tgi(10, 10, 1, MS))
    assert run_source(registry(), warehouse, "serving", "serving_exporter", options).ok
    path.write_text(tgi(20, 20, 2, MS + 60_000))
    assert run_source(registry(), warehouse, "serving", "serving_exporter", options).ok
    before = rows(warehouse)
    path.write_text(tgi(bad, 30, 3, MS + 120_000))
    failed = run_source(registry(), warehouse, "serving", "serving_exporter", options)
    assert failed.status == "failed" and "tgi_request_input_length_sum" in (failed.error or "")
    assert rows(warehouse) == before
    skipped = run_source(registry(), warehouse, "serving", "serving_exporter", {**options, "on_invalid": "skip_rows"})
    assert skipped.ok and skipped.rejected == 1, skipped.error
    assert totals(rows(warehouse))["input_tokens"] == 10.0  # the bad series added nothing
    with db.reader(warehouse) as con:
        reasons = [r[0] for r in con.execute("SELECT reason FROM ingest_rejects WHERE source = 'serving'").fetchall()]
    assert len(reasons) == 1 and "not a finite, non-negative count" in reasons[0]


def _openmetrics() -> str:
    """Three hours of minute samples (as a Prometheus server stores them) from T0: vLLM's prompt counter grows
    100 a minute and restarts at minute 90 (from 50), generation 10 a minute; one bad series holds a NaN."""
    labels = 'model_name="llama-3.1-8b",namespace="llm",pod="vllm-0",instance="10.0.0.5:8000"'
    lines = ["# TYPE vllm:prompt_tokens counter", "# TYPE vllm:generation_tokens counter"]
    prompt, generation = [], []
    for minute in range(180):
        stamp = T0.timestamp() + minute * 60
        value = 100 * minute if minute < 90 else 50 + 100 * (minute - 90)
        prompt.append(f"vllm:prompt_tokens_total{{{labels}}} {float(value)} {stamp:.3f}")
        generation.append(f"vllm:generation_tokens_total{{{labels}}} {10.0 * minute} {stamp:.3f}")
    bad = [
        f'vllm:prompt_tokens_total{{model_name="x",pod="bad"}} {v} {T0.timestamp() + i * 60:.3f}'
        for i, v in enumerate(("1.0", "NaN", "3.0"))
    ]
    return "\n".join(lines[:1] + prompt + bad + lines[1:] + generation) + "\n"


@requires_prometheus
def test_prometheus_raw_samples_give_exact_hourly_increases_across_a_restart(tmp_path, warehouse):
    reg = Registry()
    reg.register(PrometheusServing)
    prom = PrometheusServer(tmp_path / "prom", _openmetrics(), [])
    try:
        prom.wait_ready()
        good = {"url": prom.url, "selector": 'pod!="bad"', "retries": 1}
        first = run_source(reg, warehouse, "prom", "prometheus_serving", good, since=T0, until=T0 + timedelta(hours=3))
        assert first.status == "succeeded", first.error
        by_hour = {r["hour"]: r for r in rows(warehouse, "prom")}
        hours = [T0 + timedelta(hours=h) for h in range(3)]
        # hour 0: 59 minute pairs of 100; hour 1: 30 × 100, the restart's 50, 29 × 100; hour 2: 60 × 100
        assert [by_hour[h]["input_tokens"] for h in hours] == [5900.0, 5950.0, 6000.0]
        assert [by_hour[h]["output_tokens"] for h in hours] == [590.0, 600.0, 600.0]
        assert [by_hour[h]["counter_resets"] for h in hours] == [0, 1, 0]
        assert {(r["namespace"], r["pod"], r["host"], r["server"]) for r in by_hour.values()} == {
            ("llm", "vllm-0", "10.0.0.5", "vllm")
        }
        again = run_source(reg, warehouse, "prom", "prometheus_serving", good, since=hours[1], until=hours[2])
        # hour 1 re-read with its baseline from hour 0 gives the same row (so the run is skipped): not doubled
        assert again.status == "skipped", again.error
        assert {r["hour"]: r["input_tokens"] for r in rows(warehouse, "prom")} == dict(
            zip(hours, (5900.0, 5950.0, 6000.0))
        )
        bad = run_source(
            reg,
            warehouse,
            "prom",
            "prometheus_serving",
            {**good, "selector": 'pod="bad"'},
            since=T0,
            until=T0 + timedelta(hours=1),
        )
        assert bad.status == "failed" and 'vllm:prompt_tokens_total{model_name="x",pod="bad"}' in (bad.error or "")
        assert "NaN" in (bad.error or "")
        from gpufinops.ingest.metrics import doctor as doctor_serving
        from gpufinops.jobs.config import parse_source

        # the demo's history is years old: Prometheus holds no serving series "in the last day"
        status, what, _ = doctor_serving.prometheus_serving(
            parse_source("prom", {"type": "prometheus_serving", **good}), tmp_path, 5
        )
        assert status == "warn" and "no serving counter series" in what
    finally:
        prom.stop()


def test_a_model_label_with_a_line_break_fails_the_run_naming_the_column(tmp_path, warehouse):
    path = tmp_path / "vllm.prom"
    options = {"targets": [str(path)]}
    for minute, value in ((0, 10), (1, 20)):
        path.write_text(f'vllm:prompt_tokens_total{{model_name="evil\\nSubject: x"}} {value} {MS + minute * 60_000}\n')
        result = run_source(registry(), warehouse, "serving", "serving_exporter", options)
    assert result.status == "failed" and "column model value" in (result.error or "")
    assert "\n" not in (result.error or "") and rows(warehouse) == []
