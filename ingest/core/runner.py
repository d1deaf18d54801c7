"""Run one configured source: fetch, replace its slices in one transaction, record the run.

Every run is a row in ``ingest_runs``. A load deletes the (source, slice) pairs it replaces and
inserts the new rows inside one transaction together with the source's incremental state, so a
re-run never duplicates, a restated billing period replaces the old one, and a crash (even
SIGKILL) leaves the previous consistent state for the next run to retry from.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

import duckdb
import pyarrow as pa

from gpufinops.derived import registry as derived
from gpufinops.derived.spec import Change, Touched
from gpufinops.ingest.core import funnel, transport
from gpufinops.ingest.core import scrub as scrub_module
from gpufinops.ingest.core.registry import (
    Batch,
    ConfigProblem,
    FetchResult,
    IngestContext,
    IngestError,
    IngestorMeta,
    LoadWindow,
    Registry,
)
from gpufinops.ingest.core.scrub import scrub
from gpufinops.ingest.core.spec import OptionError, SourceOptions
from gpufinops.warehouse import db, domains, schema

log = logging.getLogger(__name__)


# Batches that are not the source's data: its rules (config), and the workloads seen in the same
# samples as its GPU-hours (counted once, as GPU-hours).
UNCOUNTED_TABLES = ("attribution_rules", "gpu_workloads_hourly")


@dataclass
class RunResult:
    run_id: str
    source: str
    source_type: str
    status: str  # succeeded | failed | skipped
    rows: int
    watermark: str | None
    error: str | None
    rejected: int = 0  # rows quarantined into ingest_rejects (on_invalid = "skip_rows")
    config_error: bool = False  # failed for a setting only the config can fix (registry.ConfigProblem): exit 2

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def _now() -> datetime:
    return datetime.now(UTC)


_scrub = scrub  # the one scrubber (ingest.core.scrub)


def _error_sentence(source: str, exc: BaseException) -> str:
    if isinstance(exc, IngestError):
        text = str(exc)
    elif isinstance(exc, duckdb.Error):
        text = funnel.engine_text(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    from gpufinops.ingest.core.credentials import hint

    extra = hint(exc)
    text = " ".join(text.split()) + (f" ({extra})" if extra and extra not in text else "")
    return text if text.startswith((source, f"sources.{source}.")) else f"{source}: {text}"


def _close_interrupted_runs(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Runs left 'running' by a killed process: we hold the only writer, so none is alive."""
    con.execute(
        "UPDATE ingest_runs SET status = 'failed', finished_at = now(), "
        "error = 'interrupted: the process ended before the run finished' "
        "WHERE source = ? AND status = 'running'",
        [source],
    )


def _load_state(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, Any]:
    rows = con.execute("SELECT state FROM ingest_state WHERE source = ?", [source]).fetchall()
    return json.loads(rows[0][0]) if rows and rows[0][0] else {}


def load_window(
    meta: IngestorMeta,
    options: SourceOptions,
    state: dict[str, Any],
    since: datetime | None,
    until: datetime | None,
    full_refresh: bool,
) -> LoadWindow:
    """The one window a run loads: ``--since/--until`` when the source honours them; a bound not
    given is the saved cursor minus the lookback (none under ``--full-refresh`` or before the first
    load, or when the source's cursor is not a time: the ingestor then starts at its own backfill)."""
    ranged = meta.time_range and (since is not None or until is not None)
    if since is None or not ranged:
        since = _resume_from(meta, options, state, full_refresh)
    return LoadWindow(since=since, until=until if ranged else None, ranged=ranged, full_refresh=full_refresh)


def _resume_from(
    meta: IngestorMeta, options: SourceOptions, state: dict[str, Any], full_refresh: bool
) -> datetime | None:
    if meta.cursor is None or full_refresh:
        return None
    return meta.cursor.resume_from(state, options.window_lookback(meta.lookback))


def parse_options(meta: IngestorMeta, source: str, options: SourceOptions | dict[str, Any]) -> SourceOptions:
    """A source's options as its ``Options`` instance (a dict, e.g. from the config or a test, is checked first)."""
    if isinstance(options, SourceOptions):
        return options
    try:
        return meta.parse_options(options, f"sources.{source}")
    except OptionError as exc:
        raise IngestError(str(exc)) from None


