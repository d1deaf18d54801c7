"""Schema version 6, frozen as it shipped (commit 536c4f623eda): never edit it.

GPU-hours keep their exporter's hints (rows loaded before keep their resolved id as the hint); attribution
rules and withheld findings. (Shipped without gpu_instance_reference; v011 creates it.)
"""

VERSION = 6

STATEMENTS: tuple[str, ...] = (
    """ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "resource_hint" VARCHAR""",
    """ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "provider_id" VARCHAR""",
    """ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "namespace" VARCHAR""",
    """ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "pod" VARCHAR""",
    """ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "container" VARCHAR""",
    """UPDATE gpu_metrics_hourly SET resource_hint = resource_id WHERE resource_hint IS NULL AND resource_id IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS attribution_rules (
  "source" VARCHAR,
  "kind" VARCHAR,
  "key" VARCHAR,
  "value" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS withheld_findings (
  "kind" VARCHAR,
  "resource_id" VARCHAR,
  "team" VARCHAR,
  "provider" VARCHAR,
  "reason" VARCHAR,
  "detail" VARCHAR,
  "missing" VARCHAR,
  "source_hint" VARCHAR,
  "model_version" VARCHAR,
  "created_at" TIMESTAMPTZ
)""",
)
