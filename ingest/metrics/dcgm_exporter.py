"""``dcgm_exporter``: scrapes DCGM exporter ``/metrics`` endpoints into hourly GPU rollups.

Each run fetches every target (``http(s)://…/metrics``, ``file://…``, or a local path or glob,
relative to the config's folder) with a timeout and a bounded retry, parses the Prometheus text
exposition with ``prometheus_client``'s parser, and appends the samples to the day-partitioned
sample store (:mod:`ingest.metrics.metrics_store`). The hours the new samples span are rolled up again
from every file of their day and their ``gpu_metrics_hourly`` slices (one per hour) replaced; an
unchanged recorded exposition (same bytes, every sample timestamped) is not read again. A sample carrying a timestamp keeps it (a recorded
exposition replays its history); one without gets the time the scrape answered, as Prometheus does.

Fields: ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE`` / ``_FB_RESERVED`` (MiB),
``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``_SM_ACTIVE``,
``_PIPE_TENSOR_ACTIVE``, ``_PIPE_FP16_ACTIVE``, ``_PIPE_FP32_ACTIVE``, ``_DRAM_ACTIVE`` (ratios
0–1); other families are ignored. Labels: ``UUID``, ``gpu``, ``modelName``, ``Hostname`` (else the
``instance`` label without its port, else the target's host), MIG ``GPU_I_PROFILE``/``GPU_I_ID``
(``mig_instance`` = ``"<profile>/<id>"``: each slice is its own row), ``namespace``/``pod``/
``container`` (``exported_*`` first; see ``metrics_attribution.workload_labels``) and ``vgpu`` (set by
``--kubernetes-virtual-gpus``: the GPU is shared, every sharing pod gets its own copy of the series,
kept as its own sample row), the configured ``resource_label`` (default ``instance_id``) and
``provider_id_label`` (default ``provider_id``, a Kubernetes node providerID). Each hour also yields
its workloads (``gpu_workloads_hourly``, :mod:`ingest.metrics.workloads`), in the same load.

A target that still fails after its retries fails the run (naming the target) after the other
targets' samples are stored; the next run rolls them up.
"""

from __future__ import annotations

import hashlib
import io
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from prometheus_client.parser import text_string_to_metric_families

from gpufinops.ingest.core import validate
from gpufinops.ingest.core.registry import (
    Batch,
    Cursor,
    FetchResult,
    Freshness,
    IngestContext,
    IngestError,
    IngestorMeta,
)
from gpufinops.ingest.core.spec import ExporterOptions, option
from gpufinops.ingest.core.validate_metrics import checked_lines, rejects_table
from gpufinops.ingest.metrics import metrics_attribution, metrics_store, workloads
from gpufinops.ingest.metrics.scrape import display_url, expand_targets, fetch_bytes

log = logging.getLogger(__name__)

FIELDS = {  # DCGM field -> sample column
    "DCGM_FI_DEV_GPU_UTIL": "util", "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_active",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16_active", "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "fp32_active",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active", "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_FB_FREE": "mem_free_mib", "DCGM_FI_DEV_FB_RESERVED": "mem_reserved_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
}
VALUE_COLUMNS = tuple(f.name for f in metrics_store.SAMPLE_SCHEMA if f.type == pa.float64())
ATTR_COLUMNS = ("gpu_index", "name", "host", "resource_hint", "provider_id", "namespace", "pod", "container", "vgpu")


# ---- parsing -------------------------------------------------------------------------------------

