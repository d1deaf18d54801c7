"""Schema version 5, frozen as it shipped (commit a1df5f88cb62): never edit it.

The cost_daily rollup, filled from the line items already loaded. (Shipped without cost_daily's GPU model
and GPU usage columns; v011 rebuilds the rollup with them.)
"""

VERSION = 5

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cost_daily (
  "day" TIMESTAMPTZ,
  "source" VARCHAR,
  "provider" VARCHAR,
  "team" VARCHAR,
  "service" VARCHAR,
  "billed_cost" DECIMAL(38,15),
  "effective_cost" DECIMAL(38,15),
  "gpu_cost" DECIMAL(38,15),
  "line_items" BIGINT,
  "last_charge" TIMESTAMPTZ
)""",
    """        INSERT INTO cost_daily
        SELECT make_timestamptz(day_n * 86400000000) AS day, source, provider, team, service,
               billed_cost, effective_cost, gpu_cost, line_items, last_charge
        FROM (SELECT epoch_us("ChargePeriodStart") // 86400000000 AS day_n, "x_Source" AS source,
                     "ProviderName" AS provider, "x_Team" AS team, "ServiceName" AS service,
                     sum("BilledCost") AS billed_cost, sum("EffectiveCost") AS effective_cost,
                     coalesce(sum("EffectiveCost") FILTER (WHERE ("x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL)), 0) AS gpu_cost,
                     count(*) AS line_items, max("ChargePeriodStart") AS last_charge
              FROM cost_line_items WHERE TRUE AND "ChargePeriodStart" IS NOT NULL
              GROUP BY ALL)""",
)
