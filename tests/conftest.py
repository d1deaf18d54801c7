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
