"""The jobs' own ledger: each ingest run and job run, a source's incremental state, and the rows a
load refused.

Written by the ingest runner (``ingest/core``) and the daemon's jobs, in the transaction of the work they record.
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_types import JSON_META, UTC_TS

RUN_STATUSES = ("running", "succeeded", "failed", "skipped")

# When a run (an ingest or a job) started and finished, and its status (RUN_STATUSES).
_RUN_SPAN: tuple[pa.Field, ...] = (
    pa.field("started_at", UTC_TS),
    pa.field("finished_at", UTC_TS),
    pa.field("status", pa.string()),
)

INGEST_RUNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("source", pa.string()),
        ("source_type", pa.string()),
        *_RUN_SPAN,
        ("rows", pa.int64()),
        ("watermark", pa.string()),
        ("error", pa.string()),
        ("rows_rejected", pa.int64()),  # rows quarantined into ingest_rejects (on_invalid = "skip_rows"); schema 9
        ("freshness_kind", pa.string()),  # the spec's Freshness when it ran (warehouse/freshness.py); schema 16
        ("expected_lag_hours", pa.float64()),  # its lag_hours: newest data older than this is stale; schema 16
    ]
)

# Per-source incremental state (file fingerprints, cursors), written in the load's transaction.
INGEST_STATE = pa.schema(
    [
        ("source", pa.string()),
        pa.field("state", pa.string(), metadata=JSON_META),
        ("updated_at", UTC_TS),
    ]
)

# v9: rows a source with on_invalid = "skip_rows" refused (ingest/core/validate.py): one per bad row, the
# file and row (or line) it came from, the column, its value and why. A re-read of a file replaces
# that file's rows here, so the table holds what each file's latest read refused.
INGEST_REJECTS = pa.schema(
    [
        ("source", pa.string()),
        ("run_id", pa.string()),
        ("file", pa.string()),
        ("row", pa.int64()),
        ("column", pa.string()),
        ("value", pa.string()),
        ("reason", pa.string()),
        ("rejected_at", UTC_TS),
    ]
)

# Non-ingest jobs the daemon runs (recommend, report, feed push): the same ledger shape as ingest_runs.
JOB_RUNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("job", pa.string()),
        *_RUN_SPAN,
        ("error", pa.string()),
    ]
)
