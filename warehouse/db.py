"""DuckDB connections: one short-lived writer per load, read-only readers per request.

DuckDB allows one writing process. No process holds a connection across idle time: a job opens a
writer for one load and closes it; the dashboard and the API open read-only connections per request
and retry briefly while a writer holds the file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

from warehouse import reference, schema

log = logging.getLogger(__name__)

DEFAULT_MEMORY_LIMIT = "2GB"


class WarehouseBusy(RuntimeError):
    """The warehouse file stayed locked by another process for the whole retry window."""


def _literal(text: str) -> str:
    """A SQL string literal (SET takes no bound parameters)."""
    return "'" + str(text).replace("'", "''") + "'"


def _settings(con: duckdb.DuckDBPyConnection, path: Path, memory_limit: str, threads: int | None) -> None:
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = {_literal(memory_limit)}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text or "conflicting" in text or "being used" in text


def _open(path: Path, read_only: bool, retry_seconds: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + retry_seconds
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:  # another process holds the write lock
            if not _is_lock_error(exc) or time.monotonic() >= deadline:
                if _is_lock_error(exc):
                    raise WarehouseBusy(f"warehouse {path} is locked by another process") from exc
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextlib.contextmanager
def writer(path: str | os.PathLike, *, memory_limit: str = DEFAULT_MEMORY_LIMIT,
           threads: int | None = None, retry_seconds: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection for one job, migrated to the current schema, closed on exit."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = _open(path, read_only=False, retry_seconds=retry_seconds)
    try:
        _settings(con, path, memory_limit, threads)
        tmp = path.parent / ".duckdb_tmp"
        con.execute(f"SET temp_directory = {_literal(tmp.as_posix())}")
        migrate(con)
        reference.refresh_gpu_specs(con)
        reference.refresh_gpu_instance_types(con)
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def reader(path: str | os.PathLike, *, memory_limit: str = "1GB",
           retry_seconds: float = 5.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection (dashboard, API, `gpufinops sql`), closed on exit."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"warehouse {path} does not exist yet: run `gpufinops ingest` or `gpufinops demo` first")
    con = _open(path, read_only=True, retry_seconds=retry_seconds)
    try:
        _settings(con, path, memory_limit, None)
        yield con
    finally:
        con.close()


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK that never hides the error that made it necessary: after a full disk or an
    invalidated database, "cannot rollback - no transaction is active" would replace the cause."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error as exc:
        log.debug("rollback after a failure: %s", exc)


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0] or 0)


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply the migrations this warehouse lacks, each in its own transaction; returns the version."""
    version = current_version(con)
    if version > schema.SCHEMA_VERSION:
        raise RuntimeError(f"warehouse schema version {version} is newer than this gpufinops "
                           f"({schema.SCHEMA_VERSION}): upgrade gpufinops")
    for target in range(version + 1, schema.SCHEMA_VERSION + 1):
        con.execute("BEGIN TRANSACTION")
        try:
            for statement in schema.MIGRATIONS[target - 1]():
                con.execute(statement)
            con.execute("INSERT INTO schema_version VALUES (?, now())", [target])
            con.execute("COMMIT")
        except Exception:
            rollback(con)
            raise
        log.info("warehouse migrated to schema version %d", target)
    return schema.SCHEMA_VERSION
