"""``nvidia_smi_csv``: ``nvidia-smi --query-gpu=… --format=csv -l N`` logs, local paths and globs.

Each new or changed log is parsed by DuckDB (every field as text, then trimmed, unit-stripped and
cast) into a Parquet file of normalised samples beside the warehouse, at
``<warehouse dir>/samples/<source>/<sha1 of the log's path>.parquet`` (written under a temporary
name and renamed, so a kill never leaves half a file). The hourly rollup then reads the samples of
every log that holds one of the touched days, so an hour split across rotated logs rolls up whole,
and replaces those day slices of ``gpu_metrics_hourly``.

Quirks handled: ``, `` separators; units in headers (``memory.used [MiB]``) and values
(``433.78 W``); ``[N/A]``, ``N/A``, ``[Not Supported]`` and any other ``[…]`` marker are NULL, never
zero; the header repeated when nvidia-smi restarts and appends (a changed header splits the log);
a partly written last line is skipped. nvidia-smi writes timestamps in the host's local time
without a zone, which a log does not record: they are read as UTC. With MIG enabled, ``--query-gpu``
reports the parent GPU (utilisation ``[N/A]``): rows have ``mig_instance`` NULL.

The host is the log's ``host`` (or ``hostname``, or the configured ``host_column``) value, else the
file's name without its ``.csv``/``.log``/``.txt`` extension, rotation number and compression suffix.
A GPU without a ``uuid`` column is identified as ``<host>:<index>``.

A ``--query-compute-apps`` log among the matched files (told apart by its header: ``pid`` and
``used_gpu_memory``) is read by ``ingest.nvidia_smi_apps`` into ``gpu_processes_hourly``, in the
same run and transaction, its day slices replaced the same way.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from ingest import metrics_store, validate
from ingest.files import changed_files, expand_paths, fingerprint, sql_literal
from ingest.validate_metrics import write_samples
from ingest.registry import Batch, FetchResult, IngestContext, IngestError, IngestorMeta

log = logging.getLogger(__name__)

# Role -> accepted header names (without their " [unit]"), first present wins.
COLUMNS = {
    "ts": ("timestamp",), "util": ("utilization.gpu",), "uuid": ("uuid", "gpu_uuid"),
    "index": ("index",), "name": ("name", "gpu_name"), "mem_used": ("memory.used",),
    "mem_total": ("memory.total",), "power": ("power.draw", "power.draw.instant", "power.draw.average"),
    "mig": ("mig.mode.current",), "host": ("host", "hostname"),
}
NUMERIC = {"util": "util", "mem_used": "mem_used_mib", "mem_total": "mem_total_mib", "power": "power_w"}
GPU_MARKER = b"utilization.gpu"  # a --query-gpu header names it; a data line never does
TIMESTAMP_FORMAT = "'%Y/%m/%d %H:%M:%S.%g'"  # nvidia-smi's own, always with milliseconds
_UNIT_SUFFIX = r"'\s*(%|MiB|W)$'"
_HOST_SUFFIX = re.compile(r"\.(?:csv|log|txt|tsv)(?:[.-]\d+)?(?:\.(?:gz|zst|bz2|xz))?$", re.IGNORECASE)


def file_host(path: str) -> str:
    """``node7.csv``, ``node7.csv.1``, ``node7.log.gz`` -> ``node7``; other names are kept whole."""
    return _HOST_SUFFIX.sub("", Path(path).name) or Path(path).name


def _open_lines(path: str):
    return gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")


def header_fields(line: bytes) -> list[str]:
    """The header's fields, a UTF-8 byte order mark (some editors add one) left out."""
    return [f.strip() for f in line.decode("utf-8", "replace").lstrip("\ufeff").split(",")]


def base_names(fields: list[str]) -> list[str]:
    """Header fields without their `` [unit]``: ``memory.used [MiB]`` -> ``memory.used``."""
    return [re.sub(r"\s*\[[^\]]*\]$", "", f) for f in fields]


def header_line(path: str) -> bytes | None:
    """The log's first non-blank line (its header), stripped; None for an empty file."""
    with _open_lines(path) as lines:
        return next((ln.strip() for ln in lines if ln.strip()), None)


