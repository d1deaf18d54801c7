"""``gcp_billing_export`` with ``push_down = true``: the FOCUS mapping and the hourly rollup run in BigQuery.

A large billing export already lives in BigQuery; copying its rows home is the wrong design past a
certain size. With ``push_down`` the changed usage days are not fetched row by row: one BigQuery
job runs :func:`ingest.gcp.gcp_export_mapping.conform_select` + :func:`~ingest.gcp.gcp_export_mapping.focus_select`
(restricted to the rollup's columns) wrapped in :func:`ingest.core.pushdown.rollup_select` — the very
DuckDB text the local path runs, transpiled by :func:`ingest.core.pushdown.to_dialect` — and only its
result (one row per hour × project × SKU-level key) comes home. The day fingerprints, the
restatement of changed days and the ledger are those of the row path
(:mod:`ingest.gcp.gcp_billing_export`); the bytes BigQuery processed and billed go into the run's
ledger note.
"""

from __future__ import annotations

import hashlib
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.core import pushdown
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.gcp import gcp_common
from gpufinops.ingest.gcp.gcp_export_mapping import conform_select, focus_select

# BigQuery column types as google-cloud-bigquery's to_arrow() gives them (the row path's Arrow), so the
# conform step sees the same source types on both paths.
_SCALARS = {
    "STRING": pa.string(),
    "BYTES": pa.binary(),
    "INTEGER": pa.int64(),
    "INT64": pa.int64(),
    "FLOAT": pa.float64(),
    "FLOAT64": pa.float64(),
    "NUMERIC": pa.decimal128(38, 9),
    "BIGNUMERIC": pa.decimal256(76, 38),
    "BOOLEAN": pa.bool_(),
    "BOOL": pa.bool_(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "DATE": pa.date32(),
    "DATETIME": pa.timestamp("us"),
    "TIME": pa.time64("us"),
    "GEOGRAPHY": pa.string(),
    "JSON": pa.string(),
}

# bqemulator (the tests' BigQuery) reads a bare BIGNUMERIC as DECIMAL(38,5); the tests set this to send
# BIGNUMERIC(p, s), which BigQuery itself refuses in a CAST (see pushdown._bignumeric).
PINNED_DECIMALS = False


def arrow_type(field: Any) -> pa.DataType:
    """One BigQuery ``SchemaField`` as an Arrow type (RECORD → struct, REPEATED → list)."""
    kind = str(field.field_type).upper()
    if kind in ("RECORD", "STRUCT"):
        value: pa.DataType = pa.struct([pa.field(f.name, arrow_type(f)) for f in field.fields])
    elif kind in _SCALARS:
        value = _SCALARS[kind]
    else:
        value = pa.string()  # RANGE, INTERVAL…: not in a billing export; the mapping reads none of them
    return pa.list_(value) if str(field.mode).upper() == "REPEATED" else value


def arrow_schema(fields: list[Any]) -> pa.Schema:
    return pa.schema([pa.field(f.name, arrow_type(f)) for f in fields])


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def rollup_query(
    project: str,
    dataset: str,
    table: str,
    source_schema: pa.Schema,
    days: list[str],
    tag_keys: tuple[str, ...],
    *,
    pinned_decimals: bool = False,
) -> str:
    """The BigQuery text of one run: the export rows of ``days`` (UTC usage days), mapped and rolled up.

    Every output column is cast to STRING: BigQuery's JSON rows carry text anyway, and
    BIGNUMERIC sums then arrive as exact decimal text rather than through a 76-digit Arrow type.
    """
    dates = ", ".join(f"DATE '{day}'" for day in days)
    # the table's columns by name, not *: bqemulator expands * to the columns whose types it can map,
    # which drops every RECORD column (service, sku, project…)
    columns = ", ".join(_ident(name) for name in source_schema.names)
    relation = (
        f"(SELECT {columns} FROM {_ident(project)}.{_ident(dataset)}.{_ident(table)} "
        f"WHERE CAST(usage_start_time AS DATE) IN ({dates}))"
    )
    mapped = focus_select(conform_select(relation, source_schema), tag_keys, only=pushdown.ROLLUP_COLUMNS)
    rollup = pushdown.rollup_select(mapped, remote=True)
    text = ", ".join(f"CAST({_ident(c)} AS VARCHAR) AS {_ident(c)}" for c in pushdown.ROLLUP_COLUMNS)
    return pushdown.to_dialect(f"SELECT {text} FROM ({rollup}) AS rolled", "bigquery", pinned_decimals=pinned_decimals)


def fetch_rollup(backend: Any, days: list[str], tag_keys: tuple[str, ...]) -> tuple[str, int]:
    """Run the rollup of ``days`` as one BigQuery job; a DuckDB SELECT over its (typed) result, and its row count.

    ``backend`` is the row path's BigQuery backend (client, retries, job accounting).
    """
    ctx = backend.ctx
    opts = ctx.options
    table = gcp_table(backend)
    schema = arrow_schema(table.schema)
    names = set(schema.names)
    if not {"usage_start_time", "cost"} <= names:
        raise IngestError(
            f"{ctx.source}: {backend.table} is not a billing export table "
            f"(it lacks {', '.join(sorted({'usage_start_time', 'cost'} - names))})"
        )
    sql = rollup_query(
        str(opts.project), str(opts.dataset), str(opts.table), schema, days, tag_keys, pinned_decimals=PINNED_DECIMALS
    )
    result = backend._query("rollup", sql, arrow=True)
    found = {name.lower(): i for i, name in enumerate(result.column_names)}  # BigQuery names are case-insensitive
    missing = [c for c in pushdown.ROLLUP_COLUMNS if c.lower() not in found]
    if missing:
        raise IngestError(f"{ctx.source}: the BigQuery rollup result lacks column(s) {', '.join(missing)}")
    text = pa.table({c: result.column(found[c.lower()]).cast(pa.string()) for c in pushdown.ROLLUP_COLUMNS})
    view = "_gcp_rollup_" + hashlib.sha256(ctx.run_id.encode()).hexdigest()[:16]
    ctx.con.register(view + "_text", text)
    try:  # cast here, before the load's transaction: a bad value fails the run with nothing written
        typed = ctx.con.sql(pushdown.typed_rollup_select(view + "_text", empty_is_null=False)).to_arrow_table()
    except duckdb.Error as exc:
        raise IngestError(
            f"{ctx.source}: the BigQuery rollup result does not cast to the warehouse types: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from None
    ctx.con.register(view, typed)
    return f"SELECT * FROM {view}", result.num_rows


def gcp_table(backend: Any) -> Any:
    """The export table's metadata (its schema: free, no job)."""
    opts = backend.ctx.options
    table_id = f"{opts.project}.{opts.dataset}.{opts.table}"
    return gcp_common.with_retries(
        backend.ctx.source, f"BigQuery tables.get on {backend.table}", lambda: backend.client.get_table(table_id), opts
    )


def ledger_note(watermark: str | None, backend: Any, rollup_rows: int | None) -> str:
    """The run's ledger text: the watermark and what BigQuery was paid for."""
    rows = f", {rollup_rows:,} rollup rows" if rollup_rows is not None else ""
    return (
        f"{watermark or '-'} (bigquery: {backend.jobs} jobs, {backend.bytes_billed:,} bytes billed, "
        f"{backend.bytes_processed:,} bytes processed{rows})"
    )
