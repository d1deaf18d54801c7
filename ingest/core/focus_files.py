"""``focus_files``: FOCUS 1.0–1.2 cost exports as CSV or Parquet, local paths and globs.

The files stream through DuckDB straight into ``cost_line_items`` (no Python row handling), cast
to the warehouse's exact types: CSV is read with every column as text, so account ids keep their
leading zeros, and money becomes DECIMAL without passing through a float. A file is a set of
(billing period) slices: when a file is new or changed, every period it holds is reloaded from all
the files that hold that period, replacing the old rows in one transaction.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from gpufinops.ingest.core import doctor, file_checks, registry, spec_facts, validate
from gpufinops.ingest.core.files import changed_files, expand_paths, file_format, fingerprint, sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, option
from gpufinops.warehouse import column_types, cost_schema, reference, schema

log = logging.getLogger(__name__)

FOCUS_COLUMN_NAMES = [name for name, _, _ in schema.FOCUS_12_COLUMNS]
EXTENSION_NAMES = ["x_InstanceType", "x_GpuModel", "x_GpuCount", "x_Team"]
DECIMAL_COLUMNS = [name for name, spec_type, _ in schema.FOCUS_12_COLUMNS if spec_type == "Decimal"]
TIMESTAMP_COLUMNS = [name for name, spec_type, _ in schema.FOCUS_12_COLUMNS if spec_type == "Date/Time"]
JSON_COLUMNS = [name for name, spec_type, _ in schema.FOCUS_12_COLUMNS if spec_type == "JSON"]
# An EC2-style instance type inside a charge description ("… Linux g5.4xlarge Instance Hour").
INSTANCE_TYPE_PATTERN = (
    r"\b([a-z][a-z0-9-]*[0-9][a-z0-9-]*\.[0-9]*x?(?:large|metal|medium|small|micro|nano)[a-z0-9-]*)\b"
)


def _source_relation(path: str) -> str:
    if file_format(path) == "parquet":
        return f"read_parquet({sql_literal(path)})"
    return (
        f"read_csv({sql_literal(path)}, header = true, all_varchar = true, "
        f"nullstr = ['NULL', ''], quote = '\"', escape = '\"', auto_detect = true, "
        f"strict_mode = true)"
    )


def _describe(con: duckdb.DuckDBPyConnection, source: str, path: str, name: str | None = None) -> dict[str, str]:
    """The file's columns and their types; a clear error for an unreadable, truncated or empty file,
    or one that names a column twice."""
    name = name or path
    if os.path.getsize(path) == 0:
        raise IngestError(f"{source}: file {name} is empty")
    try:
        header = file_checks.parquet_header(path) if file_format(path) == "parquet" else file_checks.csv_header(path)
        rows = con.execute(f"DESCRIBE SELECT * FROM {_source_relation(path)}").fetchall()
    except (duckdb.Error, OSError, ValueError) as exc:
        if file_checks.csv_error(str(exc)) or "Error when sniffing" in str(exc):
            raise IngestError(file_checks.read_error(source, f"file {name}", exc, path)) from None
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IngestError(f"{source}: file {name} can not be read as {file_format(path)}: {first_line}") from None
    file_checks.check_unique_columns(source, f"file {name}", header)
    return {r[0]: r[1] for r in rows}


CAST_KINDS = {
    **{n: "number" for n in DECIMAL_COLUMNS},
    **{n: "time" for n in TIMESTAMP_COLUMNS},
    **{n: "json" for n in JSON_COLUMNS},
    "x_GpuCount": "integer",
}


def casts(types: dict[str, str]) -> list[validate.Cast]:
    """What the mapping parses: text columns cast to numbers, times, JSON; doubles that must be finite."""
    out = []
    for name, kind in CAST_KINDS.items():
        source_type = types.get(name, "").upper()
        if source_type == "VARCHAR":  # a JSON column's text too: invalid JSON names its row
            out.append(validate.Cast(f'"{name}"', name, kind))
        elif source_type in ("DOUBLE", "FLOAT", "REAL") and kind == "number":
            out.append(validate.Cast(f'"{name}"', name, "finite"))
    return out


def part(
    path: str, types: dict[str, str], tag_keys: tuple[str, ...], kind: str = "file", name: str | None = None
) -> validate.Part:
    """One file's rows for validation and loading (ingest/core/validate.py)."""
    columns = list(types)
    return validate.Part(
        kind,
        name or path,
        _source_relation(path),
        lambda relation, carry: _file_select(path, columns, tag_keys, relation=relation, carry=carry),
        casts(types),
    )


