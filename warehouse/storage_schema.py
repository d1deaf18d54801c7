"""The storage inventory's columns (v14): volumes, snapshots, grouped objects under configured prefixes,
and the measured volume operations and prefix reads beside them.

Written by the storage inventory (``ingest/storage``), one slice per configured inventory source, and
read by the storage models (``models/storage_*.py``, ``models/checkpoint_lifecycle.py``).
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_types import UTC_TS

# An object-store prefix: the bucket and the key prefix under it (as configured).
_PREFIX: tuple[pa.Field, ...] = (
    pa.field("bucket", pa.string()),
    pa.field("prefix", pa.string()),
)

# When the inventory saw the row, and the ingest run that did (the slice a re-load replaces).
_OBSERVED: tuple[pa.Field, ...] = (
    pa.field("observed_at", UTC_TS),
    pa.field("ingest_run_id", pa.string()),
)

# A block volume (EBS volume, Persistent Disk): its shape, whether it is attached and to what, and the
# GPU resource it was last attached to (the instance's type says whether that was GPU work).
STORAGE_VOLUMES = pa.schema(
    [
        ("source", pa.string()),
        ("provider", pa.string()),
        ("region", pa.string()),
        ("zone", pa.string()),
        ("volume_id", pa.string()),
        ("volume_type", pa.string()),
        ("size_gib", pa.float64()),
        ("iops", pa.float64()),
        ("throughput_mibps", pa.float64()),
        ("state", pa.string()),
        ("attached_instance_id", pa.string()),  # attached now (NULL: unattached)
        ("last_instance_id", pa.string()),
        ("last_instance_type", pa.string()),
        ("last_attached_at", UTC_TS),
        ("detached_at", UTC_TS),
        ("created_at", UTC_TS),
        ("team", pa.string()),
        ("tags", pa.string()),
        *_OBSERVED,
    ]
)

# A volume snapshot (EBS snapshot, PD snapshot): its age, size and the volume it came from.
STORAGE_SNAPSHOTS = pa.schema(
    [
        ("source", pa.string()),
        ("provider", pa.string()),
        ("region", pa.string()),
        ("snapshot_id", pa.string()),
        ("volume_id", pa.string()),
        ("size_gib", pa.float64()),
        ("started_at", UTC_TS),
        ("team", pa.string()),
        ("tags", pa.string()),
        *_OBSERVED,
    ]
)

# Objects under one configured prefix, grouped by (run, checkpoint, storage class): the first path
# segment under the prefix names the run, the second the checkpoint (a file directly under a run is its
# own checkpoint). ``access`` is 'ok' or the sentence saying why the prefix could not be listed.
STORAGE_OBJECTS = pa.schema(
    [
        ("source", pa.string()),
        ("provider", pa.string()),
        *_PREFIX,
        ("purpose", pa.string()),  # checkpoint | dataset
        ("team", pa.string()),
        ("run", pa.string()),
        ("checkpoint", pa.string()),
        ("storage_class", pa.string()),
        ("objects", pa.int64()),
        ("bytes", pa.int64()),
        ("oldest_at", UTC_TS),
        ("newest_at", UTC_TS),
        ("access", pa.string()),
        *_OBSERVED,
    ]
)

# Measured operations: a volume's read/write operations and bytes per hour (CloudWatch AWS/EBS, Cloud
# Monitoring), and a prefix's GET requests per day (S3 request metrics of a filter on that prefix).
STORAGE_VOLUME_OPS_HOURLY = pa.schema(
    [
        ("source", pa.string()),
        ("volume_id", pa.string()),
        ("hour", UTC_TS),
        ("read_ops", pa.float64()),
        ("write_ops", pa.float64()),
        ("read_bytes", pa.float64()),
        ("write_bytes", pa.float64()),
        ("ingest_run_id", pa.string()),
    ]
)
STORAGE_PREFIX_READS_DAILY = pa.schema(
    [
        ("source", pa.string()),
        *_PREFIX,
        ("day", UTC_TS),
        ("get_requests", pa.float64()),
        ("ingest_run_id", pa.string()),
    ]
)

STORAGE_TABLES = {
    "storage_volumes": STORAGE_VOLUMES,
    "storage_snapshots": STORAGE_SNAPSHOTS,
    "storage_objects": STORAGE_OBJECTS,
    "storage_volume_ops_hourly": STORAGE_VOLUME_OPS_HOURLY,
    "storage_prefix_reads_daily": STORAGE_PREFIX_READS_DAILY,
}