class ExpositionParser:
    """Prometheus text exposition -> sample rows (SAMPLE_SCHEMA), one per GPU / MIG slice and time.

    Metric names and label sets are parsed by ``prometheus_client``, once per distinct series (a
    recorded exposition repeats each series for every timestamp). Arrow splits each line into its
    series, value and optional millisecond timestamp as the format defines them, and pivots the
    samples to one row per GPU and time, so a replayed history of millions of lines parses in
    seconds (``prometheus_client`` alone reads about 10k samples a second here).
    """

    def __init__(self, resource_label: str = "instance_id", provider_id_label: str = "provider_id",
                 on_invalid: str = validate.FAIL) -> None:
        self.resource_label = resource_label
        self.provider_id_label = provider_id_label
        self.on_invalid = on_invalid
        self.rejects: list[dict[str, Any]] = []   # lines refused under on_invalid = "skip_rows"

    def _parse_series(self, series: str, default_host: str) -> tuple | None:
        families = list(text_string_to_metric_families(f"{series} 0\n"))
        sample = families[0].samples[0]
        column = FIELDS.get(sample.name)
        if column is None:
            return None
        labels = sample.labels
        mig = (f"{labels['GPU_I_PROFILE']}/{labels['GPU_I_ID']}"
               if labels.get("GPU_I_ID") not in (None, "") else None)
        host = labels.get("Hostname") or labels.get("instance", "").rsplit(":", 1)[0] or default_host
        uuid = labels.get("UUID") or (f"{host}:{labels['gpu']}" if labels.get("gpu") else None)
        return (column, uuid, mig, labels.get("gpu"), labels.get("modelName"), host, labels.get(self.resource_label),
                labels.get(self.provider_id_label), *metrics_attribution.workload_labels(labels), labels.get("vgpu") or None)

    def parse(self, text: str | bytes, scrape_ms: int, default_host: str, where: str) -> tuple[pa.Table, bool]:
        """(samples, whether every sample carried its own timestamp)."""
        lines, numbers = _lines(text)
        if len(lines) == 0:
            raise IngestError(f"{where}: the exposition holds no samples (it is empty or only comments)")
        # "<series> <value> [<timestamp>]": the series ends at the last "} " (values hold no brace)
        braced = pc.split_pattern(lines, pattern="} ", max_splits=1, reverse=True)
        has_labels = pc.equal(pc.list_value_length(braced), 2)
        bare = pc.split_pattern(lines, pattern=" ", max_splits=1)
        series = pc.if_else(has_labels, pc.binary_join_element_wise(pc.list_element(braced, 0), "}", ""),
                            pc.list_element(bare, 0))
        pair = pa.scalar(["", ""], pa.list_(pa.string()))
        rest = pc.if_else(has_labels, pc.list_element(pc.if_else(has_labels, braced, pair), 1),
                          pc.list_element(pc.if_else(pc.equal(pc.list_value_length(bare), 2), bare, pair), 1))
        tokens = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(rest))
        counts = pc.list_value_length(tokens)
        bad = pc.or_(pc.less(counts, 1), pc.greater(counts, 2))
        if pc.any(bad).as_py():
            at = pc.index(bad, True).as_py()
            raise IngestError(f"{where}: line {numbers[at].as_py()} is not Prometheus text exposition "
                              f"(expected a value and an optional timestamp): {lines[at].as_py()[:120]!r}")
        unique = pc.unique(series)
        parsed = []
        for text_series in unique.to_pylist():
            try:
                parsed.append(self._parse_series(text_series, default_host))
            except ValueError as exc:
                raise IngestError(f"{where}: line {_line_number(text, text_series)} is not Prometheus text "
                                  f"exposition ({exc}): {text_series[:120]!r}") from None
        value_text = pc.list_element(tokens, 0)
        stamp_text = pc.list_element(pc.if_else(pc.equal(counts, 2), tokens, pa.scalar(["", None], pa.list_(pa.string()))), 1)
        values, stamps = _numbers(value_text, pa.float64()), _numbers(stamp_text, pa.int64())
        for what, typed, raw in (("value", values, value_text), ("timestamp", stamps, stamp_text)):
            unparsed = pc.and_(pc.is_null(typed), pc.is_valid(raw))
            if pc.any(unparsed).as_py():
                at = pc.index(unparsed, True).as_py()
                raise IngestError(f"{where}: line {numbers[at].as_py()}: the sample {what} {raw[at].as_py()!r} is not a "
                                  f"number")
        stamped = stamps.null_count == 0
        known = [(i, p) for i, p in enumerate(parsed) if p is not None]
        if not known:
            return metrics_store.SAMPLE_SCHEMA.empty_table(), stamped
        index = pc.index_in(series, value_set=unique)
        index, values, stamps = self._checked(where, index, known, lines, numbers, values, stamps)
        return self._pivot(index, values, pc.fill_null(stamps, scrape_ms), known), stamped

    def _checked(self, where: str, index: pa.Array, known: list[tuple[int, tuple]], lines: pa.Array,
                 numbers: pa.Array, values: pa.Array, stamps: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
        """The lines of GPU fields that pass the sample checks (ingest/core/validate_metrics.py)."""
        column_of_series: list[int | None] = [None] * (max(i for i, _ in known) + 2)
        for i, p in known:
            column_of_series[i] = VALUE_COLUMNS.index(p[0])
        columns = pc.take(pa.array(column_of_series, pa.int32()), pc.fill_null(index, len(column_of_series) - 1))
        keep = checked_lines(where, self.on_invalid, columns, list(VALUE_COLUMNS), lines, numbers, values, stamps,
                             self.rejects)
        return (index, values, stamps) if keep is None else (index.filter(keep), values.filter(keep), stamps.filter(keep))

    @staticmethod
    def _pivot(index: pa.Array, values: pa.Array, stamps: pa.Array, known: list[tuple[int, tuple]]) -> pa.Table:
        """One row per (time, GPU / slice) with a column per field, by Arrow's hash aggregation."""
        keys: dict[tuple, int] = {}
        key_attrs: list[tuple] = []
        series_key: list[int | None] = [None] * (max(i for i, _ in known) + 1)
        series_column: list[int | None] = [None] * len(series_key)
        for i, p in known:
            key = (p[1], p[2], *p[8:11])  # GPU, slice and workload: pods sharing a GPU keep a row each
            if key not in keys:
                keys[key] = len(key_attrs)
                key_attrs.append(p[1:])
            series_key[i], series_column[i] = keys[key], VALUE_COLUMNS.index(p[0])
        index = pc.fill_null(index, len(series_key))  # not a GPU field: no key, dropped below
        key_of_line = pc.take(pa.array(series_key + [None], pa.int32()), index)
        column_of_line = pc.take(pa.array(series_column + [None], pa.int32()), index)
        columns = {"ts": stamps, "key": key_of_line}
        for c, name in enumerate(VALUE_COLUMNS):
            columns[name] = pc.if_else(pc.equal(column_of_line, c), values, pa.scalar(None, pa.float64()))
        lines = pa.table(columns).filter(pc.is_valid(key_of_line))
        grouped = lines.group_by(["ts", "key"], use_threads=False).aggregate(
            [(name, "max") for name in VALUE_COLUMNS]).sort_by([("ts", "ascending"), ("key", "ascending")])
        key_column = grouped.column("key")
        attrs = ("gpu_uuid", "mig_instance") + ATTR_COLUMNS
        data = {"ts": pc.cast(grouped.column("ts"), pa.timestamp("ms", tz="UTC"))}
        for k, name in enumerate(attrs):
            data[name] = pc.take(pa.array([a[k] for a in key_attrs], pa.string()), key_column)
        for name in VALUE_COLUMNS:
            data[name] = grouped.column(f"{name}_max")
        return pa.table(data).select(metrics_store.SAMPLE_SCHEMA.names).cast(metrics_store.SAMPLE_SCHEMA)


def _numbers(text: pa.Array, kind: pa.DataType) -> pa.Array:
    """Numbers parsed from text, NULL where a token is not one (Prometheus spells ±Inf as +Inf/-Inf)."""
    cleaned = pc.replace_substring_regex(text, pattern=r"^\+", replacement="")
    try:
        return pc.cast(cleaned, kind)
    except pa.ArrowInvalid:  # some token is not a number: parse one by one to find it
        out = []
        for token in cleaned.to_pylist():
            try:
                out.append(None if token is None else (int(token) if kind == pa.int64() else float(token)))
            except ValueError:
                out.append(None)
        return pa.array(out, kind)


def _lines(text: str | bytes) -> tuple[pa.Array, pa.Array]:
    """(the exposition's sample lines, their line numbers): comments and blank lines left out, read
    by Arrow's CSV reader."""
    data = text.encode() if isinstance(text, str) else text
    if not data.strip():
        return pa.array([], pa.string()), pa.array([], pa.int64())
    table = pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=["line"]),
                           parse_options=pacsv.ParseOptions(delimiter="\x1f", quote_char=False, escape_char=False,
                                                             ignore_empty_lines=False),
                           convert_options=pacsv.ConvertOptions(column_types={"line": pa.string()},
                                                                strings_can_be_null=False))
    lines = table.column("line").combine_chunks() if table.num_rows else pa.array([], pa.string())
    numbers = pa.array(range(1, len(lines) + 1), pa.int64())
    keep = pc.invert(pc.or_(pc.starts_with(lines, "#"), pc.equal(pc.utf8_trim_whitespace(lines), "")))
    return lines.filter(keep), numbers.filter(keep)


