"""The storage inventory: block volumes and their snapshots, objects under configured bucket prefixes grouped
by run and checkpoint, and the measured volume operations and prefix reads beside them (read by the
storage_tier, storage_orphan and checkpoint_lifecycle models). Frozen: never edit it.
"""

VERSION = 14

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS storage_volumes (
  "source" VARCHAR,
  "provider" VARCHAR,
  "region" VARCHAR,
  "zone" VARCHAR,
  "volume_id" VARCHAR,
  "volume_type" VARCHAR,
  "size_gib" DOUBLE,
  "iops" DOUBLE,
  "throughput_mibps" DOUBLE,
  "state" VARCHAR,
  "attached_instance_id" VARCHAR,
  "last_instance_id" VARCHAR,
  "last_instance_type" VARCHAR,
  "last_attached_at" TIMESTAMPTZ,
  "detached_at" TIMESTAMPTZ,
  "created_at" TIMESTAMPTZ,
  "team" VARCHAR,
  "tags" VARCHAR,
  "observed_at" TIMESTAMPTZ,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS storage_snapshots (
  "source" VARCHAR,
  "provider" VARCHAR,
  "region" VARCHAR,
  "snapshot_id" VARCHAR,
  "volume_id" VARCHAR,
  "size_gib" DOUBLE,
  "started_at" TIMESTAMPTZ,
  "team" VARCHAR,
  "tags" VARCHAR,
  "observed_at" TIMESTAMPTZ,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS storage_objects (
  "source" VARCHAR,
  "provider" VARCHAR,
  "bucket" VARCHAR,
  "prefix" VARCHAR,
  "purpose" VARCHAR,
  "team" VARCHAR,
  "run" VARCHAR,
  "checkpoint" VARCHAR,
  "storage_class" VARCHAR,
  "objects" BIGINT,
  "bytes" BIGINT,
  "oldest_at" TIMESTAMPTZ,
  "newest_at" TIMESTAMPTZ,
  "access" VARCHAR,
  "observed_at" TIMESTAMPTZ,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS storage_volume_ops_hourly (
  "source" VARCHAR,
  "volume_id" VARCHAR,
  "hour" TIMESTAMPTZ,
  "read_ops" DOUBLE,
  "write_ops" DOUBLE,
  "read_bytes" DOUBLE,
  "write_bytes" DOUBLE,
  "ingest_run_id" VARCHAR
)""",
    """CREATE TABLE IF NOT EXISTS storage_prefix_reads_daily (
  "source" VARCHAR,
  "bucket" VARCHAR,
  "prefix" VARCHAR,
  "day" TIMESTAMPTZ,
  "get_requests" DOUBLE,
  "ingest_run_id" VARCHAR
)""",
)
