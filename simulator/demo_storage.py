"""The demo's storage side: what GPU work leaves behind, on the bill and in the storage inventory.

Three planted findings on the AWS part of the fleet, each with the bill lines that price it (written into
the simulated CUR 2.0 export with their usage types) and the inventory rows the AWS storage inventory would
list: a provisioned-IOPS (io2) dataset volume on a training machine whose measured IOPS stay far under
gp3's baseline; a volume the training machine left unattached 30 days ago; a snapshot 200 days old whose
volume is gone; and a checkpoint prefix of three runs, a checkpoint every 10 days, never read back but for
the newest. Every machine's own gp3 disk is listed too (attached, in scope, nothing to say about it).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from gpufinops.simulator.demo_billing import Machine, _base_line, _costs, _digest, _line
from gpufinops.simulator.demo_prices import HOURS_PER_MONTH

SOURCE = "demo_storage"
RATES = {
    "EBS:VolumeUsage.io2": Decimal("0.125"),
    "EBS:VolumeP-IOPS.io2": Decimal("0.065"),
    "EBS:VolumeUsage.gp3": Decimal("0.08"),
    "EBS:SnapshotUsage": Decimal("0.05"),
    "TimedStorage-ByteHrs": Decimal("0.023"),
    "TimedStorage-GIR-ByteHrs": Decimal("0.004"),
}
REGION_PREFIX = {"us-east-1": "USE1", "us-west-2": "USW2"}
BUCKET, PREFIX, RUNS, CHECKPOINTS, CHECKPOINT_GIB, EVERY_DAYS = "acme-checkpoints", "train/", 3, 12, 150, 10
IO2_GIB, IO2_IOPS, ORPHAN_GIB, SNAPSHOT_GB = 2000, 16000, 1500, 900


def _trainer(machines: list[Machine]) -> Machine | None:
    return next((m for m in machines if m.spec.provider == "aws" and m.spec.workload == "training"), None)


def ids(m: Machine) -> dict[str, str]:
    return {
        "io2": f"vol-0{_digest('io2', m.resource_id)[:16]}",
        "orphan": f"vol-0{_digest('orphan', m.resource_id)[:16]}",
        "gone": f"vol-0{_digest('gone', m.resource_id)[:16]}",
        "snapshot": f"snap-0{_digest('snap', m.resource_id)[:16]}",
    }


def bill_rows(machines: list[Machine], end: datetime, days: int = 30) -> list[dict[str, Any]]:
    """The storage lines of the last ``days`` days (daily, GB-Mo / IOPS-Mo as AWS bills them)."""
    m = _trainer(machines)
    if m is None:
        return []
    v, prefix = ids(m), REGION_PREFIX.get(m.region, m.region)
    stored_gib = RUNS * CHECKPOINTS * CHECKPOINT_GIB
    lines = []
    items = (
        (v["io2"], "EBS:VolumeUsage.io2", IO2_GIB, "GB-Mo"),
        (v["io2"], "EBS:VolumeP-IOPS.io2", IO2_IOPS, "IOPS-Mo"),
        (v["orphan"], "EBS:VolumeUsage.gp3", ORPHAN_GIB, "GB-Mo"),
        (v["snapshot"], "EBS:SnapshotUsage", SNAPSHOT_GB, "GB-Mo"),
        (BUCKET, "TimedStorage-ByteHrs", stored_gib, "GB-Mo"),
        (BUCKET, "TimedStorage-GIR-ByteHrs", 200, "GB-Mo"),
    )
    base = _base_line(m)
    for day in range(days):
        start = end - timedelta(days=days - day)
        for resource, meter, amount, unit in items:
            quantity = Decimal(amount * 24) / HOURS_PER_MONTH
            s3 = meter.startswith("TimedStorage")
            lines.append(
                _line(
                    base,
                    start,
                    timedelta(days=1),
                    {
                        "ResourceId": resource,
                        "ResourceType": "Bucket" if s3 else "Volume",
                        "ServiceName": "Amazon Simple Storage Service" if s3 else base["ServiceName"],
                        "ServiceCategory": "Storage",
                        "ServiceSubcategory": "Object Storage" if s3 else "Block Storage",
                        "ChargeDescription": f"{meter} in {m.region}",
                        "PricingCategory": "Standard",
                        "ConsumedUnit": unit,
                        "PricingUnit": unit,
                        "SkuId": _digest("sku", meter).upper()[:16],
                        "_UsageType": f"{prefix}-{meter}",
                        **_costs(RATES[meter], RATES[meter], RATES[meter], quantity),
                    },
                )
            )
    return lines


def inventory(machines: list[Machine], end: datetime):
    """The inventory the AWS storage inventory would list at ``end`` (ingest/storage/aws_inventory.Inventory)."""
    from gpufinops.ingest.storage.aws_inventory import Inventory

    inv = Inventory()
    common = {"source": SOURCE, "provider": "aws", "observed_at": end, "tags": None, "throughput_mibps": None}
    for n in machines:
        if n.spec.provider != "aws":
            continue
        size = {"training": 2000, "online_inference": 500}.get(n.spec.workload, 1000)
        inv.volumes.append(
            {
                **common,
                "region": n.region,
                "zone": n.spec.zone,
                "volume_id": f"vol-0{_digest('vol', n.resource_id)[:16]}",
                "volume_type": "gp3",
                "size_gib": float(size),
                "iops": 3000.0,
                "throughput_mibps": 125.0,
                "state": "in-use",
                "attached_instance_id": n.resource_id,
                "last_instance_id": n.resource_id,
                "last_instance_type": n.spec.instance_type,
                "last_attached_at": end - timedelta(days=60),
                "detached_at": None,
                "created_at": end - timedelta(days=60),
                "team": n.spec.team,
            }
        )
    m = _trainer(machines)
    if m is None:
        return inv
    v = ids(m)
    shared = {
        **common,
        "region": m.region,
        "zone": m.spec.zone,
        "last_instance_id": m.resource_id,
        "last_instance_type": m.spec.instance_type,
        "team": m.spec.team,
    }
    inv.volumes.append(
        {
            **shared,
            "volume_id": v["io2"],
            "volume_type": "io2",
            "size_gib": float(IO2_GIB),
            "iops": float(IO2_IOPS),
            "state": "in-use",
            "attached_instance_id": m.resource_id,
            "last_attached_at": end - timedelta(days=90),
            "detached_at": None,
            "created_at": end - timedelta(days=90),
        }
    )
    inv.volumes.append(
        {
            **shared,
            "volume_id": v["orphan"],
            "volume_type": "gp3",
            "size_gib": float(ORPHAN_GIB),
            "iops": 3000.0,
            "throughput_mibps": 125.0,
            "state": "available",
            "attached_instance_id": None,
            "last_attached_at": end - timedelta(days=45),
            "detached_at": end - timedelta(days=30),
            "created_at": end - timedelta(days=120),
        }
    )
    inv.snapshots.append(
        {
            "source": SOURCE,
            "provider": "aws",
            "region": m.region,
            "snapshot_id": v["snapshot"],
            "volume_id": v["gone"],
            "size_gib": 1000.0,
            "started_at": end - timedelta(days=200),
            "team": m.spec.team,
            "tags": None,
            "observed_at": end,
        }
    )
    for hour in range(14 * 24):  # the io2 volume's measured operations: a data loader's bursts, ~900 IOPS at most
        busy = 900.0 if hour % 24 == 3 else 250.0
        inv.volume_ops.append(
            {
                "source": SOURCE,
                "volume_id": v["io2"],
                "hour": end - timedelta(hours=hour + 1),
                "read_ops": busy * 3600 * 0.9,
                "write_ops": busy * 3600 * 0.1,
                "read_bytes": busy * 3600 * 64 * 1024,
                "write_bytes": 0.0,
            }
        )
    for run in range(RUNS):
        for c in range(CHECKPOINTS):
            written = end - timedelta(days=EVERY_DAYS * c + run, hours=2)
            inv.objects.append(
                {
                    "source": SOURCE,
                    "provider": "aws",
                    "bucket": BUCKET,
                    "prefix": PREFIX,
                    "purpose": "checkpoint",
                    "team": m.spec.team,
                    "run": f"run-{run + 1}",
                    "checkpoint": f"step-{(CHECKPOINTS - c) * 5000:07d}/",
                    "storage_class": "STANDARD",
                    "objects": 4,
                    "bytes": CHECKPOINT_GIB * 2**30,
                    "oldest_at": written,
                    "newest_at": written,
                    "access": "ok",
                    "observed_at": end,
                }
            )
    day0 = end.replace(hour=0, minute=0, second=0, microsecond=0)
    for d in range(14):  # resumes read the newest checkpoint of a run now and then
        inv.prefix_reads.append(
            {
                "source": SOURCE,
                "bucket": BUCKET,
                "prefix": PREFIX,
                "day": day0 - timedelta(days=d + 1),
                "get_requests": 4.0 if d % 5 == 0 else 0.0,
            }
        )
    return inv


def planted(machines: list[Machine]) -> list[dict[str, Any]]:
    """The storage findings the demo plants (kind, resource) for its evaluation table."""
    m = _trainer(machines)
    if m is None:
        return []
    v = ids(m)
    return [
        {"kind": "storage_tier", "resource_id": v["io2"], "variant": "io2_to_gp3"},
        {"kind": "storage_orphan", "resource_id": v["orphan"], "variant": "orphan_volume"},
        {"kind": "storage_orphan", "resource_id": v["snapshot"], "variant": "orphan_snapshot"},
        {"kind": "checkpoint_lifecycle", "resource_id": f"s3://{BUCKET}/{PREFIX}", "variant": "cold_checkpoints"},
    ]