def _line_number(text: str | bytes, fragment: str) -> int:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    position = text.find(fragment)
    return text.count("\n", 0, max(position, 0)) + 1


# ---- the ingestor --------------------------------------------------------------------------------

def _scrape(url: str, options: DcgmExporterOptions, seen: set[str]) -> tuple[str, str, pa.Table | None, bool, list[dict]]:
    """(url, body digest, samples or None when unchanged, whether samples carry timestamps, lines refused)."""
    body = fetch_bytes(url, timeout_s=options.timeout_s, retries=options.retries)
    digest = hashlib.sha1(body).hexdigest()
    if digest in seen:
        return url, digest, None, True, []
    parser = ExpositionParser(options.resource_label, options.provider_id_label, options.on_invalid)
    host = urllib.parse.urlsplit(url).hostname or ""
    table, stamped = parser.parse(body, int(time.time() * 1000), host, display_url(url))
    return url, digest, table, stamped, parser.rejects


def _unique(tables: list[pa.Table]) -> pa.Table:
    """The targets' samples together; a GPU served by two targets keeps one sample per time."""
    combined = pa.concat_tables(tables)
    seen: set[str] = set()
    overlap = False
    for table in tables:
        uuids = set(pc.unique(table.column("gpu_uuid")).to_pylist())
        overlap |= bool(seen & uuids)
        seen |= uuids
    if not overlap:
        return combined  # each target's samples are unique by construction
    con = duckdb.connect()
    try:  # a time's metrics may be split between the targets: merged, as the rollup would
        con.register("samples", combined)
        return con.sql(metrics_store.merge_sql("samples")).to_arrow_table()
    finally:
        con.close()


