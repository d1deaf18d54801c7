"""The inference servers' counters and how their samples become hourly increases (``serving_metrics_hourly``).

Shared by ``prometheus_serving`` (a Prometheus server's raw samples) and ``serving_exporter`` (scrapes of
a server's own ``/metrics``). The counters read, by the names and types the servers export them under:

* vLLM: ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``, ``vllm:request_success_total``
  (counters, label ``model_name``; every ``finished_reason`` counts), ``vllm:request_prefill_time_seconds``
  and ``vllm:request_decode_time_seconds`` (histograms: their ``_sum``);
* Hugging Face TGI: ``tgi_request_input_length`` and ``tgi_request_generated_tokens`` (histograms of tokens
  per request: their ``_sum``), ``tgi_request_count`` (counter), ``tgi_batch_forward_duration`` (histogram
  with ``method`` = prefill | decode: its ``_sum``); TGI labels no model: the source's ``model`` option;
* NVIDIA Triton with the TensorRT-LLM backend: ``nv_llm_input_token_len`` / ``nv_llm_output_token_len``
  (the backend's token histograms: their ``_sum``), ``nv_inference_request_success`` (counter), label
  ``model``. ``nv_inference_count`` counts batch items, not requests, and the ``nv_trt_llm_*`` families are
  gauges of the current iteration: neither is a counter of tokens or requests, so neither is read;
* SGLang: ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, ``sglang:num_requests_total``
  (counters, label ``model_name``).

A series is one full label set of one sample name. Its increase between two samples is the difference,
or, when the counter fell (the server restarted and counts from zero again), the new value: so a restart
never yields a negative increase, and each pair of samples is counted once, in the hour of the later
sample, so no increase is counted twice. The first sample of a series (nothing before it in the window,
whose start re-reads one hour before the first hour replaced) only sets its baseline. A sample that is
not a finite, non-negative number (``NaN``, ``±Inf``, ``-3``) is refused, naming the series and time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

from gpufinops.ingest.core.registry import ConfigProblem

HOUR_S = 3600
FIGURES = ("input_tokens", "output_tokens", "requests", "prefill_seconds", "decode_seconds")


@dataclass(frozen=True)
class Counter:
    server: str
    figure: str
    method: str | None = None  # only samples whose ``method`` label is this (TGI's prefill / decode)


# sample name -> what it counts. TGI's and Triton's counters carry no ``_total`` (so Prometheus stores them
# without it) and ``prometheus_client``'s parser adds one: both spellings are read.
COUNTERS: dict[str, tuple[Counter, ...]] = {
    "vllm:prompt_tokens_total": (Counter("vllm", "input_tokens"),),
    "vllm:generation_tokens_total": (Counter("vllm", "output_tokens"),),
    "vllm:request_success_total": (Counter("vllm", "requests"),),
    "vllm:request_prefill_time_seconds_sum": (Counter("vllm", "prefill_seconds"),),
    "vllm:request_decode_time_seconds_sum": (Counter("vllm", "decode_seconds"),),
    "tgi_request_input_length_sum": (Counter("tgi", "input_tokens"),),
    "tgi_request_generated_tokens_sum": (Counter("tgi", "output_tokens"),),
    "tgi_request_count": (Counter("tgi", "requests"),),
    "tgi_request_count_total": (Counter("tgi", "requests"),),
    "tgi_batch_forward_duration_sum": (
        Counter("tgi", "prefill_seconds", "prefill"),
        Counter("tgi", "decode_seconds", "decode"),
    ),
    "nv_llm_input_token_len_sum": (Counter("triton", "input_tokens"),),
    "nv_llm_output_token_len_sum": (Counter("triton", "output_tokens"),),
    "nv_inference_request_success": (Counter("triton", "requests"),),
    "nv_inference_request_success_total": (Counter("triton", "requests"),),
    "sglang:prompt_tokens_total": (Counter("sglang", "input_tokens"),),
    "sglang:generation_tokens_total": (Counter("sglang", "output_tokens"),),
    "sglang:num_requests_total": (Counter("sglang", "requests"),),
}
SAMPLE_NAMES = tuple(COUNTERS)

# One row's identity: (hour, server, model, namespace, pod, host).
ROW_SCHEMA = pa.schema(
    [
        ("hour", pa.timestamp("us", tz="UTC")),
        ("server", pa.string()),
        ("model", pa.string()),
        ("namespace", pa.string()),
        ("pod", pa.string()),
        ("host", pa.string()),
    ]
    + [(f, pa.float64()) for f in FIGURES]
    + [("counter_resets", pa.int32()), ("samples", pa.int32())]
)


class CounterError(ValueError):
    """A sample that no counter can hold (the message names the series, time and value)."""


def counters_of(name: str, labels: Mapping[str, str]) -> list[Counter]:
    """What a sample named ``name`` with ``labels`` counts (empty: not a serving counter)."""
    return [c for c in COUNTERS.get(name, ()) if c.method is None or labels.get("method") == c.method]


def row_key(
    counter: Counter, labels: Mapping[str, str], default_model: str | None, default_host: str | None = None
) -> tuple[str, str | None, str | None, str | None, str | None]:
    """(server, model, namespace, pod, host) of a series: ``exported_*`` labels (the served pod's, when
    Prometheus scraped through another target without ``honor_labels``) before the plain ones."""
    model = labels.get("model_name") or labels.get("model") or default_model
    namespace = labels.get("exported_namespace") or labels.get("namespace") or None
    pod = labels.get("exported_pod") or labels.get("pod") or None
    host = labels.get("Hostname") or labels.get("instance", "").rsplit(":", 1)[0] or default_host
    return counter.server, model, namespace, pod, host


def model_of(labels: Mapping[str, str], default_model: str | None, source: str, where: str, series: str) -> str:
    """The model a series counts for: its ``model_name``/``model`` label, else the source's ``model`` option;
    neither is a ConfigProblem naming the option (a TGI server labels no model: tokens of no model
    cannot be priced per model, and NULL would merge every such server's tokens into one row)."""
    model = labels.get("model_name") or labels.get("model") or default_model
    if not model:
        raise ConfigProblem(
            f"sources.{source}.model: {where}: series {series} carries no model label (TGI labels none); "
            "set the source's model option to the model this server serves"
        )
    return model


def checked(value: object, series: str, when: float) -> float:
    """``value`` as a counter sample, or CounterError naming the series, time and value."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        stamp = datetime.fromtimestamp(when, UTC).isoformat() if math.isfinite(when) else str(when)
        raise CounterError(f"counter {series} has {value!r} at {stamp}, which is not a finite, non-negative count")
    return number


@dataclass
class HourFigures:
    figures: dict[str, float]
    resets: int = 0
    samples: int = 0


def increases(
    samples: Iterable[tuple[float, float]], baseline: tuple[float, float] | None = None
) -> tuple[dict[int, tuple[float, int, int]], tuple[float, float] | None]:
    """Per hour (epoch hour number): (increase, resets, samples) of one counter series from its
    ``(time_s, value)`` samples (any order; a time seen twice counts once), after ``baseline`` (the
    last sample before them). Returns the hours and the last sample (the next run's baseline)."""
    out: dict[int, tuple[float, int, int]] = {}
    previous = baseline
    for when, value in sorted(dict(samples).items()):
        if previous is not None and when <= previous[0]:
            continue  # at or before the baseline: already counted
        hour = int(when // HOUR_S)
        total, resets, count = out.get(hour, (0.0, 0, 0))
        if previous is not None:
            if value >= previous[1]:
                total += value - previous[1]
            else:  # the counter restarted from zero: everything it holds now is new
                total += value
                resets += 1
        out[hour] = (total, resets, count + 1)
        previous = (when, value)
    return out, previous


def add(
    rows: dict[tuple, HourFigures],
    key: tuple,
    figure: str,
    hours: dict[int, tuple[float, int, int]],
    first_hour: int | None = None,
) -> None:
    """Adds one series' hourly increases to ``rows`` (keyed ``(hour, *key)``), hours before ``first_hour`` left out."""
    for hour, (total, resets, count) in hours.items():
        if first_hour is not None and hour < first_hour:
            continue
        row = rows.setdefault((hour, *key), HourFigures({}))
        row.figures[figure] = row.figures.get(figure, 0.0) + total
        row.resets += resets
        row.samples += count


def table(rows: Mapping[tuple, HourFigures]) -> pa.Table:
    """``rows`` as an Arrow table in ROW_SCHEMA (figures a server does not export stay NULL)."""
    data: dict[str, list] = {name: [] for name in ROW_SCHEMA.names}
    for (hour, server, model, namespace, pod, host), row in sorted(rows.items(), key=lambda kv: str(kv[0])):
        for column, value in zip(
            ("hour", "server", "model", "namespace", "pod", "host"),
            (datetime.fromtimestamp(hour * HOUR_S, UTC), server, model, namespace, pod, host),
        ):
            data[column].append(value)
        for figure in FIGURES:
            value = row.figures.get(figure)
            data[figure].append(round(value, 6) if value is not None else None)
        data["counter_resets"].append(row.resets)
        data["samples"].append(row.samples)
    return pa.table(data, schema=ROW_SCHEMA)
