"""Billing export rows from files: what users who export their BigQuery billing table to storage have.

* JSONL (``.json``/``.jsonl``, optionally ``.gz``): BigQuery's ``NEWLINE_DELIMITED_JSON`` extract, nested
  as in the table (``credits`` a list of objects, ``labels`` a list of ``{key, value}``);
* Parquet (``.parquet``): BigQuery's ``PARQUET`` extract, nested the same way;
* flattened CSV (``.csv``): one column per leaf (``service.description``, ``invoice.month``) with the
  repeated fields as Python/JSON list literals, the shape koku and pandas' ``json_normalize`` write.

The deprecated Cloud Billing *file export* CSV (``Account ID,Line Item,…,Measurement1,…``; Google
ended it in 2019) is recognised and refused: it has no SKU ids, labels by resource or credits by type.
Each reader returns a DuckDB relation and its Arrow schema for :func:`gcp_export_mapping.conform_select`.
"""

from __future__ import annotations

import ast
import csv
import gzip
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.gcp.gcp_export_mapping import CANONICAL

LEGACY_FILE_EXPORT_COLUMNS = {"Account ID", "Line Item", "Measurement1", "Project Number"}
FLAT_REQUIRED = ("billing_account_id", "usage_start_time", "cost", "sku.description")
LIST_FIELDS = ("labels", "system_labels", "project.labels", "credits")
SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".parquet", ".csv", ".csv.gz")


def _json_type(kind) -> str:
    """DuckDB type for reading a canonical column from JSON: money and times as text (exact, any format)."""
    if isinstance(kind, str):
        return {
            "s": "VARCHAR",
            "t": "VARCHAR",
            "m": "VARCHAR",
            "f": "DOUBLE",
            "kv": "STRUCT(key VARCHAR, value VARCHAR)[]",
        }[kind]
    if isinstance(kind, tuple):
        return _json_type(kind[1]) + "[]"
    return "STRUCT(" + ", ".join(f'"{k}" {_json_type(v)}' for k, v in kind.items()) + ")"


def _arrow_text_type(kind) -> pa.DataType:
    if isinstance(kind, str):
        if kind == "kv":
            return pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
        return pa.float64() if kind == "f" else pa.string()
    if isinstance(kind, tuple):
        return pa.list_(_arrow_text_type(kind[1]))
    return pa.struct([(k, _arrow_text_type(v)) for k, v in kind.items()])


FLAT_SCHEMA = pa.schema([(name, _arrow_text_type(kind)) for name, kind in CANONICAL.items()])


def file_kind(path: str) -> str:
    name = path.lower()
    if name.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    raise IngestError(f"file {path}: unknown format (expected .jsonl, .json, .parquet or .csv, optionally .gz)")


def _open_text(path: str):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def _list_literal(source: str, path: str, line: int, column: str, text: str) -> list:
    text = text.strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise IngestError(
                f"{source}: file {path} line {line}: column {column} is not a list ({text[:60]!r})"
            ) from None
    if not isinstance(value, list):
        raise IngestError(f"{source}: file {path} line {line}: column {column} is not a list ({text[:60]!r})")
    return [
        {k: None if v is None else (repr(v) if isinstance(v, float) else str(v)) for k, v in item.items()}
        for item in value
        if isinstance(item, dict)
    ]


def _nest(row: dict[str, str], source: str, path: str, line: int) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for column, text in row.items():
        if column is None:
            raise IngestError(f"{source}: file {path} line {line} has more fields than the header")
        value: Any = _list_literal(source, path, line, column, text or "") if column in LIST_FIELDS else (text or None)
        head, _, leaf = column.partition(".")
        if leaf:
            nested.setdefault(head, {})[leaf] = value
        else:
            nested[head] = value
    rate = nested.get("currency_conversion_rate")
    nested["currency_conversion_rate"] = float(rate) if rate else None
    return nested


def read_flat_csv(source: str, path: str) -> pa.Table:
    """A flattened-CSV export as an Arrow table of the canonical columns (leaves as text: exact)."""
    try:
        return _read_flat_csv(source, path)
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{source}: file {path}: a byte sequence that is not UTF-8 at byte {exc.start} of a line "
            f"(the file must be UTF-8 encoded)"
        ) from None
    except csv.Error as exc:
        raise IngestError(f"{source}: file {path} is not valid CSV: {exc}") from None