def _insert_batch(
    con: duckdb.DuckDBPyConnection,
    batch: Batch,
    source: str,
    source_column: str,
    slice_expr: str,
    touched: Touched,
    key: tuple[str, ...] = (),
) -> int:
    table = schema.TABLES[batch.table]
    source_column = batch.source_column or source_column
    slice_expr = batch.slice_expr or slice_expr
    placeholders = ", ".join("?" for _ in batch.slices)
    owner = f'"{source_column}" = ? AND ' if source_column else ""  # reference tables have no source column
    in_slices = f"{owner}({slice_expr}) IN ({placeholders})"
    slice_params = ([source] if source_column else []) + list(batch.slices)
    followers = [spec for spec in derived.specs() if spec.captures(table.name)]
    touched.tables.add(table.name)
    change = Change(table.name, source, in_slices, slice_params, slice_expr, tuple(batch.slices), inserted=False)
    if batch.slices:
        for spec in followers:  # what the old rows paid for, measured or served, before they go
            spec.capture(con, change, touched)
        con.execute(f"DELETE FROM {table.name} WHERE {in_slices}", slice_params)
    inserted = _insert_rows(con, batch, table, key)
    if source_column:  # the rows the source holds there now
        owned = (in_slices, slice_params) if batch.slices else (f'"{source_column}" = ?', [source])
        change = replace(change, where=owned[0], params=owned[1], inserted=True)
    else:
        change = replace(change, where=in_slices if batch.slices else None, inserted=True)
    for spec in followers:
        spec.capture(con, change, touched)
    return inserted


def _insert_rows(con: duckdb.DuckDBPyConnection, batch: Batch, table: schema.Table, key: tuple[str, ...]) -> int:
    """Insert the batch's rows, each checked against its columns' declared domains (warehouse/domains.py)
    in the same pass: a value outside them fails the load (the caller names the row, column and value)."""
    if batch.data is None:  # a pure withdrawal: the slices are deleted, nothing replaces them
        return 0
    if isinstance(batch.data, str):
        columns = [r[0] for r in con.execute(f"DESCRIBE {batch.data}", batch.params).fetchall()]
        checked = domains.guard_sql(table.name, batch.data, columns, key)
        return int(con.execute(f"INSERT INTO {table.name} BY NAME {checked}", batch.params).fetchall()[0][0])
    data = batch.data
    if isinstance(data, pa.Table):
        _check_arrow_schema(data, table)
    checked = domains.guard_sql(table.name, "SELECT * FROM _gpufinops_batch", list(data.schema.names), key)
    con.register("_gpufinops_batch", data)
    try:
        return int(con.execute(f"INSERT INTO {table.name} BY NAME {checked}").fetchall()[0][0])
    finally:
        try:
            con.unregister("_gpufinops_batch")
        except duckdb.Error:  # a failed insert aborted the transaction: the rollback drops the view
            pass


def _check_arrow_schema(data: pa.Table, table: schema.Table) -> None:
    expected = {f.name: f.type for f in table.schema}
    for f in data.schema:
        if f.name not in expected:
            raise IngestError(f"column {f.name!r} is not in table {table.name}")
        if f.type != expected[f.name]:
            raise IngestError(f"column {f.name!r} has type {f.type}, table {table.name} needs {expected[f.name]}")


def _load(con: duckdb.DuckDBPyConnection, source: str, meta, result: FetchResult) -> tuple[int, int]:
    """Replace the batches' slices and save the source's state, all in one transaction;
    returns (rows loaded, rows quarantined)."""
    rows = rejected = 0
    failed_batch = None
    touched = Touched(source)
    log.info("%s: loading %d batch(es) into the warehouse", source, len(result.batches))
    con.execute("BEGIN TRANSACTION")
    try:
        for batch in result.batches:
            failed_batch = batch
            key = batch.key or (meta.key if batch.table == meta.target_table else ("hour", "gpu_uuid", "host"))
            inserted = _insert_batch(con, batch, source, meta.source_column, meta.slice_expr, touched, key)
            if batch.table == "ingest_rejects":
                rejected += inserted
            elif batch.table not in UNCOUNTED_TABLES and batch.counted:
                rows += inserted
        failed_batch = None
        for spec in derived.specs():  # the derived tables follow whichever side arrived: same transaction
            spec.apply(con, touched)
        con.execute("DELETE FROM ingest_state WHERE source = ?", [source])
        con.execute(
            "INSERT INTO ingest_state VALUES (?, ?, ?)", [source, json.dumps(result.state, sort_keys=True), _now()]
        )
        con.execute("COMMIT")
    except BaseException as exc:
        db.rollback(con)
        if isinstance(exc, duckdb.Error) and failed_batch is not None:
            raise IngestError(_batch_error(source, failed_batch, exc)) from exc
        raise
    if rejected:
        log.warning("%s: %d row(s) failed validation and were quarantined in ingest_rejects", source, rejected)
    return rows, rejected


