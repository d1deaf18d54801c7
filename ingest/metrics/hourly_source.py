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

from datetime import timedelta
from typing import Any

from gpufinops.ingest.core.registry import Batch, Cursor, FetchResult, IngestContext, Transport
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
