"""Shared fixtures: a fresh warehouse per test, registries built per test, the real data files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("POLARS_MAX_THREADS", "2")

DATA = Path(__file__).parent / "data"
FOCUS_SAMPLE = DATA / "focus-sample" / "focus_sample.csv"
FOCUS_SPEC_COLUMNS = DATA / "focus-spec" / "focus_columns_v1.0-v1.2.csv"


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "wh" / "gpufinops.duckdb"


@pytest.fixture
def focus_registry():
    from ingest.focus_files import FocusFiles
    from ingest.registry import Registry

    registry = Registry()
    registry.register(FocusFiles)
    return registry


def table_digest(db_path: Path, table: str, exclude: tuple[str, ...] = ()) -> tuple[int, str]:
    """(row count, order-independent hash of every row) of a table: 'exactly the previous contents'."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in exclude]
        select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
        rows = con.execute(f"SELECT {select} FROM {table}").fetchall()
    digest = hashlib.sha256()
    for row in sorted(repr(r) for r in rows):
        digest.update(row.encode())
    return len(rows), digest.hexdigest()


def query(db_path: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db_path), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()


EXIT_GRACE_S = float(os.environ.get("GPUFINOPS_TEST_EXIT_GRACE_S", "120"))


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A watchdog for the process's exit, started by pytest's last hook: a test that leaves a
    non-daemon thread or an atexit hook blocking (a server that never answers its shutdown) would keep
    `make test` running after the summary until CI's time limit. After EXIT_GRACE_S the watchdog prints
    every thread's stack (so the culprit is named in the log) and ends the process with the session's
    own status."""
    import faulthandler
    import sys
    import threading
    import time

    status = _EXIT_STATUS[-1] if _EXIT_STATUS else 1

    def watchdog() -> None:
        time.sleep(EXIT_GRACE_S)
        err = sys.__stderr__
        if err is not None:
            print(f"\nthe test process had not exited {EXIT_GRACE_S:g} s after the session ended; its threads:",
                  file=err, flush=True)
            faulthandler.dump_traceback(file=err, all_threads=True)
        os._exit(status)

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()
