"""Schema version 7, frozen as it shipped (commit b853574da391): never edit it.

Alerts and their delivery ledger.
"""

VERSION = 7

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS alerts (
  "alert_id" VARCHAR,
  "rule" VARCHAR,
  "scope" VARCHAR,
  "period" VARCHAR,
  "threshold" VARCHAR,
  "severity" VARCHAR,
  "teams" VARCHAR[],
  "title" VARCHAR,
  "summary" VARCHAR,
  "value_usd" DECIMAL(38,15),
  "limit_usd" DECIMAL(38,15),
  "details" JSON,
  "status" VARCHAR,
  "resolution" VARCHAR,
  "opened_at" TIMESTAMPTZ,
  "evaluated_at" TIMESTAMPTZ,
  "closed_at" TIMESTAMPTZ
)""",
    """CREATE TABLE IF NOT EXISTS alert_deliveries (
  "notification_id" VARCHAR,
  "alert_id" VARCHAR,
  "event" VARCHAR,
  "channel" VARCHAR,
  "target" VARCHAR,
  "status" VARCHAR,
  "attempts" INTEGER,
  "message_id" VARCHAR,
  "http_status" INTEGER,
  "error" VARCHAR,
  "created_at" TIMESTAMPTZ,
  "updated_at" TIMESTAMPTZ,
  "sent_at" TIMESTAMPTZ
)""",
)