def _check_columns(source: str, path: str, columns: list[str]) -> None:
    missing = [c for c in cost_schema.FOCUS_MANDATORY if c not in columns]
    if missing:
        raise IngestError(f"{source}: file {path} is missing mandatory FOCUS column(s) {', '.join(missing)}")


def _team_expr(tag_keys: tuple[str, ...], columns: list[str]) -> str:
    """The team: an explicit x_Team column, else the first configured tag key present in Tags."""
    parts = []
    if "x_Team" in columns:
        parts.append('CAST("x_Team" AS VARCHAR)')
    if "Tags" in columns and tag_keys:
        paths = ", ".join(sql_literal('$."' + key.replace('"', '\\"') + '"') for key in tag_keys)
        # one JSON parse per row for all keys, then the first key that has a value
        parts.append(
            f'list_filter(json_extract_string(CAST("Tags" AS VARCHAR), [{paths}]), lambda x: x IS NOT NULL)[1]'
        )
    return f"COALESCE({', '.join(parts)})" if parts else "NULL"


def _file_select(
    path: str,
    columns: list[str],
    tag_keys: tuple[str, ...],
    *,
    relation: str | None = None,
    carry: tuple[str, ...] = (),
) -> str:
    """SELECT over one file (or ``relation``, its rows) producing every cost_line_items column with its
    warehouse type, and the ``carry`` columns unchanged."""
    present = set(columns)
    items = []
    for field in cost_schema.COST_LINE_ITEMS:
        name = field.name
        sql_type = column_types.sql_type(field)
        if name in ("x_Source", "x_IngestRunId", "x_Team", "x_InstanceType", "x_GpuModel", "x_GpuCount"):
            continue
        if name in present:
            items.append(f'CAST("{name}" AS {sql_type}) AS "{name}"')
        elif name == "ServiceSubcategory" and "ServiceCategory" in present:
            # FOCUS 1.0/1.1 have no subcategory: the spec's catch-all under the file's own category
            items.append(f"'Other (' || CAST(\"ServiceCategory\" AS VARCHAR) || ')' AS \"{name}\"")
        else:
            items.append(f'CAST(NULL AS {sql_type}) AS "{name}"')
    instance_type = (
        'CAST("x_InstanceType" AS VARCHAR)'
        if "x_InstanceType" in present
        else f"NULLIF(regexp_extract(\"ChargeDescription\", {sql_literal(INSTANCE_TYPE_PATTERN)}, 1), '')"
    )
    items.append(f"{instance_type} AS x_InstanceType")
    items.append(
        ('CAST("x_GpuModel" AS VARCHAR)' if "x_GpuModel" in present else "CAST(NULL AS VARCHAR)") + " AS x_GpuModel"
    )
    items.append(
        ('CAST("x_GpuCount" AS INTEGER)' if "x_GpuCount" in present else "CAST(NULL AS INTEGER)") + " AS x_GpuCount"
    )
    items.append(f"{_team_expr(tag_keys, columns)} AS x_Team")
    items += [f'"{c}"' for c in carry]
    return f"SELECT {', '.join(items)} FROM {relation or _source_relation(path)}"


def billing_periods(
    con: duckdb.DuckDBPyConnection, source: str, p: validate.Part, skip_rows: bool = False
) -> list[str]:
    """The billing periods a file holds (its slices). With skip_rows, rows whose period is empty or
    not a time are left to the row checks (they are quarantined, not loaded)."""
    cast = "TRY_CAST" if skip_rows else "CAST"
    try:
        rows = con.execute(
            f'SELECT DISTINCT CAST({cast}("BillingPeriodStart" AS TIMESTAMPTZ) AS VARCHAR) FROM {p.relation}'
        ).fetchall()
    except duckdb.Error as exc:
        explained = validate.explain(con, source, [p], [[]], exc)
        raise IngestError(explained or file_checks.read_error(source, p.where(), exc)) from None
    if any(r[0] is None for r in rows) and not skip_rows:
        first = con.execute(
            f'SELECT __row FROM {validate.numbered(p.relation)} WHERE "BillingPeriodStart" IS NULL ORDER BY __row LIMIT 1'
        ).fetchall()
        at = f"row {first[0][0]}: " if first else ""
        raise IngestError(
            f"{source}: {p.where()}: {at}column BillingPeriodStart is empty (a FOCUS line needs its period)"
        )
    return sorted(r[0] for r in rows if r[0] is not None)


@dataclass(frozen=True, kw_only=True)
class FocusFilesOptions(OnInvalidOptions):
    path: str | list[str] = option(doc="a glob or a list of globs of FOCUS CSV (.csv, .csv.gz) or Parquet files")


