"""``prometheus_serving``: inference servers' token and request counters from a Prometheus server's HTTP API.

The counters (vLLM, Hugging Face TGI, Triton with the TensorRT-LLM backend, SGLang: the catalogue in
:mod:`ingest.metrics.serving_counters`) come home as their raw samples: one instant query of a range
selector per chunk of hours (``{__name__=~"…"}[<chunk>]``), so the hourly increases, counter resets
included, are computed here exactly (``increase()`` extrapolates to the window's edges, which neither sums
to the counter's growth nor stays whole). Each run re-reads one hour before its first hour so the first
sample of every hour has a predecessor; every hour of the window is a slice replaced whole.

Incremental by time like ``prometheus``: ``[cursor − lookback_hours, last complete hour)``, the first run
``backfill_days`` back, ``--since``/``--until`` override both. Rows are per hour, server, model, namespace,
pod and host; the GPU resources and cost they are charged with are found when unit costs are read
(``derived.unit_costs``), so the answer does not depend on whether metrics or the bill came first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from gpufinops.ingest.core import registry, validate
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, TransportOptions, option
from gpufinops.ingest.core.validate_metrics import rejects_table
from gpufinops.ingest.metrics import doctor, hourly_source, metrics_store
from gpufinops.ingest.metrics import serving_counters as sc
from gpufinops.ingest.metrics.prometheus_api import PrometheusClient
from gpufinops.ingest.metrics.scrape import display_url
from gpufinops.kernel import ranges
from gpufinops.warehouse.metrics_schema import SERVING_METRICS_HOURLY

log = logging.getLogger(__name__)

CHUNK_HOURS = 24
SERVING_KEY = ("source", "hour", "server", "model", "namespace", "pod", "host")


@dataclass(frozen=True, kw_only=True)
class ServingOptions(OnInvalidOptions, TransportOptions):
    """The options every serving-metrics source shares."""

    model: str | None = option(None, "the model name of series that carry none (TGI labels no model)")
    timeout_s: float = option(
        10.0, "seconds one HTTP request may take in all (connect, headers, body)", range=ranges.POSITIVE
    )
    retries: int = option(3, "retries of a failed request", range=ranges.NON_NEGATIVE)


@dataclass(frozen=True, kw_only=True)
class PrometheusServingOptions(hourly_source.PrometheusQueryOptions, ServingOptions):
    """A Prometheus server's serving counters: the serving options and the query's."""


def series_name(name: str, labels: dict[str, str]) -> str:
    """A series as messages show it: ``name{a="x",b="y"}``."""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


def fetch_samples(
    client: PrometheusClient, start: datetime, end: datetime, selector: str | None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, Any]]:
    """Raw samples in [start − 1 h, end) of every serving counter: series (name, labels) → {time: value}."""
    names = "|".join(sc.SAMPLE_NAMES)
    matchers = f'{{__name__=~"{names}"' + (f",{selector}" if selector else "") + "}"
    series: dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, Any]] = {}
    first = int(start.timestamp()) - sc.HOUR_S
    last = int(end.timestamp())
    for chunk in range(first, last, CHUNK_HOURS * sc.HOUR_S):
        chunk_end = min(chunk + CHUNK_HOURS * sc.HOUR_S, last)
        query = f"{matchers}[{(chunk_end - chunk) * 1000}ms]"
        data = client.get("/api/v1/query", {"query": query, "time": f"{chunk_end - 0.001:.3f}"})
        for item in data.get("result", []):
            labels = dict(item.get("metric", {}))
            name = labels.pop("__name__", "")
            values = series.setdefault((name, tuple(sorted(labels.items()))), {})
            for stamp, value in item.get("values", []):
                if chunk <= float(stamp) < chunk_end:
                    values[float(stamp)] = value
    return series


def hourly_rows(
    series: dict[tuple[str, tuple[tuple[str, str], ...]], dict[float, Any]],
    first_hour: int,
    default_model: str | None,
    where: str,
    rejects: list[dict] | None,
    source: str = "",
) -> pa.Table:
    """The hourly rows (serving_counters.ROW_SCHEMA) of the series' samples, hours before ``first_hour``
    only their baselines. A bad sample fails the run, or with ``rejects`` drops its series and is recorded."""
    rows: dict[tuple, sc.HourFigures] = {}
    for (name, label_items), values in series.items():
        labels = dict(label_items)
        counters = sc.counters_of(name, labels)
        if not counters:
            continue
        shown = series_name(name, labels)
        model = sc.model_of(labels, default_model, source, where, shown)
        try:
            samples = [(when, sc.checked(value, shown, when)) for when, value in values.items()]
        except sc.CounterError as exc:
            if rejects is None:
                raise IngestError(f"{where}: {exc}") from None
            rejects.append({"file": where, "row": None, "column": name, "value": None, "reason": str(exc)})
            continue
        hours, _ = sc.increases(samples)
        for counter in counters:
            sc.add(rows, sc.row_key(counter, labels, model), counter.figure, hours, first_hour)
    return sc.table(rows)


def serving_table(rows: pa.Table, source: str, run_id: str) -> pa.Table:
    """ROW_SCHEMA rows as ``serving_metrics_hourly`` rows of ``source``."""
    n = rows.num_rows
    full = rows.append_column("source", pa.array([source] * n, pa.string()))
    full = full.append_column("ingest_run_id", pa.array([run_id] * n, pa.string()))
    return full.select(SERVING_METRICS_HOURLY.names).cast(SERVING_METRICS_HOURLY)


# the stored rows a re-read compares with: the table, every column but the run id
_STORED = ("serving_metrics_hourly", tuple(c for c in SERVING_METRICS_HOURLY.names if c != "ingest_run_id"))


class PrometheusServing:
    meta = registry.IngestorMeta(
        **hourly_source.QUERIED_BY_THE_HOUR,
        name="prometheus_serving",
        target_table="serving_metrics_hourly",
        key=SERVING_KEY,
        default_schedule="9 * * * *",
        options=PrometheusServingOptions,
        description="a Prometheus server's raw samples of vLLM, TGI, Triton (TensorRT-LLM) and SGLang token "
        "and request counters, hourly increases with counter resets",
        provider=None,
        extra=None,
        transport=registry.Transport(client="http", endpoint="url", paged=False, unless=None),
        freshness=registry.Freshness(kind="other", lag_hours=24.0),
        doctor=doctor.prometheus_serving,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: PrometheusServingOptions = ctx.options
        start, end = ctx.window.whole_hours(datetime.now(UTC), timedelta(days=options.backfill_days))
        state = {"cursor": end.isoformat()}
        if end <= start:
            return hourly_source.no_complete_hour(ctx, state, [])
        client = PrometheusClient(options.url, options.timeout_s, options.retries, options.bounds())
        where = f"Prometheus at {client.url}"
        rejects: list[dict] = []
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        series = fetch_samples(client, start, end, options.selector)
        rows = hourly_rows(
            series,
            int(start.timestamp()) // sc.HOUR_S,
            options.model,
            where,
            rejects if skip_rows else None,
            ctx.source,
        )
        log.info("%s: %d serving series, %d rows from %s to %s", ctx.source, len(series), rows.num_rows, start, end)
        hours = [
            (start + timedelta(hours=h)).strftime(metrics_store.HOUR_FORMAT)
            for h in range(int((end - start) / timedelta(hours=1)))
        ]
        new = serving_table(rows, ctx.source, ctx.run_id)
        if (
            not ctx.window.full_refresh
            and not rejects
            and hourly_source.hours_unchanged(ctx.con, ctx.source, new, (start, end), *_STORED)
        ):
            return FetchResult(
                [], {**ctx.state, **state}, watermark=end.isoformat(), skipped_reason="no new or changed hours"
            )
        batches = [
            Batch(
                table="serving_metrics_hourly",
                data=new,
                slices=hours,
                context=f"raw samples from {display_url(options.url)}",
            )
        ]
        if skip_rows:
            batches.append(validate.rejects_batch(rejects_table(ctx, rejects) if rejects else None, [where]))
        return FetchResult(batches, state, watermark=end.isoformat())


INGESTORS = [PrometheusServing]
