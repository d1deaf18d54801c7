"""The nvidia-smi CSV log format, shared by ``nvidia_smi_csv`` (``--query-gpu``) and ``nvidia_smi_apps``
(``--query-compute-apps``): headers with units, the values' ``[N/A]`` markers and units, the host of a
log, and the SQL that reads a log's fields as text and casts them (see ``nvidia_smi_csv``'s docstring).
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import duckdb

from gpufinops.ingest.core import file_checks, validate
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.validate_metrics import SampleFile, write_samples

log = logging.getLogger(__name__)

# Role -> accepted header names (without their " [unit]"), first present wins.
COLUMNS = {
    "ts": ("timestamp",),
    "util": ("utilization.gpu",),
    "uuid": ("uuid", "gpu_uuid"),
    "index": ("index",),
    "name": ("name", "gpu_name"),
    "mem_used": ("memory.used",),
    "mem_total": ("memory.total",),
    "power": ("power.draw", "power.draw.instant", "power.draw.average"),
    "mig": ("mig.mode.current",),
    "host": ("host", "hostname"),
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
                line = chunk[chunk.rfind(b"\n", 0, hit) + 1 : end].strip()
                headers += [line] if line not in headers else []
                hit = chunk.find(marker, end)
    return headers


def split_by_header(
    source: str, path: str, tmp_dir: str, marker: bytes = GPU_MARKER
) -> list[tuple[str, list[str], int]]:
    """(csv file, header fields, lines of the log before it) per distinct header; a log whose header
    changes is split. Lines are counted without blank ones, as the CSV reader counts them.

    ``marker`` is a column name every header holds (and no data line): it finds repeated headers.
    """
    headers = _header_lines(path, marker)
    if not headers:
        raise IngestError(f"{source}: file {path} is empty (expected an nvidia-smi --format=csv header)")
    fields = [header_fields(h) for h in headers]
    for names in fields:
        file_checks.check_unique_columns(source, f"file {path}", names)
    if len(headers) == 1:
        check_field_counts(source, path, [(path, fields[0], 0)])
        return [(path, fields[0], 0)]
    log.info("%s: file %s changes its header %d times; reading it in parts", source, path, len(headers) - 1)
    segments: list[tuple[str, list[str], int]] = []
    out: BinaryIO | None = None
    with _open_lines(path) as lines:
        for number, line in enumerate(ln for ln in lines if ln.strip()):
            is_header = number == 0 or marker in line
            if is_header and (not segments or header_fields(line) != segments[-1][1]):
                if out:
                    out.close()
                segments.append((os.path.join(tmp_dir, f"part{len(segments)}.csv"), header_fields(line), number))
                out = open(segments[-1][0], "wb")
            assert out is not None  # the first line is a header: a part is open
            out.write(line.rstrip(b"\r\n") + b"\n")
    if out is not None:
        out.close()
    check_field_counts(source, path, segments)
    return segments


def check_field_counts(source: str, path: str, segments: list[tuple[str, list[str], int]]) -> None:
    """Refuses a line with more or fewer fields than its header (a value would land in the wrong column),
    naming the log's line (blank lines not counted) and its start. Only the log's last line may be short:
    nvidia-smi was writing it (it is skipped as partly written)."""
    con = duckdb.connect()
    try:
        for number, (csv_path, fields, offset) in enumerate(segments):
            lines = (
                f"SELECT row_number() OVER () AS n, line, count(*) OVER () AS total FROM read_csv("
                f"{sql_literal(csv_path)}, header = false, delim = '\x02', quote = '', escape = '', "
                "auto_detect = false, columns = {'line': 'VARCHAR'}, strict_mode = false, nullstr = '\x01')"
            )
            count = "(length(line) - length(replace(line, ',', '')) + 1)"
            last_may_be_short = f"(n = total AND {count} < {len(fields)})" if number == len(segments) - 1 else "false"
            bad = con.execute(
                f"SELECT n, line, {count} FROM ({lines}) WHERE {count} <> {len(fields)} AND NOT {last_may_be_short} "
                "ORDER BY n LIMIT 1"
            ).fetchall()
            if bad:
                line_no, text, found = bad[0]
                raise IngestError(
                    f"{source}: file {path}: line {int(line_no) + offset} has {found} fields where the header has "
                    f"{len(fields)} ({text[:60]!r}): its values would land in the wrong columns"
                )
    finally:
        con.close()


def roles_found(
    source: str, path: str, bases: list[str], columns: Mapping[str, Sequence[str]], host_column: str | None
) -> dict[str, int]:
    """Role -> position in the header (``bases``) of the first of the role's names it holds, and ``host`` ->
    the configured ``host_column``'s; an error naming the file when the header lacks the host column."""
    cols = {
        role: bases.index(found)
        for role, names in columns.items()
        if (found := next((name for name in names if name in bases), None)) is not None
    }
    if host_column:
        if host_column not in bases:
            raise IngestError(f"{source}: file {path} has no column {host_column!r} (the configured host_column)")
        cols["host"] = bases.index(host_column)
    return cols


