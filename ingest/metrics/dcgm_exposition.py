"""DCGM exporter's Prometheus text exposition -> sample rows (``metrics_store.SAMPLE_SCHEMA``), one per
GPU / MIG slice and time: the fields read, the labels kept, the lines refused (``dcgm_exporter.py``'s
docstring lists them; the ingestor there scrapes and rolls up).
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from prometheus_client.parser import text_string_to_metric_families

from gpufinops.ingest.core import validate
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.validate_metrics import ExpositionLines, checked_lines
from gpufinops.ingest.metrics import metrics_attribution, metrics_store

FIELDS = {  # DCGM field -> sample column
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_active",
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": "fp16_active",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": "fp32_active",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": "fp64_active",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "pcie_tx_bps",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "pcie_rx_bps",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_tx_bps",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_rx_bps",
    "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_FB_FREE": "mem_free_mib",
    "DCGM_FI_DEV_FB_RESERVED": "mem_reserved_mib",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
}
VALUE_COLUMNS = tuple(f.name for f in metrics_store.SAMPLE_SCHEMA if f.type == pa.float64())
ATTR_COLUMNS = ("gpu_index", "name", "host", "resource_hint", "provider_id", "namespace", "pod", "container", "vgpu")


class ExpositionParser:
    """Prometheus text exposition -> sample rows (SAMPLE_SCHEMA), one per GPU / MIG slice and time.

    Metric names and label sets are parsed by ``prometheus_client``, once per distinct series (a
    recorded exposition repeats each series for every timestamp). Arrow splits each line into its
    series, value and optional millisecond timestamp as the format defines them, and pivots the
    samples to one row per GPU and time, so a replayed history of millions of lines parses in
    seconds (``prometheus_client`` alone reads about 10k samples a second here).
    """

    def __init__(
        self,
        resource_label: str = "instance_id",
        provider_id_label: str = "provider_id",
        on_invalid: str = validate.FAIL,
    ) -> None:
        self.resource_label = resource_label
        self.provider_id_label = provider_id_label
        self.on_invalid = on_invalid
        self.rejects: list[dict[str, Any]] = []  # lines refused under on_invalid = "skip_rows"

    def _parse_series(self, series: str, default_host: str) -> tuple | None:
        families = list(text_string_to_metric_families(f"{series} 0\n"))
        sample = families[0].samples[0]
        column = FIELDS.get(sample.name)
        if column is None:
            return None
        labels = sample.labels
        mig = f"{labels['GPU_I_PROFILE']}/{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") not in (None, "") else None
        host = labels.get("Hostname") or labels.get("instance", "").rsplit(":", 1)[0] or default_host
        uuid = labels.get("UUID") or (f"{host}:{labels['gpu']}" if labels.get("gpu") else None)
        return (
            column,
            uuid,
            mig,
            labels.get("gpu"),
            labels.get("modelName"),
            host,
            labels.get(self.resource_label),
            labels.get(self.provider_id_label),
            *metrics_attribution.workload_labels(labels),
            labels.get("vgpu") or None,
        )

    def parse(self, text: str | bytes, scrape_ms: int, default_host: str, where: str) -> tuple[pa.Table, bool]:
        """(samples, whether every sample carried its own timestamp)."""
        lines, numbers = _lines(text)
        if len(lines) == 0:
            raise IngestError(f"{where}: the exposition holds no samples (it is empty or only comments)")
        # "<series> <value> [<timestamp>]": the series ends at the last "} " (values hold no brace)
        braced = pc.split_pattern(lines, pattern="} ", max_splits=1, reverse=True)
        has_labels = pc.equal(pc.list_value_length(braced), 2)
        bare = pc.split_pattern(lines, pattern=" ", max_splits=1)
        series = pc.if_else(
            has_labels, pc.binary_join_element_wise(pc.list_element(braced, 0), "}", ""), pc.list_element(bare, 0)
        )
        pair = pa.scalar(["", ""], pa.list_(pa.string()))
        rest = pc.if_else(
            has_labels,
            pc.list_element(pc.if_else(has_labels, braced, pair), 1),
            pc.list_element(pc.if_else(pc.equal(pc.list_value_length(bare), 2), bare, pair), 1),
        )
        tokens = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(rest))
        counts = pc.list_value_length(tokens)
        bad = pc.or_(pc.less(counts, 1), pc.greater(counts, 2))
        if pc.any(bad).as_py():
            at = pc.index(bad, True).as_py()
            raise IngestError(
                f"{where}: line {numbers[at].as_py()} is not Prometheus text exposition "
                f"(expected a value and an optional timestamp): {lines[at].as_py()[:120]!r}"
            )
        unique = pc.unique(series)
        parsed = []
        for text_series in unique.to_pylist():
            try:
                parsed.append(self._parse_series(text_series, default_host))
            except ValueError as exc:
                raise IngestError(
                    f"{where}: line {_line_number(text, text_series)} is not Prometheus text "
                    f"exposition ({exc}): {text_series[:120]!r}"
                ) from None
        value_text = pc.list_element(tokens, 0)
        stamp_text = pc.list_element(
            pc.if_else(pc.equal(counts, 2), tokens, pa.scalar(["", None], pa.list_(pa.string()))), 1
        )
        values, stamps = _numbers(value_text, pa.float64()), _numbers(stamp_text, pa.int64())
        for what, typed, raw in (("value", values, value_text), ("timestamp", stamps, stamp_text)):
            unparsed = pc.and_(pc.is_null(typed), pc.is_valid(raw))
            if pc.any(unparsed).as_py():
                at = pc.index(unparsed, True).as_py()
                raise IngestError(
                    f"{where}: line {numbers[at].as_py()}: the sample {what} {raw[at].as_py()!r} is not a number"
                )
        stamped = stamps.null_count == 0
        known = [(i, p) for i, p in enumerate(parsed) if p is not None]
        if not known:
            return metrics_store.SAMPLE_SCHEMA.empty_table(), stamped
        index = pc.index_in(series, value_set=unique)
        index, values, stamps = self._checked(where, index, known, lines, numbers, values, stamps, len(parsed))
        return self._pivot(index, values, pc.fill_null(stamps, scrape_ms), known, len(parsed)), stamped

    def _checked(
        self,
        where: str,
        index: pa.Array,
        known: list[tuple[int, tuple]],
        lines: pa.Array,
        numbers: pa.Array,
        values: pa.Array,
        stamps: pa.Array,
        series: int,
    ) -> tuple[pa.Array, pa.Array, pa.Array]:
        """The lines of GPU fields that pass the sample checks (ingest/core/validate_metrics.py); ``series``:
        how many distinct series the lines hold (an unread field's series may come after the last known one)."""
        column_of_series: list[int | None] = [None] * (series + 1)
        for i, p in known:
            column_of_series[i] = VALUE_COLUMNS.index(p[0])
        columns = pc.take(pa.array(column_of_series, pa.int32()), pc.fill_null(index, len(column_of_series) - 1))
        exposition = ExpositionLines(lines, numbers, columns, values, stamps)
        keep = checked_lines(where, self.on_invalid, exposition, list(VALUE_COLUMNS), self.rejects)
        return (
            (index, values, stamps) if keep is None else (index.filter(keep), values.filter(keep), stamps.filter(keep))
        )

    @staticmethod
    def _pivot(
        index: pa.Array, values: pa.Array, stamps: pa.Array, known: list[tuple[int, tuple]], series: int
    ) -> pa.Table:
        """One row per (time, GPU / slice) with a column per field, by Arrow's hash aggregation."""
        keys: dict[tuple, int] = {}
        key_attrs: list[tuple] = []
        series_key: list[int | None] = [None] * series
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
        grouped = (
            lines.group_by(["ts", "key"], use_threads=False)
            .aggregate([(name, "max") for name in VALUE_COLUMNS])
            .sort_by([("ts", "ascending"), ("key", "ascending")])
        )
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
    table = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=["line"]),
        parse_options=pacsv.ParseOptions(
            delimiter="\x1f", quote_char=False, escape_char=False, ignore_empty_lines=False
        ),
        convert_options=pacsv.ConvertOptions(column_types={"line": pa.string()}, strings_can_be_null=False),
    )
    lines = table.column("line").combine_chunks() if table.num_rows else pa.array([], pa.string())
    numbers = pa.array(range(1, len(lines) + 1), pa.int64())
    keep = pc.invert(pc.or_(pc.starts_with(lines, "#"), pc.equal(pc.utf8_trim_whitespace(lines), "")))
    return lines.filter(keep), numbers.filter(keep)


def _line_number(text: str | bytes, fragment: str) -> int:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    position = text.find(fragment)
    return text.count("\n", 0, max(position, 0)) + 1
