"""Schema version 4, frozen as it shipped (commit 41caabfc37e6): never edit it.

Recommendations keep their model version and evidence fingerprint; price catalogue and history, report and
webhook deliveries, the job ledger.
"""

VERSION = 4

STATEMENTS: tuple[str, ...] = (
    """ALTER TABLE recommendations ADD COLUMN IF NOT EXISTS "model_version" VARCHAR""",
    """ALTER TABLE recommendations ADD COLUMN IF NOT EXISTS "evidence_hash" VARCHAR""",
    """CREATE TABLE IF NOT EXISTS price_catalog (
  "provider" VARCHAR,
  "service_id" VARCHAR,
  "sku_id" VARCHAR,
  "description" VARCHAR,
  "resource_family" VARCHAR,
  "resource_group" VARCHAR,
  "usage_type" VARCHAR,
  "region" VARCHAR,
  "gpu_model" VARCHAR,
  "usage_unit" VARCHAR,
  "currency" VARCHAR,
  "start_usage_amount" DECIMAL(38,15),
  "unit_price" DECIMAL(38,15),
  "effective_time" TIMESTAMPTZ,
  "flag" VARCHAR,
  "source" VARCHAR,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS price_history (
  "provider" VARCHAR,
  "region" VARCHAR,
  "instance_type" VARCHAR,
  "pricing" VARCHAR,
  "effective_from" TIMESTAMPTZ,
  "price" DECIMAL(18,8),
  "currency" VARCHAR,
  "source" VARCHAR,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS report_deliveries (
  "report" VARCHAR,
  "week" VARCHAR,
  "recipient" VARCHAR,
  "status" VARCHAR,
  "attempts" INTEGER,
  "message_id" VARCHAR,
  "sent_at" TIMESTAMPTZ,
  "error" VARCHAR,
  "updated_at" TIMESTAMPTZ
)""",
    """CREATE TABLE IF NOT EXISTS webhook_deliveries (
  "delivery_id" VARCHAR,
  "url" VARCHAR,
  "payload_sha256" VARCHAR,
  "recommendation_ids" VARCHAR,
  "status" VARCHAR,
  "attempts" INTEGER,
  "last_attempt_at" TIMESTAMPTZ,
  "http_status" INTEGER,
  "error" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS job_runs (
  "run_id" VARCHAR,
  "job" VARCHAR,
  "started_at" TIMESTAMPTZ,
  "finished_at" TIMESTAMPTZ,
  "status" VARCHAR,
  "error" VARCHAR
)""",
)