def _read_flat_csv(source: str, path: str) -> pa.Table:
    from gpufinops.ingest.core.file_checks import check_unique_columns

    with _open_text(path) as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        if header and header[0].startswith("\ufeff"):
            header[0] = header[0][1:]
            reader.fieldnames = header
        check_unique_columns(source, f"file {path}", header)
        if LEGACY_FILE_EXPORT_COLUMNS <= set(header):
            raise IngestError(
                f"{source}: file {path} is a Cloud Billing file export (CSV with Account ID, Line Item, "
                f"Measurement1…), deprecated by Google in 2019 and not supported: export billing data "
                f"to BigQuery and read it with gcp_billing_export (project, dataset, table) or from "
                f"its JSONL/Parquet extract"
            )
        missing = [c for c in FLAT_REQUIRED if c not in header]
        if missing:
            raise IngestError(
                f"{source}: file {path} is not a BigQuery billing export: missing column(s) {', '.join(missing)}"
            )
        rows = [
            _nest(_aligned(row, source, path, reader.line_num, len(header)), source, path, i + 2)
            for i, row in enumerate(reader)
        ]
    return pa.Table.from_pylist(rows, schema=FLAT_SCHEMA)


def _aligned(row: dict[str, str], source: str, path: str, line: int, width: int) -> dict[str, str]:
    """A CSV row with as many fields as the header: a short or long line (a truncated write, a stray comma)
    would load its values under the wrong columns, or as empty ones, so it is refused naming the line."""
    fields: dict[Any, Any] = row  # csv.DictReader: a long line's rest under the key None, a short one's as None
    count = width - sum(1 for k, v in fields.items() if k is not None and v is None) + len(fields.get(None) or [])
    if count != width:
        raise IngestError(
            f"{source}: file {path}, line {line}: {count} field(s) where the header has {width}: "
            f"{'a truncated or garbage line' if count < width else 'a stray delimiter or unquoted comma'}"
        )
    return row


def relation(con: duckdb.DuckDBPyConnection, source: str, path: str) -> tuple[str, pa.Schema]:
    """(DuckDB relation over the file, its Arrow schema); a clear error for an unreadable or foreign file."""
    kind = file_kind(path)
    if Path(path).stat().st_size == 0:
        raise IngestError(f"{source}: file {path} is empty")
    if kind == "csv":
        table = read_flat_csv(source, path)
        name = "_gcp_flat_" + hashlib.sha256(path.encode()).hexdigest()[:16]
        con.register(name, table)
        return name, table.schema
    if kind == "jsonl":
        columns = "{" + ", ".join(f"{sql_literal(n)}: {sql_literal(_json_type(k))}" for n, k in CANONICAL.items()) + "}"
        rel = f"read_json({sql_literal(path)}, format = 'newline_delimited', columns = {columns})"
    else:
        rel = f"read_parquet({sql_literal(path)})"
        from gpufinops.ingest.core.file_checks import check_unique_columns, parquet_header

        try:
            check_unique_columns(source, f"file {path}", parquet_header(path))
        except (OSError, ValueError) as exc:  # pyarrow: not a Parquet file, truncated
            raise IngestError(f"{source}: file {path} can not be read as parquet: {exc}") from None
    try:
        schema = con.sql(f"SELECT * FROM {rel} LIMIT 0").to_arrow_table().schema
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IngestError(f"{source}: file {path} can not be read as {kind}: {first}") from None
    if "cost" not in schema.names or "usage_start_time" not in schema.names:
        raise IngestError(f"{source}: file {path} is not a BigQuery billing export (no cost / usage_start_time column)")
    return rel, schema


def to_jsonl(rows: list[dict]) -> bytes:
    """Rows (nested dicts, as BigQuery extracts them) as newline-delimited JSON bytes."""
    out = io.StringIO()
    for row in rows:
        out.write(json.dumps(row, sort_keys=True, default=str) + "\n")
    return out.getvalue().encode()
