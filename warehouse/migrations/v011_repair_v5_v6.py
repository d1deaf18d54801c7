"""Schema version 11: repairs what versions 5 and 6 left behind when they were edited after shipping.

Version 5 first shipped ``cost_daily`` without ``gpu_model``, ``gpu_usage_cost`` and ``gpu_usage_lines``
(added to it in place later), and version 6 first shipped without ``gpu_instance_reference``: a
warehouse made by those commits failed every cost load (the rollup's positional INSERT) and every
reference refresh. The rollup is rebuilt from the line items (it is derived data: exact, nothing
lost), in the column order a fresh warehouse has; the inventory table is created where it is missing.
Frozen: never edit it.
"""

VERSION = 11

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS gpu_instance_reference (
  "provider" VARCHAR,
  "instance_type" VARCHAR,
  "accelerator" VARCHAR,
  "gpu_model" VARCHAR,
  "gpu_count" INTEGER,
  "gpu_fraction" DOUBLE,
  "gpu_memory_gib" DOUBLE,
  "accelerator_model" VARCHAR,
  "accelerator_count" INTEGER,
  "accelerator_memory_gib" DOUBLE,
  "vcpus" INTEGER,
  "memory_gib" DOUBLE,
  "source_url" VARCHAR
)""",
    """DROP TABLE IF EXISTS cost_daily""",
    """CREATE TABLE cost_daily (
  "day" TIMESTAMPTZ,
  "source" VARCHAR,
  "provider" VARCHAR,
  "team" VARCHAR,
  "service" VARCHAR,
  "gpu_model" VARCHAR,
  "billed_cost" DECIMAL(38,15),
  "effective_cost" DECIMAL(38,15),
  "gpu_cost" DECIMAL(38,15),
  "gpu_usage_cost" DECIMAL(38,15),
  "gpu_usage_lines" BIGINT,
  "line_items" BIGINT,
  "last_charge" TIMESTAMPTZ
)""",
    """        INSERT INTO cost_daily
        SELECT make_timestamptz(day_n * 86400000000) AS day, source, provider, team, service, gpu_model,
               billed_cost, effective_cost, gpu_cost, gpu_usage_cost, gpu_usage_lines, line_items, last_charge
        FROM (SELECT epoch_us("ChargePeriodStart") // 86400000000 AS day_n, "x_Source" AS source,
                     "ProviderName" AS provider, "x_Team" AS team, "ServiceName" AS service, "x_GpuModel" AS gpu_model,
                     sum("BilledCost") AS billed_cost, sum("EffectiveCost") AS effective_cost,
                     coalesce(sum("EffectiveCost") FILTER (WHERE ("x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL)), 0) AS gpu_cost,
                     coalesce(sum("EffectiveCost") FILTER (WHERE ("x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL) AND "ChargeCategory" = 'Usage' AND "ResourceId" IS NOT NULL), 0) AS gpu_usage_cost,
                     count(*) FILTER (WHERE ("x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL) AND "ChargeCategory" = 'Usage' AND "ResourceId" IS NOT NULL) AS gpu_usage_lines,
                     count(*) AS line_items, max("ChargePeriodStart") AS last_charge
              FROM cost_line_items WHERE TRUE AND "ChargePeriodStart" IS NOT NULL
              GROUP BY ALL)""",
)
