"""Schema version 17, frozen as it shipped: never edit it.

Each serving pod-hour's GPU cost, tokens and energy per model (warehouse/serving_costs.py), stored when
the data lands so that a unit-cost read sums rows instead of joining the allocation, the serving counters
and the carbon rows on every read; and the ``[unit_costs]`` settings the rows were computed with. A
warehouse upgraded to this version has no rows and no settings here: its readers compute live until
the first load (or settings change) fills the whole table.
"""

VERSION = 17

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS serving_costs_hourly (
  "hour" TIMESTAMPTZ,
  "server" VARCHAR,
  "model" VARCHAR,
  "namespace" VARCHAR,
  "pod" VARCHAR,
  "team" VARCHAR,
  "basis" VARCHAR,
  "input_tokens" DOUBLE,
  "output_tokens" DOUBLE,
  "requests" DOUBLE,
  "prefill_seconds" DOUBLE,
  "decode_seconds" DOUBLE,
  "gpu_cost_usd" DECIMAL(38, 15),
  "input_cost_usd" DECIMAL(38, 15),
  "kwh" DOUBLE,
  "kg_co2e" DOUBLE
)""",
    """CREATE TABLE IF NOT EXISTS unit_cost_settings (
  "key" VARCHAR,
  "value" VARCHAR
)""",
)