def _header_lines(path: str, marker: bytes = GPU_MARKER) -> list[bytes]:
    """The distinct header lines, in order: the first line and any later one holding ``marker``."""
    with _open_lines(path) as lines:
        first = next((ln.strip() for ln in lines if ln.strip()), None)
        headers = [first] if first else []
        while chunk := lines.read(1 << 23):
            chunk += lines.readline()  # whole lines only; found by a byte search, not line by line
            hit = chunk.find(marker)
            while hit >= 0:
                end = chunk.find(b"\n", hit)
                end = len(chunk) if end < 0 else end
                line = chunk[chunk.rfind(b"\n", 0, hit) + 1:end].strip()
                headers += [line] if line not in headers else []
                hit = chunk.find(marker, end)
    return headers


def split_by_header(source: str, path: str, tmp_dir: str,
                    marker: bytes = GPU_MARKER) -> list[tuple[str, list[str], int]]:
    """(csv file, header fields, lines of the log before it) per distinct header; a log whose header
    changes is split. Lines are counted without blank ones, as the CSV reader counts them.

    ``marker`` is a column name every header holds (and no data line): it finds repeated headers.
    """
    headers = _header_lines(path, marker)
    if not headers:
        raise IngestError(f"{source}: file {path} is empty (expected an nvidia-smi --format=csv header)")
    fields = [header_fields(h) for h in headers]
    for names in fields:
        validate.check_unique_columns(source, f"file {path}", names)
    if len(headers) == 1:
        return [(path, fields[0], 0)]
    log.info("%s: file %s changes its header %d times; reading it in parts", source, path, len(headers) - 1)
    segments: list[tuple[str, list[str], int]] = []
    out = None
    with _open_lines(path) as lines:
        for number, line in enumerate(ln for ln in lines if ln.strip()):
            is_header = number == 0 or marker in line
            if is_header and (not segments or header_fields(line) != segments[-1][1]):
                if out:
                    out.close()
                segments.append((os.path.join(tmp_dir, f"part{len(segments)}.csv"), header_fields(line), number))
                out = open(segments[-1][0], "wb")
            out.write(line.rstrip(b"\r\n") + b"\n")
    out.close()
    return segments


def _column_map(source: str, path: str, fields: list[str], host_column: str | None) -> dict[str, int]:
    """Role -> position in the header; an error naming the file and the missing column."""
    bases = base_names(fields)
    cols: dict[str, int] = {}
    for role, names in COLUMNS.items():
        found = next((name for name in names if name in bases), None)
        if found is not None:
            cols[role] = bases.index(found)
    if host_column:
        if host_column not in bases:
            raise IngestError(f"{source}: file {path} has no column {host_column!r} (the configured host_column)")
        cols["host"] = bases.index(host_column)
    for role, column in (("ts", "timestamp"), ("util", "utilization.gpu")):
        if role not in cols:
            raise IngestError(f"{source}: file {path} has no {column} column (nvidia-smi --query-gpu must "
                              f"include timestamp, uuid or index, and utilization.gpu)")
    if "uuid" not in cols and "index" not in cols:
        raise IngestError(f"{source}: file {path} has no uuid column (nor index) to identify the GPU")
    return cols


def value_sql(i: int) -> str:
    """Field i as text, NULL for nvidia-smi's ``[N/A]``-style markers and empty fields."""
    v = f"trim(c{i})"
    return f"(CASE WHEN {v} IN ('', 'N/A') OR {v} LIKE '[%]' THEN NULL ELSE {v} END)"


def number_sql(i: int) -> str:
    return f"regexp_replace({value_sql(i)}, {_UNIT_SUFFIX}, '')"


def _relation(csv_path: str, fields: list[str], cols: dict[str, int], line_offset: int | None = None) -> str:
    return data_rows(csv_path, fields, cols["util"], line_offset)