@dataclass(frozen=True, kw_only=True)
class DcgmExporterOptions(ExporterOptions):
    targets: str | list[str] = option(doc="exporter URLs, file:// URLs or local paths/globs")


class DcgmExporter:
    meta = IngestorMeta(
        name="dcgm_exporter",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        slice_expr=metrics_store.HOUR_SLICE_SQL,
        source_column="source",
        cursor=Cursor(remembers="files of the sample store's day partitions", resume_item=None),
        lookback=timedelta(0),
        default_schedule="* * * * *",
        options=DcgmExporterOptions,
        description="DCGM exporter `/metrics` (Prometheus text format): URLs, `file://` URLs or local "
                    "paths/globs, scraped into a sample store and rolled up hourly",
        time_range=False,
        provider=None,
        extra=None,
        freshness=Freshness(kind="metrics", lag_hours=1.0),
        doctor="gpufinops.jobs.doctor_sources:dcgm_exporter",
        init=("dcgm_target",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: DcgmExporterOptions = ctx.options
        targets = expand_targets(ctx.source, options.targets, ctx.base_dir)
        resource_map, namespace_teams = dict(options.resource_map), dict(options.namespace_teams)
        folder = metrics_store.samples_dir(ctx)
        seen = dict(ctx.state.get("stamped_bodies", {}))
        unchanged = set(seen.values())
        failures, new_tables, rejects = [], [], []
        with ThreadPoolExecutor(max_workers=min(4, len(targets))) as pool:
            futures = [pool.submit(_scrape, url, options, unchanged) for url in targets]
            for url, future in zip(targets, futures):
                try:
                    _, digest, table, stamped, refused = future.result()
                except IngestError as exc:
                    failures.append(str(exc))
                    continue
                except (OSError, ValueError) as exc:
                    failures.append(f"{display_url(url)}: {getattr(exc, 'reason', None) or exc}")
                    continue
                rejects += refused
                if table is not None:
                    new_tables.append(table)
                    if stamped:
                        seen[url] = digest
                    else:
                        seen.pop(url, None)
        written = metrics_store.write_samples(folder, _unique(new_tables), ctx.run_id) if new_tables else []
        log.info("%s: %d target(s) scraped, samples written for %d day(s)", ctx.source, len(targets), len(written))
        if failures:
            raise IngestError(f"{ctx.source}: {len(failures)} of {len(targets)} target(s) failed after retries "
                              f"(the others' samples are stored): {'; '.join(failures)}")
        metrics_store.compact(folder, written, ctx.run_id)
        result = self._rollup(ctx, folder, seen, resource_map, namespace_teams)
        if options.on_invalid == validate.SKIP_ROWS:  # each target scraped replaces its previous rejects
            result.batches.append(validate.rejects_batch(rejects_table(ctx, rejects) if rejects else None,
                                                         [display_url(t) for t in targets]))
            result.skipped_reason = None if rejects else result.skipped_reason
        return result

    def _rollup(self, ctx: IngestContext, folder, seen, resource_map, namespace_teams) -> FetchResult:
        stored, plan = metrics_store.plan_rollup(folder, ctx.state.get("days", {}))
        watermark = max(stored, default=None)
        state = {"days": stored, "stamped_bodies": seen, "watermark": watermark}
        rules = metrics_attribution.rules_batches(ctx, resource_map, namespace_teams)
        if not plan:
            return FetchResult(rules, state, watermark=watermark, skipped_reason="no new samples")
        batches = list(rules)
        log.info("%s: rolling up %d hour(s) of %d day(s)", ctx.source, sum(map(len, plan.values())), len(plan))
        # one day at a time: a month of a large fleet's minute samples in one aggregation spills tens of
        # GB (the p95 keeps every value of every GPU-hour); a day holds 1/30 of it. The days' rows then
        # load as one batch per table (one delete of the hours replaced, one insert, one attribution).
        hourly, running = [], []
        for n, (day, hours) in enumerate(plan.items()):
            samples, per_day = metrics_store.store_relation(folder, {day: hours})
            deduplicate = any(metrics_store.needs_dedup(files) for files in per_day)
            hourly.append(metrics_store.hourly_table(ctx.con, samples, run_id=ctx.run_id, deduplicate=deduplicate,
                                                     part=f"_{n}"))
            running.append(workloads.rollup(ctx.con, samples, source=ctx.source, run_id=ctx.run_id,
                                            deduplicate=deduplicate, part=f"_{n}"))
        days = list(plan)
        where = f"the hourly rollup of the sample store's {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else "")
        hours = [h for day_hours in plan.values() for h in day_hours]
        sql = metrics_store.attributed_tables_sql(ctx.con, hourly, source=ctx.source, run_id=ctx.run_id)
        batches += [Batch(table="gpu_metrics_hourly", data=sql, slices=hours, context=where),
                    Batch(table="gpu_workloads_hourly", data=" UNION ALL ".join(running), slices=hours, context=where)]
        return FetchResult(batches, state, watermark=watermark)


INGESTORS = [DcgmExporter]
