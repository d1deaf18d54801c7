"""Schema version 16, frozen as it shipped: never edit it.

Each run in ``ingest_runs`` records the freshness its source type's spec declared when it ran
(``freshness_kind``: cost, metrics, prices, inventory or other; ``expected_lag_hours``: older than this
is stale), so the warehouse and the dashboard, which cannot import ingest, read it from the data.
Runs recorded before this version are backfilled from the built-in types' freshness as their specs
declared it when this version shipped: a migration is frozen history, so that table of values is
literal here and is never updated when a spec changes (the next run of a source records the new one).
A run of a type not in it keeps NULLs (warehouse/freshness.py: ``UNREGISTERED``).
"""

VERSION = 16

STATEMENTS: tuple[str, ...] = (
    """ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS "freshness_kind" VARCHAR""",
    """ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS "expected_lag_hours" DOUBLE""",
    """UPDATE ingest_runs SET freshness_kind = shipped.kind, expected_lag_hours = shipped.lag_hours
FROM (VALUES
  ('aws_cur', 'cost', 24.0),
  ('aws_pricing', 'prices', 168.0),
  ('aws_spot_advisor', 'prices', 168.0),
  ('aws_spot_prices', 'prices', 24.0),
  ('aws_storage', 'inventory', 24.0),
  ('cloudwatch_gpu', 'metrics', 2.0),
  ('dcgm_exporter', 'metrics', 1.0),
  ('focus_files', 'cost', 48.0),
  ('gcp_billing_export', 'cost', 24.0),
  ('gcp_catalog', 'prices', 168.0),
  ('gcp_price_history', 'prices', 720.0),
  ('gcp_storage', 'inventory', 24.0),
  ('nvidia_smi_csv', 'metrics', 1.0),
  ('onprem', 'cost', 3.0),
  ('prometheus', 'metrics', 2.0),
  ('prometheus_serving', 'other', 24.0),
  ('serving_exporter', 'other', 24.0)
) AS shipped(source_type, kind, lag_hours)
WHERE ingest_runs.source_type = shipped.source_type AND ingest_runs.freshness_kind IS NULL""",
)
