"""Schema version 8, frozen as it shipped (commit f52e425b7efc): never edit it.

One plan per resource (plan, plan_id); the on-prem comparison; zero-saving on-prem verdicts stop being
recommendations.
"""

VERSION = 8

STATEMENTS: tuple[str, ...] = (
    """ALTER TABLE recommendations ADD COLUMN IF NOT EXISTS "plan" VARCHAR""",
    """ALTER TABLE recommendations ADD COLUMN IF NOT EXISTS "plan_id" VARCHAR""",
    """CREATE TABLE IF NOT EXISTS onprem_comparison (
  "id" VARCHAR,
  "team" VARCHAR,
  "resource_id" VARCHAR,
  "workload" VARCHAR,
  "pattern" VARCHAR,
  "action" VARCHAR,
  "current" JSON,
  "proposed" JSON,
  "monthly_savings_usd" DECIMAL(18,2),
  "confidence" DOUBLE,
  "evidence" JSON,
  "model_version" VARCHAR,
  "created_at" TIMESTAMPTZ
)""",
    """DELETE FROM recommendations WHERE kind = 'onprem_vs_cloud' AND monthly_savings_usd = 0 AND status = 'open'""",
)