def data_rows(csv_path: str, fields: list[str], header_column: int, line_offset: int | None = None) -> str:
    """The log's data rows (c0, c1, … as text): repeated headers (``header_column`` holding its own
    name) and a partly written (padded) last line left out. With ``line_offset``, each row also
    holds its line number in the log (``__line``; validation's slow path and skip_rows)."""
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(fields)))
    relation = (f"read_csv({sql_literal(csv_path)}, header = false, delim = ',', quote = '', "
                f"escape = '', auto_detect = false, columns = {{{columns}}}, null_padding = true, "
                f"strict_mode = false, nullstr = '\x01')")
    if line_offset is not None:
        relation = f"(SELECT *, row_number() OVER () + {int(line_offset)} AS __line FROM {relation})"
    return (f"(SELECT * FROM {relation} WHERE c{len(fields) - 1} IS NOT NULL "
            f"AND trim(c{header_column}) <> {sql_literal(fields[header_column])})")


def typed_sql(role: str, cols: dict[str, int], kind: str, tolerant: bool) -> tuple[str, str | None]:
    """(the typed value of ``role``, with ``tolerant`` also the raw text of a value that does not parse)."""
    raw = value_sql(cols[role])
    if kind == "ts":
        typed = f"{'try_strptime' if tolerant else 'strptime'}({raw}, {TIMESTAMP_FORMAT})"
        return f"timezone('UTC', {typed})", (f"CASE WHEN {raw} IS NOT NULL AND {typed} IS NULL THEN trim(c{cols[role]}) END"
                                            if tolerant else None)
    target = "INTEGER" if kind == "integer" else "DOUBLE"
    value = raw if kind == "integer" else number_sql(cols[role])
    typed = f"{'TRY_CAST' if tolerant else 'CAST'}({value} AS {target})"
    return typed, (f"CASE WHEN {raw} IS NOT NULL AND {typed} IS NULL THEN trim(c{cols[role]}) END" if tolerant else None)


def _segment_select(csv_path: str, fields: list[str], cols: dict[str, int], host: str,
                    line_offset: int | None = None) -> str:
    """The segment's samples; with ``line_offset`` (skip_rows, or finding a bad line) also each
    sample's line, and values that do not parse as NULL with their text in ``__unparsed_*``."""
    def text(role: str) -> str:
        return value_sql(cols[role]) if role in cols else "CAST(NULL AS VARCHAR)"
    tolerant = line_offset is not None
    host_expr = f"COALESCE({text('host')}, {sql_literal(host)})"
    uuid_expr = f"COALESCE({text('uuid')}, {host_expr} || ':' || {text('index')})"
    ts, ts_raw = typed_sql("ts", cols, "ts", tolerant)
    items = [f"{ts} AS ts",
             f"{uuid_expr} AS gpu_uuid", f"{text('index')} AS gpu_index", f"{text('name')} AS name",
             f"{host_expr} AS host", f"{text('mig')} AS mig_mode"]
    unparsed = {"ts": ts_raw}
    for role, name in NUMERIC.items():
        typed, raw = typed_sql(role, cols, "number", tolerant) if role in cols else ("NULL", None)
        items.append(f"CAST({typed} AS DOUBLE) AS {name}")
        unparsed[name] = raw
    if tolerant:
        items += [f"{raw or 'CAST(NULL AS VARCHAR)'} AS __unparsed_{name}" for name, raw in unparsed.items()]
        items.append("__line")
    return f"SELECT {', '.join(items)} FROM {_relation(csv_path, fields, cols, line_offset)}"


def sample_labels(fields: list[str], cols: dict[str, int], roles: dict[str, str]) -> dict[str, str]:
    """sample column -> the log's header for it (messages), ``__unparsed_*`` columns included."""
    labels = {column: fields[cols[role]] for role, column in roles.items() if role in cols}
    return {**labels, **{f"__unparsed_{column}": label for column, label in labels.items()}}


