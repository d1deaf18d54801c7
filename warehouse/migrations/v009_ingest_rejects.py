"""Schema version 9, frozen as it shipped (commit a16b7558a79c): never edit it.

Rows refused by on_invalid = "skip_rows" (ingest_rejects) and their count per run.
"""

VERSION = 9

STATEMENTS: tuple[str, ...] = (
    """ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS "rows_rejected" BIGINT""",
    """CREATE TABLE IF NOT EXISTS ingest_rejects (
  "source" VARCHAR,
  "run_id" VARCHAR,
  "file" VARCHAR,
  "row" BIGINT,
  "column" VARCHAR,
  "value" VARCHAR,
  "reason" VARCHAR,
  "rejected_at" TIMESTAMPTZ
)""",
)
