"""``aws_cur`` with ``engine = "athena"``: the hourly rollup runs in Athena over the CUR 2.0 table that
AWS Data Exports registers in Glue; only the rollup comes home.

The query is :func:`ingest.aws.cur_mapping.cur_select` (the same FOCUS mapping as the file path) wrapped
in :func:`ingest.core.pushdown.rollup_select` and transpiled to Trino. Flow: ``StartQueryExecution`` →
poll ``GetQueryExecution`` until a terminal state → page through ``GetQueryResults``. Incremental
by billing period (the table's ``billing_period`` partition): new periods and the newest
``lookback_months`` (AWS restates a month for weeks) are re-queried each run and replace their
slices, exactly as a new delivery does on the file path. A query that ends ``FAILED`` or
``CANCELLED`` fails the run with Athena's reason, and nothing is written.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pyarrow as pa

from gpufinops.ingest.aws import aws_common, cur_mapping
from gpufinops.ingest.aws.aws_cur2_format import CUR2_SCHEMA, period_start
from gpufinops.ingest.core import paging, pushdown
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError

log = logging.getLogger(__name__)

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
PARTITION = "billing_period"


def _duckdb_type(t: pa.DataType) -> str:
    if pa.types.is_map(t):
        return "MAP(VARCHAR, VARCHAR)"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    return "VARCHAR"


# The Glue table's columns as the FOCUS mapping sees them (the CUR 2.0 schema).
TABLE_TYPES = {f.name: _duckdb_type(f.type) for f in CUR2_SCHEMA}


def _ident(name: str, what: str) -> str:
    if not name or not all(c.isalnum() or c in "_-" for c in name):
        raise IngestError(f"{what}: {name!r} is not a valid Athena identifier (letters, digits, _ and -)")
    return '"' + name + '"'


def rollup_query(database: str, table: str, periods: list[str], tag_keys: tuple[str, ...]) -> str:
    """The Trino text Athena runs: the FOCUS mapping + rollup over the chosen billing periods."""
    where = ", ".join(sql_literal(p) for p in periods)
    relation = f"(SELECT * FROM {database}.{table} WHERE {PARTITION} IN ({where}))"
    mapped = cur_mapping.cur_select(relation, list(TABLE_TYPES), TABLE_TYPES, tag_keys, only=pushdown.ROLLUP_COLUMNS)
    return pushdown.to_dialect(pushdown.rollup_select(mapped, remote=True), "athena")


class Athena:
    """One source's Athena session: runs a query to completion and returns its rows as text."""

    def __init__(self, ctx: IngestContext):
        opts = ctx.options  # the aws_cur source's AwsCurOptions
        self.source = ctx.source
        self.client = aws_common.client("athena", ctx.source, opts)
        self.workgroup: str | None = opts.workgroup
        self.output_location: str | None = opts.output_location
        self.catalog: str = opts.catalog
        self.database = str(opts.database or "")
        self.poll_interval: float = opts.poll_interval_s
        self.timeout: float = opts.query_timeout_s
        self.bytes_scanned = 0
        self.queries = 0

    def run(self, sql: str, what: str) -> tuple[list[str], list[list[str | None]]]:
        kwargs: dict[str, Any] = {
            "QueryString": sql,
            "QueryExecutionContext": {"Database": self.database, "Catalog": self.catalog},
            "ClientRequestToken": str(uuid.uuid4()),
        }
        if self.workgroup:
            kwargs["WorkGroup"] = self.workgroup
        if self.output_location:
            kwargs["ResultConfiguration"] = {"OutputLocation": self.output_location}
        try:
            query_id = self.client.start_query_execution(**kwargs)["QueryExecutionId"]
        except Exception as exc:
            if aws_common.is_client_error(exc):
                raise aws_common.describe_error(self.source, f"Athena StartQueryExecution ({what})", exc) from None
            raise
        self.queries += 1
        execution = self._wait(query_id, what)
        self.bytes_scanned += int(execution.get("Statistics", {}).get("DataScannedInBytes") or 0)
        return self._results(query_id, what)

    def _wait(self, query_id: str, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        delay = self.poll_interval
        while True:
            try:
                execution = self.client.get_query_execution(QueryExecutionId=query_id)["QueryExecution"]
            except Exception as exc:
                if aws_common.is_client_error(exc):
                    raise aws_common.describe_error(self.source, f"Athena GetQueryExecution ({what})", exc) from None
                raise
            status = execution.get("Status", {})
            state = status.get("State")
            if state == "SUCCEEDED":
                return execution
            if state in ("FAILED", "CANCELLED"):
                reason = (
                    status.get("StateChangeReason")
                    or status.get("AthenaError", {}).get("ErrorMessage")
                    or "no reason given"
                )
                raise IngestError(f"{self.source}: Athena query {query_id} ({what}) {state.lower()}: {reason}")
            if time.monotonic() > deadline:
                raise IngestError(
                    f"{self.source}: Athena query {query_id} ({what}) still {state} after "
                    f"{self.timeout:.0f} s (query_timeout_s)"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 10.0)

    def _results(self, query_id: str, what: str) -> tuple[list[str], list[list[str | None]]]:
        header: list[str] | None = None
        rows: list[list[str | None]] = []
        try:
            pages = paging.Pages(self.source, f"Athena GetQueryResults of {query_id} ({what})")
            for page in pages.each(self.client.get_paginator("get_query_results").paginate(QueryExecutionId=query_id)):
                result = page["ResultSet"]
                if header is None:
                    info = result.get("ResultSetMetadata", {}).get("ColumnInfo") or []
                    header = [c["Name"] for c in info]
                    page_rows = result.get("Rows", [])
                    # the first row of the first page repeats the column names
                    if page_rows and [d.get("VarCharValue") for d in page_rows[0]["Data"]] == header:
                        page_rows = page_rows[1:]
                else:
                    page_rows = result.get("Rows", [])
                rows.extend([d.get("VarCharValue") for d in r["Data"]] for r in page_rows)
        except Exception as exc:
            if aws_common.is_client_error(exc):
                raise aws_common.describe_error(self.source, f"Athena GetQueryResults ({what})", exc) from None
            raise
        return header or [], rows


def _periods_to_load(ctx: IngestContext, available: list[str], loaded: dict[str, list[str]]) -> list[str]:
    if ctx.window.ranged:  # the file path's rule: whole billing periods overlapping the range
        return [p for p in available if ctx.window.holds_period(period_start(p))]
    if ctx.window.full_refresh or not loaded:
        return list(available)
    # not the runner's time window: Athena partitions are billing periods, and AWS restates the newest
    # ones for weeks, so the newest lookback_months periods are re-read besides those never loaded
    lookback = int(ctx.options.lookback_months)
    newest = sorted(available)[-lookback:] if lookback > 0 else []
    return sorted({p for p in available if p not in loaded} | set(newest))


def fetch(ctx: IngestContext, enrich) -> FetchResult:
    """The Athena engine's fetch: ``enrich(sql)`` adds GPU facts, source and run id as the file path does."""
    opts = ctx.options  # AwsCurOptions.validate(): database and table are set
    database = _ident(str(opts.database), f"{ctx.source}: database")
    table = _ident(str(opts.table), f"{ctx.source}: table")
    athena = Athena(ctx)
    _, found = athena.run(f"SELECT DISTINCT {PARTITION} FROM {database}.{table}", "list billing periods")
    available = sorted(r[0] for r in found if r and r[0])
    loaded: dict[str, list[str]] = ctx.state.get("periods", {})
    periods = _periods_to_load(ctx, available, loaded)
    if not periods:
        return FetchResult(
            [],
            ctx.state,
            watermark=ctx.state.get("watermark"),
            skipped_reason="no billing period in the table" + (" in the requested range" if ctx.window.ranged else ""),
        )
    header, rows = athena.run(
        rollup_query(database, table, periods, ctx.team_tag_keys), f"rollup of {', '.join(periods)}"
    )
    missing = [c for c in pushdown.ROLLUP_COLUMNS if c not in header]
    if missing:
        raise IngestError(f"{ctx.source}: the Athena result lacks column(s) {', '.join(missing)}")
    arrays = {name: pa.array([r[i] for r in rows], pa.string()) for i, name in enumerate(header)}
    view = f"_athena_rollup_{uuid.uuid4().hex[:12]}"
    ctx.con.register(view, pa.table(arrays))
    typed = pushdown.typed_rollup_select(view)
    try:
        found_slices = [
            r[0]
            for r in ctx.con.execute(f'SELECT DISTINCT CAST("BillingPeriodStart" AS VARCHAR) FROM ({typed})').fetchall()
        ]
    except Exception as exc:
        raise IngestError(
            f"{ctx.source}: the Athena rollup result does not cast to the warehouse types: {str(exc).splitlines()[0]}"
        ) from None
    if any(s is None for s in found_slices):
        raise IngestError(f"{ctx.source}: the Athena rollup has rows without a billing period start")
    slices = set(found_slices)
    new_loaded = dict(loaded)
    for period in periods:
        slices |= set(loaded.get(period, []))
        new_loaded[period] = sorted(s for s in found_slices if s.startswith(period))
    watermark = max(new_loaded) if new_loaded else None
    note = (
        f"{watermark} (athena: {athena.queries} queries, {athena.bytes_scanned:,} bytes scanned, "
        f"{len(rows):,} rollup rows)"
    )
    log.info("%s: %s", ctx.source, note)
    batch = Batch(table="cost_line_items", data=enrich(typed), slices=sorted(slices))
    state = {"periods": new_loaded, "watermark": watermark, "engine": "athena"}
    if ctx.window.ranged:
        state = {**ctx.state, "periods": {**loaded, **{p: new_loaded[p] for p in periods}}}
    return FetchResult([batch], state, watermark=note)