def _diagnose(con: duckdb.DuckDBPyConnection, source: str, path: str, parts: list[tuple[str, list[str], dict]]) -> str | None:
    """After a failed parse, the column and first value that is neither a number/time nor N/A."""
    for csv_path, fields, cols in parts:
        relation = _relation(csv_path, fields, cols)
        checks = {"ts": f"{value_sql(cols['ts'])} IS NOT NULL AND try_strptime({value_sql(cols['ts'])}, {TIMESTAMP_FORMAT}) IS NULL"}
        checks |= {role: f"{value_sql(cols[role])} IS NOT NULL AND TRY_CAST({number_sql(cols[role])} AS DOUBLE) IS NULL"
                   for role in NUMERIC if role in cols}
        for role, bad in checks.items():
            value = con.execute(f"SELECT any_value(trim(c{cols[role]})) FROM {relation} WHERE {bad}").fetchall()[0][0]
            if value is not None:
                kind = "a time (YYYY/MM/DD HH:MM:SS.mmm)" if role == "ts" else "a number or an N/A marker"
                return f"{source}: file {path}: column {fields[cols[role]]!r} has value {value!r}, which is not {kind}"
    return None


def _parse_file(con: duckdb.DuckDBPyConnection, source: str, path: str, out_path: Path,
                host_column: str | None, mode: str = validate.FAIL, run_id: str = "") -> tuple[dict[str, Any], str | None]:
    """Write the log's samples to ``out_path``; returns (the days (slice values) and last sample
    time, the SELECT of its rejected rows under skip_rows)."""
    with tempfile.TemporaryDirectory(prefix="nvsmi-") as tmp_dir:
        parts = [(csv_path, fields, _column_map(source, path, fields, host_column), offset)
                 for csv_path, fields, offset in split_by_header(source, path, tmp_dir)]

        def samples(numbered: bool) -> str:
            return " UNION ALL ".join(_segment_select(p, f, c, file_host(path), o if numbered else None)
                                      for p, f, c, o in parts)
        labels = sample_labels(parts[0][1], parts[0][2], {"ts": "ts", **NUMERIC})
        parsed, rows, rejects = write_samples(con, source, path, out_path, samples, labels,
                                              lambda: _diagnose(con, source, path, [p[:3] for p in parts]),
                                              mode, run_id)
    if not rows:
        log.warning("%s: file %s holds a header but no samples yet", source, path)
    return parsed, rejects


def rollup_sql(con: duckdb.DuckDBPyConnection, sample_files: list[str], days: list[str], source: str,
               run_id: str) -> str:
    """Hourly rows of gpu_metrics_hourly for ``days`` from the sample files (attributed by the load)."""
    if not sample_files:
        return "SELECT * FROM gpu_metrics_hourly WHERE false"
    parquet = f"read_parquet([{', '.join(sql_literal(f) for f in sample_files)}])"
    day_list = ", ".join(sql_literal(d) for d in days)
    none = "CAST(NULL AS VARCHAR)"
    samples = (f"(SELECT ts, gpu_uuid, {none} AS mig_instance, name, host, {none} AS resource_hint, "
               f"{none} AS provider_id, {none} AS namespace, {none} AS pod, {none} AS container, util, "
               f"CAST(NULL AS DOUBLE) AS gr_active, "
               f"CAST(NULL AS DOUBLE) AS sm_active, CAST(NULL AS DOUBLE) AS tensor_active, mem_used_mib, "
               f"CAST(NULL AS DOUBLE) AS mem_free_mib, CAST(NULL AS DOUBLE) AS mem_reserved_mib, mem_total_mib, "
               f"power_w FROM {parquet} WHERE CAST(date_trunc('day', ts) AS VARCHAR) IN ({day_list}))")
    return metrics_store.rollup_sql(con, samples, source=source, run_id=run_id)


GPU = "query-gpu"  # the kind of a --query-gpu log in the source's state


def _kind(entry: dict[str, Any]) -> str:
    return entry.get("kind", GPU)  # state saved before compute-apps logs were read has no kind


def _sample_path(folder: Path, path: str, kind: str = GPU) -> Path:
    name = f"{hashlib.sha1(path.encode()).hexdigest()}.parquet"
    return folder / name if kind == GPU else folder / kind / name


