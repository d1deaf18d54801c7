"""`gpufinops export focus`: the warehouse's cost line items as a FOCUS 1.2 dataset (Parquet or CSV).

``--focus-version 1.3`` writes FOCUS 1.3 instead, shared GPU lines split into their allocated rows
(:mod:`jobs.export.focus13`); 1.2 is the default.

The columns are the 57 FOCUS 1.2 columns by their spec names, in the spec's order, then the ``x_``
extensions (``x_InstanceType``, ``x_GpuModel``, ``x_GpuCount``, ``x_Team``, ``x_Source``,
``x_IngestRunId``). Money and quantities stay exact: Parquet ``DECIMAL(38,15)``, CSV decimal text
(never a float). Date/Time columns are UTC: Parquet timestamps adjusted to UTC, CSV ISO 8601
``YYYY-MM-DDTHH:MM:SSZ`` (the spec's DateTimeFormat). Tags and SkuPriceDetails are JSON text.

DuckDB streams the rows from the warehouse into the file with one ``COPY (SELECT …) TO``: row
groups are written as they are read (insertion order is not kept, nothing is sorted), so 10M rows
never sit in memory. The warehouse is opened read-only and never created; the file is written
through the one file writer (:mod:`gpufinops.jobs.files`): beside ``--out`` under a temporary name,
renamed when complete, so a failed or killed export leaves no half-written file, and a target that
is the warehouse, a directory, a device or a FIFO is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from gpufinops.jobs import files
from gpufinops.jobs.export import focus13
from gpufinops.models.recommendation import provider_code
from gpufinops.warehouse import cost_schema, schema
from gpufinops.warehouse.fetch import scalar

FORMATS = ("parquet", "csv")
VERSIONS = ("1.2", "1.3")  # 1.2: the default
FOCUS_COLUMNS = tuple(name for name, _, _ in schema.FOCUS_12_COLUMNS)
EXTENSION_COLUMNS = tuple(f.name for f in cost_schema.COST_EXTENSIONS)
EXPORT_COLUMNS = FOCUS_COLUMNS + EXTENSION_COLUMNS
_TIMESTAMPS = {name for name, spec_type, _ in schema.FOCUS_12_COLUMNS if spec_type == "Date/Time"}
_JSON = {name for name, spec_type, _ in schema.FOCUS_12_COLUMNS if spec_type == "JSON"}
CSV_DATETIME = "%Y-%m-%dT%H:%M:%SZ"


class ExportError(ValueError):
    """A bad request (unknown provider, format): the CLI exits 2 on it."""


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None  # ChargePeriodStart >= since
    until: datetime | None = None  # ChargePeriodStart < until
    provider: str | None = None  # a ProviderName, or its short code (aws, gcp, onprem)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _column(name: str, fmt: str, timestamps: set[str] = _TIMESTAMPS, json_columns: set[str] = _JSON) -> str:
    if fmt == "csv" and name in timestamps:
        return f"strftime(timezone('UTC', {_q(name)}), '{CSV_DATETIME}') AS {_q(name)}"
    if name in json_columns:
        return f"CAST({_q(name)} AS VARCHAR) AS {_q(name)}"
    return _q(name)


def provider_names(con: duckdb.DuckDBPyConnection, wanted: str) -> list[str]:
    """The warehouse's ProviderNames that ``wanted`` names (by name, any case, or short code)."""
    names = [
        r[0]
        for r in con.execute(
            'SELECT DISTINCT "ProviderName" FROM cost_line_items WHERE "ProviderName" IS NOT NULL ORDER BY 1'
        ).fetchall()
    ]
    chosen = [n for n in names if n.lower() == wanted.lower() or provider_code(n) == wanted.lower()]
    if not chosen:
        known = ", ".join(f"{n} ({provider_code(n)})" for n in names) or "none: the warehouse holds no cost lines"
        raise ExportError(f"--provider {wanted}: no such provider in the warehouse (it holds: {known})")
    return chosen


def where_sql(con: duckdb.DuckDBPyConnection, filters: Filters) -> str:
    """The WHERE clause of the lines ``filters`` picks ('' for all; COPY takes no bound parameters)."""
    where = []
    if filters.since is not None:
        where.append(f'"ChargePeriodStart" >= CAST({_literal(filters.since.isoformat())} AS TIMESTAMPTZ)')
    if filters.until is not None:
        where.append(f'"ChargePeriodStart" < CAST({_literal(filters.until.isoformat())} AS TIMESTAMPTZ)')
    if filters.provider is not None:
        names = ", ".join(_literal(n) for n in provider_names(con, filters.provider))
        where.append(f'"ProviderName" IN ({names})')
    return f" WHERE {' AND '.join(where)}" if where else ""


def select_sql(con: duckdb.DuckDBPyConnection, fmt: str, filters: Filters, version: str = "1.2") -> str:
    """The SELECT that produces the export's rows (COPY takes no bound parameters: values are literals)."""
    if version == "1.3":
        columns = ", ".join(
            _column(name, fmt, focus13.TIMESTAMPS, focus13.JSON_COLUMNS) for name in focus13.EXPORT_COLUMNS
        )
        return f"SELECT {columns} FROM ({focus13.select_sql(where_sql(con, filters))})"
    columns = ", ".join(_column(name, fmt) for name in EXPORT_COLUMNS)
    return f"SELECT {columns} FROM cost_line_items{where_sql(con, filters)}"


def _copy_options(fmt: str) -> str:
    if fmt == "parquet":
        return "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880"
    return "FORMAT csv, HEADER true, DELIMITER ','"


def export(
    con: duckdb.DuckDBPyConnection,
    out: str | os.PathLike,
    fmt: str = "parquet",
    filters: Filters = Filters(),
    version: str = "1.2",
) -> int:
    """Write the FOCUS ``version`` dataset to ``out``; returns the number of rows written."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt}: not a FOCUS export format (choose {' or '.join(FORMATS)})")
    if version not in VERSIONS:
        raise ExportError(
            f"--focus-version {version}: not a FOCUS version this export writes (choose {' or '.join(VERSIONS)})"
        )
    files.check(out)  # refused before the query is built (the warehouse, a directory, a FIFO, …)
    sql = select_sql(con, fmt, filters, version)
    con.execute("SET preserve_insertion_order = false")  # stream row groups as they come
    with files.replacing(out) as tmp:
        rows = scalar(con.execute(f"COPY ({sql}) TO {_literal(tmp.as_posix())} ({_copy_options(fmt)})"), "COPY")
    return int(rows)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def day_after(value: datetime) -> datetime:
    """``--to`` is inclusive: a date means up to the end of that day."""
    if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
        return value + timedelta(days=1)
    return value
