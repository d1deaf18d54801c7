"""The ``stored_results`` table: frames the load job computes for the dashboard, read back by the pages.

Each row is one result (``name``: what it is, ``scope``: for whom, e.g. a team) as an Arrow IPC frame,
with the fingerprint of the data it was computed on (:func:`data_version`). A reader asks for the
fingerprint it sees now: a row computed on other data is never returned, so a restated bill or a new
day (an ingest changes the fingerprint) makes every stored result stale until the job recomputes it.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries import cost_data_version


def data_version(con: duckdb.DuckDBPyConnection) -> str:
    """What the stored results depend on: the ingest ledger (every load writes a row) and the daily cost
    rollup's own totals (a reload that left the ledger's last row in place still moves them)."""
    daily = con.execute("SELECT count(*), sum(effective_cost), max(last_charge) FROM cost_daily").fetchall()[0]
    return "|".join(str(v) for v in (*cost_data_version(con), *daily))


def _encode(frame: pl.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.write_ipc(out)
    return out.getvalue()


def write(
    con: duckdb.DuckDBPyConnection, version: str, results: dict[tuple[str, str], pl.DataFrame], seconds: float
) -> None:
    """Replace every stored result with ``results`` ((name, scope) -> frame), in one transaction."""
    now = datetime.now(UTC)
    rows = [(name, scope, version, now, seconds, _encode(frame)) for (name, scope), frame in results.items()]
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM stored_results")
        if rows:
            con.executemany("INSERT INTO stored_results VALUES (?, ?, ?, ?, ?, ?)", rows)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def read(con: duckdb.DuckDBPyConnection, name: str, scope: str, version: str) -> pl.DataFrame | None:
    """The stored frame of (name, scope) computed on ``version``'s data; None when there is none (an old
    warehouse, a load since, a scope nobody precomputed)."""
    try:
        rows = con.execute(
            "SELECT frame FROM stored_results WHERE name = ? AND scope = ? AND data_version = ?",
            [name, scope, version],
        ).fetchall()
    except duckdb.CatalogException:  # a warehouse older than the table, opened read-only
        return None
    return pl.read_ipc(io.BytesIO(rows[0][0])) if rows else None


def computed(con: duckdb.DuckDBPyConnection) -> tuple[str | None, datetime | None, float | None, int]:
    """(data version, when, seconds it took, how many results) of the stored results."""
    try:
        row = con.execute(
            "SELECT any_value(data_version), max(computed_at), max(seconds), count(*) FROM stored_results"
        ).fetchall()[0]
    except duckdb.CatalogException:
        return None, None, None, 0
    return row[0], row[1], row[2], int(row[3])