def _batch_error(source: str, batch: Batch, exc: duckdb.Error) -> str:
    """One sentence for a failed batch: a value outside its domain, what the ingestor's ``diagnose`` finds
    (the file, row and column), else the engine's reason, shortened, naming where the rows came from."""
    where = batch.context or f"the rows for {batch.table}"
    found = funnel.domain_error(source, where, batch.table, exc)
    if found is None and batch.diagnose:
        found = batch.diagnose(exc)
    return found or funnel.load_error(source, where, exc)


class RunSettings(TypedDict, total=False):
    """What a run takes besides its source, as ``run_source``'s keywords (each a ``RunOptions`` field)."""

    team_tag_keys: tuple[str, ...]
    since: datetime | None
    until: datetime | None
    full_refresh: bool
    base_dir: str | None
    memory_limit: str
    secrets: list[str] | None


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How one run loads its source: the parameter object behind ``run_source``'s keywords."""

    team_tag_keys: tuple[str, ...] = ()  # [teams] tag_keys
    since: datetime | None = None  # --since (a source with ``time_range``)
    until: datetime | None = None  # --until
    full_refresh: bool = False  # --full-refresh: no saved state, the source's own backfill
    base_dir: str | None = None  # relative paths in the options are relative to this
    memory_limit: str = db.DEFAULT_MEMORY_LIMIT
    secrets: list[str] | None = None  # values scrubbed from the error recorded


def run_source(
    registry: Registry,
    warehouse_path: str | os.PathLike,
    source: str,
    source_type: str,
    options: SourceOptions | dict[str, Any],
    **settings: Unpack[RunSettings],
) -> RunResult:
    """Run one source end to end; never raises for a bad source, returns a failed RunResult.
    ``settings``: the ``RunOptions`` fields (keywords)."""
    run = RunOptions(**settings)
    ingestor_cls = registry.get(source_type)
    meta = ingestor_cls.meta
    run_id = uuid.uuid4().hex
    secrets = run.secrets or []
    if (run.since or run.until) and not meta.time_range:
        log.warning(
            "%s: source type %s has no time range: --since/--until ignored, loading what is new", source, source_type
        )
    with db.writer(Path(warehouse_path), memory_limit=run.memory_limit) as con:
        _close_interrupted_runs(con, source)
        con.execute(
            "INSERT INTO ingest_runs (run_id, source, source_type, started_at, status, rows, rows_rejected, "
            "freshness_kind, expected_lag_hours) VALUES (?, ?, ?, ?, 'running', 0, 0, ?, ?)",
            # the spec's freshness travels with the run: the warehouse and dashboard read it from here
            [run_id, source, source_type, _now(), meta.freshness.kind, meta.freshness.lag_hours],
        )
        rows = rejected = 0
        watermark = None
        failure: BaseException | None = None
        try:
            parsed = parse_options(meta, source, options)
            state = {} if run.full_refresh else _load_state(con, source)
            ctx = IngestContext(
                source=source,
                options=parsed,
                con=con,
                state=state,
                run_id=run_id,
                team_tag_keys=run.team_tag_keys,
                base_dir=run.base_dir,
                window=load_window(meta, parsed, state, run.since, run.until, run.full_refresh),
            )
            with transport.running(parsed):  # its listings and requests within its own bounds
                result: FetchResult = ingestor_cls().fetch(ctx)
            watermark = result.watermark
            if result.skipped_reason is not None and not result.batches:
                status, error = "skipped", None
                log.info("%s: skipped, %s", source, result.skipped_reason)
            else:
                rows, rejected = _load(con, source, meta, result)
                status, error = "succeeded", None
        except Exception as exc:  # recorded in the ledger and reported; the warehouse is unchanged
            status, error, rows, rejected = (
                "failed",
                scrub_module.brief(_scrub(_error_sentence(source, exc), secrets), None),
                0,
                0,
            )
            failure = exc
            log.debug("ingest %s failed", source, exc_info=True)
        try:
            con.execute(
                "UPDATE ingest_runs SET status = ?, finished_at = ?, rows = ?, watermark = ?, error = ?, "
                "rows_rejected = ? WHERE run_id = ?",
                [status, _now(), rows, watermark, error, rejected, run_id],
            )
        except duckdb.Error:
            if failure is not None and not isinstance(failure, IngestError):
                raise failure from None  # e.g. a full disk: the cause, not the ledger's own failure
            raise
    config_error = isinstance(failure, ConfigProblem)
    return RunResult(run_id, source, source_type, status, rows, watermark, error, rejected, config_error)
