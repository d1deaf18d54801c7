"""The newest GPU charge in the warehouse: where every model's lookback window ends.

A model judges a delayed or replayed export on its own last weeks, not on the clock: its window ends at
the newest hour a GPU usage line was charged for (``queries.GPU_USAGE``). Defined once here; the
rightsizing models, spot_mix and commitment all read it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb

from gpufinops.warehouse import queries

LATEST_GPU_CHARGE = f'SELECT max("ChargePeriodStart") FROM cost_line_items c WHERE {queries.GPU_USAGE}'


def latest(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The start of the newest hour charged for GPU usage; None on a warehouse without GPU usage."""
    # fetchall, not fetchone (warehouse.fetch.scalar): duckdb refuses the connection's next statement
    # while a fetchone() result is unfinished ("connection has an unfinished result")
    rows = con.execute(LATEST_GPU_CHARGE).fetchall()
    value: datetime | None = rows[0][0] if rows else None
    return value


def window_start(con: duckdb.DuckDBPyConnection, lookback_days: int) -> datetime | None:
    """The first hour of a ``lookback_days`` window ending at (and including) the latest GPU charge."""
    last = latest(con)
    if last is None:
        return None
    return last - timedelta(days=lookback_days) + timedelta(hours=1)
