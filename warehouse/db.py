"""DuckDB connections: one short-lived writer per load, read-only readers per request.

DuckDB allows one writing process. No process holds a connection across idle time: a job opens a
writer for one load and closes it; the dashboard and the API open read-only connections per request
and retry briefly while a writer holds the file.

Migrations and the reference refresh (``gpu_specs``, ``gpu_instance_reference``) run once per process,
at its start: :func:`prepare` (the CLI's main, so every command but ``sql`` and ``alerts list``, the
API and the daemon included; the Streamlit server's first render; ``gpufinops migrate``). A writer then only checks the schema version (one SELECT) and refuses a warehouse older than
the code, naming the command that upgrades it; a brand-new warehouse is built to the head schema.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

from gpufinops.warehouse import reference, schema

log = logging.getLogger(__name__)

DEFAULT_MEMORY_LIMIT = "2GB"


class WarehouseError(RuntimeError):
    """The warehouse can not be opened or written: one sentence naming its path and the cause.
    ``usage`` is true when only a different path fixes it (a directory, not a DuckDB file)."""

    def __init__(self, message: str, path: Path, *, usage: bool = False) -> None:
        super().__init__(message)
        self.path, self.usage = path, usage


class WarehouseBusy(WarehouseError):
    """The warehouse file stayed locked by another process for the whole retry window."""


class WarehouseOutdated(WarehouseError):
    """The warehouse's schema is older than the code: ``gpufinops migrate`` (or any command's start) upgrades it."""


UPGRADE_COMMAND = "gpufinops migrate"


class WarehouseMissing(WarehouseError, FileNotFoundError):
    """A command that only reads found no warehouse at the path (it never creates one)."""


def _cause(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.split("Error: ", 1)[-1]


def _open_error(path: Path, exc: Exception) -> WarehouseError:
    """What went wrong opening ``path``, as one sentence (no retry for any of these)."""
    text = str(exc)
    if path.is_dir() or "Is a directory" in text:
        return WarehouseError(f"warehouse {path} is a directory, not a DuckDB file", path, usage=True)
    if "not a valid DuckDB database file" in text:
        return WarehouseError(f"warehouse {path} is not a DuckDB database file", path, usage=True)
    if "newer version of DuckDB" in text or "created with" in text and "version" in text:
        return WarehouseError(f"warehouse {path} was written by another DuckDB version: {_cause(exc)}", path)
    for marker in ("Read-only file system", "Permission denied", "Operation not permitted"):
        if marker in text:
            return WarehouseError(f"warehouse {path} can not be opened for writing ({marker.lower()})", path)
    if "No space left" in text or "File too large" in text:
        return WarehouseError(f"warehouse {path} can not be written: the disk is full ({_cause(exc)})", path)
    return WarehouseError(f"warehouse {path} can not be opened: {_cause(exc)}", path)


def _literal(text: str) -> str:
    """A SQL string literal (SET takes no bound parameters)."""
    return "'" + str(text).replace("'", "''") + "'"


def _settings(con: duckdb.DuckDBPyConnection, path: Path, memory_limit: str, threads: int | None) -> None:
    con.execute("SET TimeZone = 'UTC'")
    try:
        con.execute(f"SET memory_limit = {_literal(memory_limit)}")
    except duckdb.Error as exc:
        con.close()
        raise WarehouseError(
            f'warehouse.memory_limit {memory_limit!r} is not a memory size (e.g. "2GB"): {_cause(exc)}',
            path,
            usage=True,
        ) from None
    if threads:
        con.execute(f"SET threads = {int(threads)}")


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "could not set lock" in text or "conflicting lock" in text or "being used" in text


def _open(path: Path, read_only: bool, retry_seconds: float) -> duckdb.DuckDBPyConnection:
    """A connection; only a lock held by another process is waited for (up to ``retry_seconds``),
    every other failure is at once one sentence (WarehouseError)."""
    deadline = time.monotonic() + retry_seconds
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise _open_error(path, exc) from exc
            if time.monotonic() >= deadline:
                holder = re.search(r"\(PID (\d+)\)", str(exc))
                raise WarehouseBusy(
                    f"warehouse {path} is locked by another process"
                    + (f" (pid {holder.group(1)})" if holder else "")
                    + f"; waited {retry_seconds:g} s",
                    path,
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextlib.contextmanager
def writer(
    path: str | os.PathLike,
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
    retry_seconds: float = 30.0,
    create: bool = True,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection for one job at the current schema (see :func:`check_version`), closed on exit.
    ``create=False``: a missing warehouse is WarehouseMissing (nothing is created, no folder either)."""
    path = Path(path)
    if not create and not path.exists():
        raise missing(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WarehouseError(f"warehouse {path}: its folder can not be created ({exc.strerror or exc})", path) from exc
    con = _open(path, read_only=False, retry_seconds=retry_seconds)
    try:
        _settings(con, path, memory_limit, threads)
        tmp = path.parent / ".duckdb_tmp"
        con.execute(f"SET temp_directory = {_literal(tmp.as_posix())}")
        if check_version(con, path) == 0:  # a brand-new warehouse: built to the head schema
            _upgrade(con)
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def reader(
    path: str | os.PathLike, *, memory_limit: str = "1GB", retry_seconds: float = 5.0
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection (dashboard, API, `gpufinops sql`), closed on exit."""
    path = Path(path)
    if not path.exists():
        raise missing(path)
    con = _open(path, read_only=True, retry_seconds=retry_seconds)
    try:
        _settings(con, path, memory_limit, None)
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def transaction(path: str | os.PathLike, *, memory_limit: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A writer whose work is one transaction: committed when the block ends, rolled back (without hiding
    the error) when it raises. What a derived table's ``configure`` runs before a job's loads."""
    with writer(path, memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            rollback(con)
            raise


def missing(path: Path) -> WarehouseMissing:
    return WarehouseMissing(
        f"warehouse {path} does not exist yet (a command that only reads never creates it): run "
        f"`gpufinops ingest` or `gpufinops demo` first",
        path,
    )


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK that never hides the error that made it necessary: after a full disk or an
    invalidated database, "cannot rollback - no transaction is active" would replace the cause."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error as exc:
        log.debug("rollback after a failure: %s", exc)


def prepare(
    path: str | os.PathLike, *, memory_limit: str = DEFAULT_MEMORY_LIMIT, retry_seconds: float = 30.0
) -> int | None:
    """Bring the warehouse at ``path`` to the code's schema and reference data, once, at a process's start.

    Returns the schema version, or None when there is no warehouse yet (nothing is created: the first
    writer builds it). A warehouse already current is only read (a read-only connection: no write lock,
    so it works on read-only media and beside a running writer); otherwise a writer migrates it and
    reloads the reference tables whose bundled CSV changed.
    """
    path = Path(path)
    if not path.exists():
        return None
    if not path.is_file():
        raise _open_error(path, IsADirectoryError(f"Is a directory: {path}"))
    con = _open(path, read_only=True, retry_seconds=retry_seconds)
    try:
        current = _stored_version(con) == schema.SCHEMA_VERSION and not reference.stale(con)
    finally:
        con.close()
    if current:
        return schema.SCHEMA_VERSION
    con = _open(path, read_only=False, retry_seconds=retry_seconds)
    try:
        _settings(con, path, memory_limit, None)
        return _upgrade(con)
    finally:
        con.close()


def _upgrade(con: duckdb.DuckDBPyConnection) -> int:
    version = migrate(con)
    reference.refresh_gpu_specs(con)
    reference.refresh_gpu_instance_types(con)
    return version


def _stored_version(con: duckdb.DuckDBPyConnection) -> int:
    """The warehouse's schema version (0: a new, empty warehouse): one SELECT."""
    try:
        rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    except duckdb.CatalogException:
        return 0
    return int(rows[0][0] or 0)


def check_version(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """The warehouse's schema version, refusing one older (WarehouseOutdated) or newer than the code;
    0 for a new, empty warehouse."""
    version = _stored_version(con)
    if version > schema.SCHEMA_VERSION:
        raise WarehouseError(
            f"warehouse {path} has schema version {version}, newer than this gpufinops "
            f"({schema.SCHEMA_VERSION}): upgrade gpufinops",
            path,
        )
    if 0 < version < schema.SCHEMA_VERSION:
        raise WarehouseOutdated(
            f"warehouse {path} has schema version {version}, older than this gpufinops "
            f"({schema.SCHEMA_VERSION}): run `{UPGRADE_COMMAND}` to upgrade it",
            path,
        )
    return version


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    rows = con.execute("SELECT max(version) FROM schema_version").fetchall()
    return int(rows[0][0] or 0)


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply the migrations this warehouse lacks, each in its own transaction; returns the version."""
    version = current_version(con)
    if version > schema.SCHEMA_VERSION:
        raise RuntimeError(
            f"warehouse schema version {version} is newer than this gpufinops "
            f"({schema.SCHEMA_VERSION}): upgrade gpufinops"
        )
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
