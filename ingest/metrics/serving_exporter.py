"""``serving_exporter``: scrapes inference servers' own ``/metrics`` into hourly token and request increases.

Each run fetches every target (``http(s)://…/metrics``, ``file://…``, or a local path or glob, relative to
the config's folder; the same fetching, timeouts and retries as ``dcgm_exporter``), parses the Prometheus
text exposition with ``prometheus_client``'s parser and reads the serving counters of
:mod:`ingest.metrics.serving_counters`. The last sample of every series is kept in the source's state
(saved in the load's own transaction): the increase from it to the new sample is added to the hour of the
new sample, whose ``serving_metrics_hourly`` slice is replaced by the stored row plus the increase. A
counter that fell restarted (its new value is the increase); a series seen for the first time sets its
baseline only; a sample at or before the kept one (a recorded exposition read again) adds nothing, so
re-running never doubles tokens. A sample carrying a timestamp keeps it; one without gets the scrape time.

A server's own ``/metrics`` carries no Kubernetes labels: ``target_pods`` names the ``namespace/pod``
each target serves from (a Prometheus-scraped series has them as labels: ``prometheus_serving``).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from gpufinops.ingest.core import registry, validate
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import option
from gpufinops.ingest.core.validate_metrics import rejects_table
from gpufinops.ingest.metrics import doctor, hourly_source, metrics_store
from gpufinops.ingest.metrics import serving_counters as sc
from gpufinops.ingest.metrics.scrape import display_url, expand_targets, fetch_text
from gpufinops.ingest.metrics.serving_prometheus import SERVING_KEY, ServingOptions, series_name, serving_table

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ServingExporterOptions(ServingOptions):
    targets: str | list[str] = option(doc="inference servers' /metrics URLs, file:// URLs or local paths/globs")
    target_pods: dict[str, str] = option({}, 'target → the namespace/pod it serves from (e.g. "llm/vllm-0")')


def parse(
    text: str, url: str, options: ServingExporterOptions, scrape_s: float
) -> list[tuple[str, str, dict[str, str], float, Any]]:
    """(series id, shown name, labels, time, value) of every serving counter sample in one exposition.
    A series twice at one time (untimestamped samples have the scrape's) with different values is refused,
    as Prometheus refuses such a scrape: two replicas behind one target (a Service) would be read as one
    counter that jumps. A repeated identical sample counts once; a recorded history (one series at many
    timestamps) is read sample by sample."""
    pod_text = options.target_pods.get(url) or options.target_pods.get(display_url(url)) or ""
    namespace, _, pod = pod_text.rpartition("/")
    extra = {k: v for k, v in (("namespace", namespace), ("pod", pod)) if v}
    out = []
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise IngestError(f"{display_url(url)}: not a Prometheus text exposition ({exc})") from None
    seen: dict[tuple[str, float], str] = {}  # (series, time) -> its value as written (NaN equals NaN)
    for family in families:
        for sample in family.samples:
            if sample.name not in sc.COUNTERS:
                continue
            labels = {**extra, **dict(sample.labels)}
            stamp = float(sample.timestamp) if sample.timestamp is not None else scrape_s
            shown = series_name(sample.name, labels)
            ident = json.dumps([display_url(url), sample.name, sorted(labels.items())])
            if seen.setdefault((ident, stamp), repr(sample.value)) != repr(sample.value):
                raise IngestError(
                    f"{display_url(url)}: series {shown} appears twice in one exposition at one time (Prometheus "
                    "refuses such a scrape; two replicas behind one target? scrape each replica as its own target)"
                )
            out.append((ident, shown, labels, stamp, sample.value))
    return out


def pod_series(parsed: dict[str, list[tuple[str, str, dict[str, str], float, Any]]]) -> None:
    """Refuses one pod's series reached through two targets (its pod IP and its Service, or two targets
    that ``target_pods`` maps to the same pod): summed, its tokens would count twice. Series that name
    no pod (no ``pod`` label, no ``target_pods`` entry) are distinct servers and are summed."""
    first_target: dict[str, str] = {}
    for url, samples in parsed.items():
        for _ident, shown, labels, _stamp, _value in samples:
            if not (labels.get("exported_pod") or labels.get("pod")):
                continue
            other = first_target.setdefault(shown, url)
            if other != url:
                raise IngestError(
                    f"targets {display_url(other)} and {display_url(url)} both export {shown}: one pod "
                    "reached through two targets would count twice; keep one target per pod"
                )


class ServingExporter:
    meta = registry.IngestorMeta(
        **hourly_source.SCRAPED,
        name="serving_exporter",
        target_table="serving_metrics_hourly",
        key=SERVING_KEY,
        cursor=registry.Cursor(remembers="the last sample of every counter series", resume_item=None),
        default_schedule="*/5 * * * *",
        options=ServingExporterOptions,
        description="scrapes vLLM, TGI, Triton (TensorRT-LLM) and SGLang `/metrics`: hourly token and request "
        "increases with counter resets",
        freshness=registry.Freshness(kind="other", lag_hours=24.0),
        doctor=doctor.serving_exporter,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: ServingExporterOptions = ctx.options
        targets = expand_targets(ctx.source, options.targets, ctx.base_dir)
        last: dict[str, list[float]] = dict(ctx.state.get("last", {}))
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        rejects: list[dict] = []
        rows: dict[tuple, sc.HourFigures] = {}
        parsed = {url: self._scrape(ctx.source, url, options) for url in targets}
        pod_series(parsed)
        for url, samples in parsed.items():
            where = display_url(url)
            host = urllib.parse.urlsplit(url).hostname if not url.startswith("file:") else None
            for ident, shown, labels, stamp, value in samples:
                model = sc.model_of(labels, options.model, ctx.source, where, shown)
                try:
                    number = sc.checked(value, shown, stamp)
                except sc.CounterError as exc:
                    if not skip_rows:
                        raise IngestError(f"{ctx.source}: {where}: {exc}") from None
                    rejects.append(
                        {
                            "file": where,
                            "row": None,
                            "column": shown.split("{")[0],
                            "value": str(value),
                            "reason": str(exc),
                        }
                    )
                    continue
                baseline = tuple(last[ident]) if ident in last else None
                hours, newest = sc.increases([(stamp, number)], baseline)
                if newest is not None:
                    last[ident] = [newest[0], newest[1]]
                if baseline is None:
                    continue  # the first sample of a series: its baseline only
                for counter in sc.counters_of(shown.split("{")[0], labels):
                    sc.add(rows, sc.row_key(counter, labels, model, host), counter.figure, hours)
        stored = self._with_stored(ctx, rows)
        hours = sorted(
            {datetime.fromtimestamp(key[0] * sc.HOUR_S, UTC).strftime(metrics_store.HOUR_FORMAT) for key in rows}
        )
        state = {"last": last}
        batches = []
        if rows:
            batches.append(
                Batch(
                    table="serving_metrics_hourly",
                    data=serving_table(sc.table(stored), ctx.source, ctx.run_id),
                    slices=hours,
                    context=", ".join(display_url(t) for t in targets),
                )
            )
        if skip_rows:
            batches.append(
                validate.rejects_batch(
                    rejects_table(ctx, rejects) if rejects else None, [display_url(t) for t in targets]
                )
            )
        unchanged = not rows and not rejects and last == ctx.state.get("last", {})
        skipped = "no counter grew since the last scrape" if unchanged else None  # new baselines are saved
        return FetchResult(batches, state, watermark=f"{len(last)} series", skipped_reason=skipped)

    @staticmethod
    def _scrape(source: str, url: str, options: ServingExporterOptions) -> list:
        """The serving samples of one target (an error names the source and target)."""
        where = display_url(url)
        try:
            text = fetch_text(url, timeout_s=options.timeout_s, retries=options.retries, bounds=options.bounds())
        except (OSError, ValueError) as exc:
            raise IngestError(f"{source}: {where}: {getattr(exc, 'reason', None) or exc}") from None
        try:
            return parse(text, url, options, time.time())
        except IngestError as exc:
            raise IngestError(f"{source}: {exc}") from None

    @classmethod
    def _with_stored(cls, ctx: IngestContext, rows: dict[tuple, sc.HourFigures]) -> dict[tuple, sc.HourFigures]:
        """The new increases added to what is stored for their hours; with no kept samples (a first run,
        --full-refresh) the rows are the whole story: nothing to add to."""
        stored = cls._stored(ctx, sorted({key[0] for key in rows})) if ctx.state.get("last") else {}
        for key, row in rows.items():
            base = stored.setdefault(key, sc.HourFigures({}))
            for figure, value in row.figures.items():
                base.figures[figure] = base.figures.get(figure, 0.0) + value
            base.resets += row.resets
            base.samples += row.samples
        return stored

    @staticmethod
    def _stored(ctx: IngestContext, hours: list[int]) -> dict[tuple, sc.HourFigures]:
        """This source's stored rows of ``hours`` (epoch hour numbers), keyed like serving_counters' rows."""
        if not hours:
            return {}
        stamps = [datetime.fromtimestamp(h * sc.HOUR_S, UTC) for h in hours]
        figures = ", ".join(sc.FIGURES)
        found = ctx.con.execute(
            f"SELECT epoch(hour)::BIGINT // {sc.HOUR_S}, server, model, namespace, pod, host, {figures}, "
            "counter_resets, samples FROM serving_metrics_hourly WHERE source = ? "
            "AND hour IN (SELECT unnest(?::TIMESTAMPTZ[]))",
            [ctx.source, stamps],
        ).fetchall()
        out: dict[tuple, sc.HourFigures] = {}
        for row in found:
            values = {f: v for f, v in zip(sc.FIGURES, row[6:11]) if v is not None}
            out[tuple(row[:6])] = sc.HourFigures(values, int(row[11] or 0), int(row[12] or 0))
        return out


INGESTORS = [ServingExporter]
