"""What the hourly metrics sources share: the spec facts that follow from how they load, and the run with
no complete hour.

* **Queried by the hour** (``prometheus``, ``prometheus_serving``, ``cloudwatch_gpu``): the server
  aggregates; a run reads whole hours up to the last complete one (``LoadWindow.whole_hours``), resumes
  from that hour, re-reads three hours for late samples and honours ``--since``/``--until``. A run with
  no complete hour since the last one loads nothing (``no_complete_hour``).
* **Scraped** (``dcgm_exporter``, ``serving_exporter``): ``/metrics`` over HTTP (or files) at the
  configured ``targets``, any provider's machines; every run adds what it scraped, so no lookback and
  no time range.

A spec spreads its group into its ``IngestorMeta`` and states every other fact itself
(``ingest.core.spec_facts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.core.registry import Batch, Cursor, FetchResult, IngestContext, Transport
from gpufinops.ingest.core.spec import SourceOptions, option
from gpufinops.ingest.metrics.metrics_store import HOUR_SLICE_SQL

QUERIED_BY_THE_HOUR: dict[str, Any] = {
    "slice_expr": HOUR_SLICE_SQL,
    "source_column": "source",
    "cursor": Cursor(remembers="hour (last complete hour loaded)", resume_item="cursor"),
    "lookback": timedelta(hours=3),
    "time_range": True,
}

SCRAPED: dict[str, Any] = {
    "slice_expr": HOUR_SLICE_SQL,
    "source_column": "source",
    "lookback": timedelta(0),
    "time_range": False,
    "provider": None,
    "extra": None,
    "transport": Transport(client="http", endpoint="targets", paged=False, unless=None),
}


def no_complete_hour(ctx: IngestContext, cursor: dict[str, str], batches: list[Batch]) -> FetchResult:
    """A run that finds no complete hour since the last: nothing loaded, the cursor kept."""
    return FetchResult(
        batches,
        {**ctx.state, **cursor},
        watermark=ctx.state.get("cursor"),
        skipped_reason="no complete hour since the last run",
    )


def hours_unchanged(
    con: duckdb.DuckDBPyConnection,
    source: str,
    new: pa.Table,
    hours: tuple[datetime, datetime],
    table: str,
    compared: tuple[str, ...],
) -> bool:
    """Whether ``source``'s stored rows of ``table`` in the [start, end) ``hours`` are ``new``, compared on
    the ``compared`` columns (re-read hours that changed nothing are not loaded again)."""
    start, end = hours
    cols = ", ".join(f'"{c}"' for c in compared)
    con.register("_hours_new", new)
    try:
        stored = f"SELECT {cols} FROM {table} WHERE source = ? AND hour >= ? AND hour < ?"
        diff = con.execute(
            f"SELECT count(*) FROM ((SELECT {cols} FROM _hours_new EXCEPT ALL {stored}) "
            f"UNION ALL ({stored} EXCEPT ALL SELECT {cols} FROM _hours_new))",
            [source, start, end, source, start, end],
        ).fetchall()[0][0]
    finally:
        con.unregister("_hours_new")
    return bool(diff == 0)


@dataclass(frozen=True, kw_only=True)
class PrometheusQueryOptions(SourceOptions):
    """The options of a source that queries a Prometheus server by the hour (``prometheus``,
    ``prometheus_serving``)."""

    url: str = option(
        doc="the Prometheus server's base URL (user:password@ in it is sent as Basic auth, never shown)", secret=True
    )
    selector: str | None = option(None, 'PromQL label matchers every series must carry, e.g. cluster="prod"')
    lookback_hours: float = option(3.0, "complete hours re-read before the cursor on every run (late samples)")
    backfill_days: float = option(7.0, "how far back the first run (or --full-refresh) reads")

    def window_lookback(self, declared: timedelta) -> timedelta:
        return timedelta(hours=self.lookback_hours)