def column_map(source: str, path: str, fields: list[str], host_column: str | None) -> dict[str, int]:
    """Role -> position in the header; an error naming the file and the missing column."""
    cols = roles_found(source, path, base_names(fields), COLUMNS, host_column)
    for role, column in (("ts", "timestamp"), ("util", "utilization.gpu")):
        if role not in cols:
            raise IngestError(
                f"{source}: file {path} has no {column} column (nvidia-smi --query-gpu must "
                f"include timestamp, uuid or index, and utilization.gpu)"
            )
    if "uuid" not in cols and "index" not in cols:
        raise IngestError(f"{source}: file {path} has no uuid column (nor index) to identify the GPU")
    return cols


def value_sql(i: int) -> str:
    """Field i as text, NULL for nvidia-smi's ``[N/A]``-style markers and empty fields."""
    v = f"trim(c{i})"
    return f"(CASE WHEN {v} IN ('', 'N/A') OR {v} LIKE '[%]' THEN NULL ELSE {v} END)"


def number_sql(i: int) -> str:
    return f"regexp_replace({value_sql(i)}, {_UNIT_SUFFIX}, '')"


def relation_sql(csv_path: str, fields: list[str], cols: dict[str, int], line_offset: int | None = None) -> str:
    return data_rows(csv_path, fields, cols["util"], line_offset)


def data_rows(csv_path: str, fields: list[str], header_column: int, line_offset: int | None = None) -> str:
    """The log's data rows (c0, c1, … as text): repeated headers (``header_column`` holding its own
    name) and a partly written (padded) last line left out. With ``line_offset``, each row also
    holds its line number in the log (``__line``; validation's slow path and skip_rows)."""
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(fields)))
    relation = (
        f"read_csv({sql_literal(csv_path)}, header = false, delim = ',', quote = '', "
        f"escape = '', auto_detect = false, columns = {{{columns}}}, null_padding = true, "
        f"strict_mode = false, nullstr = '\x01')"
    )
    if line_offset is not None:
        relation = f"(SELECT *, row_number() OVER () + {int(line_offset)} AS __line FROM {relation})"
    return (
        f"(SELECT * FROM {relation} WHERE c{len(fields) - 1} IS NOT NULL "
        f"AND trim(c{header_column}) <> {sql_literal(fields[header_column])})"
    )


def typed_sql(role: str, cols: dict[str, int], kind: str, tolerant: bool) -> tuple[str, str | None]:
    """(the typed value of ``role``, with ``tolerant`` also the raw text of a value that does not parse)."""
    raw = value_sql(cols[role])
    if kind == "ts":
        typed = f"{'try_strptime' if tolerant else 'strptime'}({raw}, {TIMESTAMP_FORMAT})"
        return f"timezone('UTC', {typed})", (
            f"CASE WHEN {raw} IS NOT NULL AND {typed} IS NULL THEN trim(c{cols[role]}) END" if tolerant else None
        )
    target = "INTEGER" if kind == "integer" else "DOUBLE"
    value = raw if kind == "integer" else number_sql(cols[role])
    typed = f"{'TRY_CAST' if tolerant else 'CAST'}({value} AS {target})"
    return typed, (
        f"CASE WHEN {raw} IS NOT NULL AND {typed} IS NULL THEN trim(c{cols[role]}) END" if tolerant else None
    )


