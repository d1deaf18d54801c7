"""Resource-days (or resource-hours) recomputed a batch at a time: the allocation's and the carbon rows'.

A derived table's rows of one resource-day depend only on that resource-day's bill, metrics and
workloads, so a recompute can run over a scope of any size in batches of consecutive days. The batch
bounds what one statement holds in memory (the carbon rows of a 10,000-GPU month took 38.2 CPU seconds
as one statement, 15.9 in twenty batches), and each batch's day range lets the tables' zone maps skip
the other days.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

from gpufinops.derived.allocation_sql import US_PER_DAY, US_PER_HOUR


def batches(
    con: duckdb.DuckDBPyConnection, source: str, key: str, size: int, *, name: str
) -> Iterator[tuple[str, tuple[int, int]]]:
    """For each batch of at most ``size`` distinct (resource_id, ``key``) pairs of the relation ``source``
    (``key``: ``day_n`` or ``hour_n``), in day order: (a temp table of the batch's pairs, its first and last
    day number). The tables are named after ``name`` and dropped when the batches are done."""
    per = {"day_n": US_PER_DAY, "hour_n": US_PER_HOUR}[key]
    numbered, part = f"{name}_batches", f"{name}_part"
    to_day = f" * {per} // {US_PER_DAY}"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {numbered} AS SELECT resource_id, {key}, "
        f"(row_number() OVER (ORDER BY {key}, resource_id) - 1) // {int(size)} AS batch "
        f"FROM (SELECT DISTINCT resource_id, {key} FROM {source})"
    )
    bounds = con.execute(
        f"SELECT batch, min({key}){to_day}, max({key}){to_day} FROM {numbered} GROUP BY 1 ORDER BY 1"
    ).fetchall()
    for batch, first_day, last_day in bounds:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {part} AS SELECT resource_id, {key} FROM {numbered} WHERE batch = ?",
            [batch],
        )
        yield part, (int(first_day), int(last_day))
    for table in (numbered, part):
        con.execute(f"DROP TABLE IF EXISTS {table}")
