"""Schema version 13, frozen as it shipped: never edit it.

Energy and emissions per allocated GPU-hour (warehouse/carbon.py) and the ``[carbon]`` settings they
were computed with. Hours loaded before have no rows until their resource-days are loaded again or
the settings change (every load recomputes what it touches).
"""

VERSION = 13

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS carbon_hourly (
  "hour" TIMESTAMPTZ,
  "resource_id" VARCHAR,
  "provider" VARCHAR,
  "region" VARCHAR,
  "gpu_uuid" VARCHAR,
  "mig_instance" VARCHAR,
  "namespace" VARCHAR,
  "pod" VARCHAR,
  "team" VARCHAR,
  "gpu_hours" DOUBLE,
  "gpu_kwh" DOUBLE,
  "node_kwh" DOUBLE,
  "pue" DOUBLE,
  "kwh" DOUBLE,
  "grid_g_co2e_per_kwh" DOUBLE,
  "kg_co2e" DOUBLE,
  "embodied_kg_co2e" DOUBLE,
  "energy_basis" VARCHAR,
  "node_basis" VARCHAR,
  "pue_source" VARCHAR,
  "intensity_source" VARCHAR,
  "allocation_basis" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS carbon_settings (
  "key" VARCHAR,
  "value" VARCHAR
)""",
)