class FocusFiles:
    meta = registry.IngestorMeta(
        **spec_facts.LOCAL_FILES,
        name="focus_files",
        target_table="cost_line_items",
        key=(
            "x_Source",
            "BillingPeriodStart",
            "ChargePeriodStart",
            "ResourceId",
            "SkuPriceId",
            "ChargeCategory",
            "ChargeDescription",
        ),
        slice_expr='CAST("BillingPeriodStart" AS VARCHAR)',
        source_column="x_Source",
        default_schedule="15 */6 * * *",
        options=FocusFilesOptions,
        time_range=True,
        description="FOCUS 1.0–1.2 CSV (`.csv`, `.csv.gz`) or Parquet exports (local paths and globs)",
        freshness=registry.Freshness(kind="cost", lag_hours=48.0),
        doctor=doctor.path_files,
        init=("focus_path",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        previous: dict[str, Any] = ctx.state.get("files", {})
        files = expand_paths(ctx.source, ctx.options.path, ctx.base_dir)
        if not files:
            raise IngestError(f"{ctx.source}: no file matches path {ctx.options.path!r}")
        window = ctx.window
        ranged = window.ranged  # the cursor is file fingerprints, not a time: a range selects billing periods
        # --since/--until reloads the periods in range from every file, leaving the cursor alone
        changed, removed = (files, []) if ranged else changed_files(files, previous)
        if not changed and not removed:
            return FetchResult.unchanged(ctx.state, "no new or changed files")
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        columns: dict[str, dict[str, str]] = {}
        periods: dict[str, list[str]] = {}
        for path in changed:
            columns[path] = _describe(ctx.con, ctx.source, path)
            _check_columns(ctx.source, path, list(columns[path]))
            periods[path] = billing_periods(
                ctx.con, ctx.source, part(path, columns[path], ctx.team_tag_keys), skip_rows
            )
            if not periods[path] and not skip_rows:
                raise IngestError(f"{ctx.source}: file {path} holds no rows")
        affected = {p for path in changed for p in periods[path]}
        # periods a changed or removed file held before: rows there may have been withdrawn
        affected |= {p for path in changed + removed for p in previous.get(path, {}).get("periods", [])}
        if ranged:
            affected = {p for p in affected if window.holds_period(datetime.fromisoformat(p.replace("+00", "+00:00")))}
            if not affected:
                return FetchResult.unchanged(ctx.state, "no billing period in the requested range")
        # Unchanged files that share an affected period are re-read so the slice is whole.
        for path in files:
            if path not in columns and affected & set(previous.get(path, {}).get("periods", [])):
                columns[path] = _describe(ctx.con, ctx.source, path)
                _check_columns(ctx.source, path, list(columns[path]))
                periods[path] = previous[path]["periods"]
        read = sorted(columns)
        if not read:  # only withdrawn files whose periods no other file holds: delete them
            batch = Batch(table="cost_line_items", data=None, slices=sorted(affected))
            new_files = {path: previous[path] for path in files}
            return FetchResult(
                [batch],
                {"files": new_files, "watermark": ctx.state.get("watermark")},
                watermark=ctx.state.get("watermark"),
            )
        period_list = ", ".join(sql_literal(p) for p in sorted(affected))

        def enrich(union: str) -> str:
            return (
                f"SELECT u.* REPLACE (COALESCE(u.x_GpuModel, it.gpu_model) AS x_GpuModel, "
                f"COALESCE(u.x_GpuCount, it.gpu_count) AS x_GpuCount), "
                f"{sql_literal(ctx.source)} AS x_Source, {sql_literal(ctx.run_id)} AS x_IngestRunId "
                f"FROM ({union}) u LEFT JOIN {reference.INSTANCE_GPUS_SQL} it "
                f"ON it.instance_type = u.x_InstanceType "
                f"WHERE CAST(u.BillingPeriodStart AS VARCHAR) IN ({period_list})"
            )

        parts = [part(path, columns[path], ctx.team_tag_keys) for path in read]
        sql, rejects, explain = validate.cost_rows(ctx, parts, enrich)
        new_files = {
            path: {"fp": fingerprint(path), "periods": periods.get(path, previous.get(path, {}).get("periods", []))}
            for path in files
        }
        watermark = max((p for f in new_files.values() for p in f["periods"]), default=None)
        batches = [Batch(table="cost_line_items", data=sql, slices=sorted(affected), diagnose=explain)]
        batches += [rejects] if rejects else []
        if ranged:
            return FetchResult(batches, ctx.state, watermark=ctx.state.get("watermark"))
        return FetchResult(batches, {"files": new_files, "watermark": watermark}, watermark=watermark)


INGESTORS = [FocusFiles]
