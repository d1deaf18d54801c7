"""Schema version 12, frozen as it shipped: never edit it.

Serving metrics: per hour, inference server, model and pod, the tokens and requests its counters grew by.
"""

VERSION = 12

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS serving_metrics_hourly (
  "hour" TIMESTAMPTZ,
  "server" VARCHAR,
  "model" VARCHAR,
  "namespace" VARCHAR,
  "pod" VARCHAR,
  "host" VARCHAR,
  "input_tokens" DOUBLE,
  "output_tokens" DOUBLE,
  "requests" DOUBLE,
  "prefill_seconds" DOUBLE,
  "decode_seconds" DOUBLE,
  "counter_resets" INTEGER,
  "samples" INTEGER,
  "source" VARCHAR,
  "ingest_run_id" VARCHAR
)""",
)