def segment_select(
    csv_path: str, fields: list[str], cols: dict[str, int], host: str, line_offset: int | None = None
) -> str:
    """The segment's samples; with ``line_offset`` (skip_rows, or finding a bad line) also each
    sample's line, and values that do not parse as NULL with their text in ``__unparsed_*``."""

    def text(role: str) -> str:
        return value_sql(cols[role]) if role in cols else "CAST(NULL AS VARCHAR)"

    tolerant = line_offset is not None
    host_expr = f"COALESCE({text('host')}, {sql_literal(host)})"
    uuid_expr = f"COALESCE({text('uuid')}, {host_expr} || ':' || {text('index')})"
    ts, ts_raw = typed_sql("ts", cols, "ts", tolerant)
    items = [
        f"{ts} AS ts",
        f"{uuid_expr} AS gpu_uuid",
        f"{text('index')} AS gpu_index",
        f"{text('name')} AS name",
        f"{host_expr} AS host",
        f"{text('mig')} AS mig_mode",
    ]
    unparsed = {"ts": ts_raw}
    for role, name in NUMERIC.items():
        typed, raw = typed_sql(role, cols, "number", tolerant) if role in cols else ("NULL", None)
        items.append(f"CAST({typed} AS DOUBLE) AS {name}")
        unparsed[name] = raw
    if tolerant:
        items += [f"{raw or 'CAST(NULL AS VARCHAR)'} AS __unparsed_{name}" for name, raw in unparsed.items()]
        items.append("__line")
    return f"SELECT {', '.join(items)} FROM {relation_sql(csv_path, fields, cols, line_offset)}"


def sample_labels(fields: list[str], cols: dict[str, int], roles: dict[str, str]) -> dict[str, str]:
    """sample column -> the log's header for it (messages), ``__unparsed_*`` columns included."""
    labels = {column: fields[cols[role]] for role, column in roles.items() if role in cols}
    return {**labels, **{f"__unparsed_{column}": label for column, label in labels.items()}}


# (the segment's CSV file, its header's fields, its header's role -> position, the log's lines before it)
Segment = tuple[str, list[str], dict[str, int], int]


@dataclass(frozen=True)
class LogKind:
    """How a kind of nvidia-smi log (``--query-gpu``, ``--query-compute-apps``) is read: the temporary
    folder's prefix, the column its headers name (``marker(path)``, finding repeated headers), its
    header's roles (``column_map``), a segment's samples (``segment_select``), the sample columns its
    messages name by the log's header (role -> column), after a failed parse the first bad value
    (``diagnose(con, source, path, segments)``), and what a log with no sample means (logged at
    ``empty_level``)."""

    tmp_prefix: str
    marker: Callable[[str], bytes]
    column_map: Callable[[str, str, list[str], str | None], dict[str, int]]
    segment_select: Callable[..., str]
    roles: dict[str, str]
    diagnose: Callable[[duckdb.DuckDBPyConnection, str, str, list[Segment]], str | None]
    empty: str
    empty_level: int


def parse_log(
    con: duckdb.DuckDBPyConnection,
    source: str,
    path: str,
    out_path: Path,
    host_column: str | None,
    kind: LogKind,
    mode: str = validate.FAIL,
    run_id: str = "",
) -> tuple[dict[str, Any], str | None]:
    """Write the log's samples, each segment (one header) read as ``kind`` says, to ``out_path``; returns
    (the days (slice values) and last sample time, the SELECT of its rejected rows under skip_rows)."""
    marker = kind.marker(path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=kind.tmp_prefix) as tmp_dir:
        parts: list[Segment] = [
            (csv_path, fields, kind.column_map(source, path, fields, host_column), offset)
            for csv_path, fields, offset in split_by_header(source, path, tmp_dir, marker)
        ]

        def samples(numbered: bool) -> str:
            return " UNION ALL ".join(
                kind.segment_select(p, f, c, file_host(path), o if numbered else None) for p, f, c, o in parts
            )

        labels = sample_labels(parts[0][1], parts[0][2], kind.roles)
        read = SampleFile(path, samples, labels, lambda: kind.diagnose(con, source, path, parts))
        parsed, rows, rejects = write_samples(con, source, read, out_path, mode, run_id)
    if not rows:
        log.log(kind.empty_level, "%s: file %s %s", source, path, kind.empty)
    return parsed, rejects
