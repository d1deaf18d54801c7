"""Schema version 10, frozen as it shipped (commit b18569a4a642): never edit it.

Shared-GPU chargeback: per-workload presence, the allocation built from it and its settings. Hours loaded
before have no workload rows, so they are not allocated until their metrics are loaded again.
"""

VERSION = 10

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS gpu_workloads_hourly (
  "hour" TIMESTAMPTZ,
  "gpu_uuid" VARCHAR,
  "mig_instance" VARCHAR,
  "host" VARCHAR,
  "namespace" VARCHAR,
  "pod" VARCHAR,
  "container" VARCHAR,
  "pid" INTEGER,
  "process" VARCHAR,
  "samples" INTEGER,
  "occupied_samples" INTEGER,
  "sharing" VARCHAR,
  "util_mean" DOUBLE,
  "sm_active_mean" DOUBLE,
  "mem_used_max_mib" DOUBLE,
  "source" VARCHAR,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS gpu_allocation_hourly (
  "hour" TIMESTAMPTZ,
  "resource_id" VARCHAR,
  "provider" VARCHAR,
  "host" VARCHAR,
  "gpu_uuid" VARCHAR,
  "mig_instance" VARCHAR,
  "namespace" VARCHAR,
  "pod" VARCHAR,
  "container" VARCHAR,
  "process" VARCHAR,
  "team" VARCHAR,
  "share" DOUBLE,
  "cost_usd" DECIMAL(38,15),
  "basis" VARCHAR,
  "method" VARCHAR,
  "source" VARCHAR,
  "owner_team" VARCHAR,
  "service" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS allocation_settings (
  "key" VARCHAR,
  "value" VARCHAR
)""",
)
