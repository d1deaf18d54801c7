"""Schema version 3, frozen as it shipped (commit 0187aa37e8c4): never edit it.

Per-process GPU memory (nvidia-smi --query-compute-apps).
"""

VERSION = 3

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS gpu_processes_hourly (
  "hour" TIMESTAMPTZ,
  "gpu_uuid" VARCHAR,
  "host" VARCHAR,
  "pid" INTEGER,
  "process_name" VARCHAR,
  "mem_used_max_mib" DOUBLE,
  "mem_used_mean_mib" DOUBLE,
  "samples" INTEGER,
  "resource_id" VARCHAR,
  "team" VARCHAR,
  "source" VARCHAR,
  "ingest_run_id" VARCHAR
)""",
)