class NvidiaSmiCsv:
    meta = IngestorMeta(
        name="nvidia_smi_csv",
        target_table="gpu_metrics_hourly",
        key=("source", "hour", "gpu_uuid", "mig_instance"),
        slice_expr="CAST(date_trunc('day', \"hour\") AS VARCHAR)",
        source_column="source",
        cursor="file fingerprints (size, mtime)",
        lookback=timedelta(0),
        default_schedule="*/15 * * * *",
        required_keys=("path",),
        optional_keys=("resource_map", "host_column", "on_invalid"),
        description="nvidia-smi --query-gpu CSV logs (as written by -l N), rolled up hourly per GPU; "
                    "--query-compute-apps logs among them, hourly per process into gpu_processes_hourly",
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        from ingest import nvidia_smi_apps as apps  # imported here: it builds on this module's parsing helpers

        previous: dict[str, Any] = ctx.state.get("files", {})
        files = expand_paths(ctx.source, ctx.options["path"], ctx.base_dir)
        if not files:
            raise IngestError(f"{ctx.source}: no file matches path {ctx.options['path']!r}")
        changed, removed = changed_files(files, previous)
        folder = metrics_store.samples_dir(ctx)  # a log whose samples file went missing is read again
        changed += [p for p in files if p in previous and p not in changed
                    and not _sample_path(folder, p, _kind(previous[p])).exists()]
        resource_map = metrics_store.string_table(ctx, "resource_map", 'host = "ResourceId"')
        rules = metrics_store.rules_batches(ctx, resource_map)
        if not changed and not removed:
            return FetchResult(rules, ctx.state, watermark=ctx.state.get("watermark"),
                               skipped_reason="no new or changed files")
        host_column = ctx.options.get("host_column")
        entries = {path: previous[path] for path in files if path in previous}
        affected: dict[str, set[str]] = {GPU: set(), apps.KIND: set()}  # log kind -> days to roll up again
        mode = validate.on_invalid(ctx)
        rejected: list[str] = []
        for path in changed:
            fp = fingerprint(path)  # before reading: a log growing meanwhile is read again next run
            old = previous.get(path, {})
            affected[_kind(old)] |= set(old.get("days", []))
            kind = apps.KIND if apps.is_apps_log(path) else GPU
            parse = apps.parse_file if kind == apps.KIND else _parse_file
            parsed, rejects = parse(ctx.con, ctx.source, path, _sample_path(folder, path, kind), host_column, mode,
                                    ctx.run_id)
            rejected += [rejects] if rejects else []
            if kind != _kind(old):
                _sample_path(folder, path, _kind(old)).unlink(missing_ok=True)
            entries[path] = {"fp": fp, "kind": kind, **parsed}
            affected[kind] |= set(parsed["days"])
        for path in removed:
            affected[_kind(previous[path])] |= set(previous[path].get("days", []))
            _sample_path(folder, path, _kind(previous[path])).unlink(missing_ok=True)
        watermark = max((e["last"] for e in entries.values() if e.get("last")), default=None)
        state = {"files": entries, "watermark": watermark}
        rollups = {GPU: ("gpu_metrics_hourly", rollup_sql), apps.KIND: (apps.TABLE, apps.rollup_sql)}
        batches = list(rules)
        for kind, (table, rollup) in rollups.items():
            if not affected[kind]:
                continue
            days = sorted(affected[kind])
            sample_files = [str(_sample_path(folder, p, kind)) for p, e in sorted(entries.items())
                            if _kind(e) == kind and affected[kind] & set(e["days"])]
            sql = rollup(ctx.con, sample_files, days, ctx.source, ctx.run_id)
            batches.append(Batch(table=table, data=sql, slices=days))
            if kind == apps.KIND:  # the processes' presence per GPU-hour, for the shared-GPU chargeback
                batches.append(Batch(table="gpu_workloads_hourly", slices=days,
                                     data=apps.workloads_sql(sample_files, days, ctx.source, ctx.run_id)))
        if mode == validate.SKIP_ROWS and changed:  # each log read replaces its previous rejects
            data = " UNION ALL ".join(f"({r})" for r in rejected) if rejected else None
            batches.append(validate.rejects_batch(data, changed))
        return FetchResult(batches, state, watermark=watermark)


INGESTORS = [NvidiaSmiCsv]
