"""What several models read in one run, read once: the run's shared reads.

Every model reads the warehouse in its own ``load`` step, and several read the same thing: every GPU
resource-hour (idle_gpu, onprem_vs_cloud, and commitment over its lookback), the rightsizing frame and the
catalogue (gpu_count, gpu_type, quantization), spot_mix's inputs (spot_mix, and commitment, which leaves out
what spot_mix moves). At 10,000 GPUs one read of the resource-hours takes seconds; read once per run it is
paid once.

``models.run.analyse`` opens a :func:`scope` on its connection around the models. Inside it a read made
through :func:`shared` is kept, under its name and the arguments that decide it, and handed to every later
model asking for the same read on the same connection. The scope is the only place a read is kept, and it
ends with the run: the cache is emptied and forgotten when the ``with`` block exits, so a later run (the
dashboard's, the API's, the scheduler's next tick) reads the warehouse as it is then. Outside a scope (a
page or a test calling a model's ``load`` itself) :func:`shared` reads every time. The active scope is a
context variable, so two threads (the dashboard's sessions) never see each other's, and a scope is for one
connection: a read on another connection is not served from it.

A scope opened while one is active on the same connection joins it (the evaluation opens one around its
own reads and ``analyse``); the outer one decides when the reads are dropped.

The reads kept are the frames a model reads and does not change: polars frames are immutable, and the
models derive new frames from them (``with_columns``, ``filter``). Findings are never kept: plans and
calibration change them in place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import duckdb
import polars as pl

from gpufinops.warehouse import queries

T = TypeVar("T")


@dataclass
class RunReads:
    """One run's kept reads on one connection; ``reads`` counts the reads made (a name's second use in
    the run is served from ``values``, not read)."""

    con: duckdb.DuckDBPyConnection
    values: dict[tuple[str, Hashable], Any] = field(default_factory=dict)
    reads: Counter[str] = field(default_factory=Counter)
    open: bool = True


_ACTIVE: ContextVar[RunReads | None] = ContextVar("gpufinops_run_reads", default=None)


def active(con: duckdb.DuckDBPyConnection) -> RunReads | None:
    """The scope open on ``con`` in this context, or None (no run, or a run on another connection)."""
    reads = _ACTIVE.get()
    return reads if reads is not None and reads.open and reads.con is con else None


@contextmanager
def scope(con: duckdb.DuckDBPyConnection) -> Iterator[RunReads]:
    """Keep the reads made through :func:`shared` on ``con`` until the block ends (or join the scope
    already open on it). On exit the kept reads are dropped, also when a model raised."""
    joined = active(con)
    if joined is not None:
        yield joined
        return
    reads = RunReads(con)
    token = _ACTIVE.set(reads)
    try:
        yield reads
    finally:
        _ACTIVE.reset(token)
        reads.open = False
        reads.values.clear()


def shared(con: duckdb.DuckDBPyConnection, name: str, key: Hashable, read: Callable[[], T]) -> T:
    """``read()``, made once per run scope for ``(name, key)``; ``key`` holds every argument the read
    depends on besides the connection. Without a scope on ``con`` it reads every time."""
    reads = active(con)
    if reads is None:
        return read()
    slot = (name, key)
    if slot not in reads.values:
        reads.values[slot] = read()
        reads.reads[name] += 1
    value: T = reads.values[slot]
    return value


# ---- the reads several models share ----------------------------------------------------------------


def resource_hours(con: duckdb.DuckDBPyConnection, start: datetime | None = None) -> pl.DataFrame:
    """``queries.gpu_resource_hours`` from ``start`` on (every hour without it), read once per run.

    In a run a window's hours are the run's whole read, filtered: the same frame where ``start`` is on an
    hour boundary (the query groups the lines by their hour, so a boundary never splits an hour's lines,
    and filters the metrics by the same hour). A window starting inside an hour is read on its own."""
    if active(con) is None:
        return queries.gpu_resource_hours(con, start=start)
    whole = shared(con, "gpu_resource_hours", None, lambda: queries.gpu_resource_hours(con))
    if start is None:
        return whole
    if not _on_hour(con, start):
        return shared(con, "gpu_resource_hours", start, lambda: queries.gpu_resource_hours(con, start=start))
    return whole.filter(pl.col("hour") >= start)


def _on_hour(con: duckdb.DuckDBPyConnection, moment: datetime) -> bool:
    """Whether ``moment`` starts an hour as the warehouse's ``date_trunc('hour', …)`` cuts them (in the
    session's time zone: a zone half an hour off UTC cuts at half past)."""
    rows = con.execute(
        "SELECT date_trunc('hour', CAST(? AS TIMESTAMPTZ)) = CAST(? AS TIMESTAMPTZ)", [moment, moment]
    ).fetchall()
    return bool(rows[0][0])
