"""What a provider's storage is billed as and where it lives: ``StorageFacts``, one per provider spec's
``storage`` fact (kernel/providers.py), read by the storage models (models/storage_common.py,
models/storage_orphan.py, models/storage_tier.py, models/checkpoint_lifecycle.py) and the storage export
(jobs/export/storage.py). A fact names a bill meter, never a price: prices are the customer's own bill lines.

The meters are the bill's own words for a line: AWS's usage type (``EBS:VolumeUsage.gp3``), Google Cloud's SKU
description (``SSD backed PD Capacity``), Azure's meter name (``P30 LRS Disk``: the FocusCost ``SkuMeter`` /
``x_SkuMeterName``, the Retail Prices API's ``meterName``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

HOURS_A_MONTH = 730.0  # a meter billed per GiB-hour, times this, is a GiB-month (Azure's 730 hours a month)


@dataclass(frozen=True)
class StorageFacts:
    """One provider's storage: how its bill names a disk's, a snapshot's and a storage class's capacity, the class
    a lifecycle rule moves old checkpoints to, and how users write a bucket's address."""

    disk_meter: Callable[[str, float], tuple[str, float] | None]  # (disk type, GiB) -> (meter, units billed a month)
    snapshot_meter: str  # the meter of a snapshot's GiB-month
    class_meters: Mapping[str, str]  # object storage class -> the meter of its GiB-month
    cold_class: str  # where a lifecycle rule moves checkpoints no run reads
    meter_key: Callable[[str], str | None]  # a bill line's meter -> the canonical meter above, or None
    location: Callable[[str, str], str]  # (bucket, prefix) -> the address users paste


def _prefix_key(meters: tuple[str, ...]) -> Callable[[str], str | None]:
    """A meter key by the meters' leading words (a SKU description carries its region after them)."""
    return lambda meter: next((m for m in meters if meter.startswith(m)), None)


# ---- AWS: EBS volume types, snapshots and S3 classes, by CUR usage type (region prefixes such as USE1- dropped)
AWS_STORAGE_METER = {
    "gp2": "EBS:VolumeUsage.gp2",
    "gp3": "EBS:VolumeUsage.gp3",
    "io1": "EBS:VolumeUsage.piops",
    "io2": "EBS:VolumeUsage.io2",
    "st1": "EBS:VolumeUsage.st1",
    "sc1": "EBS:VolumeUsage.sc1",
    "standard": "EBS:VolumeUsage",
}
S3_CLASS_METER = {
    "STANDARD": "TimedStorage-ByteHrs",
    "GLACIER_IR": "TimedStorage-GIR-ByteHrs",
    "STANDARD_IA": "TimedStorage-SIA-ByteHrs",
    "INTELLIGENT_TIERING": "TimedStorage-INT-FA-ByteHrs",
}
_AWS_METER = re.compile(r"(EBS:[A-Za-z0-9.\-]+|TimedStorage-[A-Za-z0-9\-]+)$")


def _aws_key(meter: str) -> str | None:
    found = _AWS_METER.search(meter.split(":", 1)[-1] if meter.count(":") > 1 else meter)
    found = found or _AWS_METER.search(meter)
    return found.group(1) if found else None


def _aws_disk(volume_type: str, size_gib: float) -> tuple[str, float] | None:
    meter = AWS_STORAGE_METER.get(volume_type)
    return (meter, size_gib) if meter else None


AWS = StorageFacts(
    disk_meter=_aws_disk,
    snapshot_meter="EBS:SnapshotUsage",
    class_meters=S3_CLASS_METER,
    cold_class="GLACIER_IR",
    meter_key=_aws_key,
    location=lambda bucket, prefix: f"s3://{bucket}/{prefix}",
)

# ---- Google Cloud: Persistent Disk types, snapshots and GCS classes, by SKU description
GCP_DISK_METER = {
    "pd-ssd": "SSD backed PD Capacity",
    "pd-balanced": "Balanced PD Capacity",
    "pd-standard": "Storage PD Capacity",
}
GCS_CLASS_METER = {
    "STANDARD": "Standard Storage",
    "NEARLINE": "Nearline Storage",
    "COLDLINE": "Coldline Storage",
    "ARCHIVE": "Archive Storage",
}
GCP_SNAPSHOT_METER = "Storage PD Snapshot"
GCP = StorageFacts(
    disk_meter=lambda kind, gib: (GCP_DISK_METER[kind], gib) if kind in GCP_DISK_METER else None,
    snapshot_meter=GCP_SNAPSHOT_METER,
    class_meters=GCS_CLASS_METER,
    cold_class="COLDLINE",
    meter_key=_prefix_key((*GCP_DISK_METER.values(), GCP_SNAPSHOT_METER, *GCS_CLASS_METER.values())),
    location=lambda bucket, prefix: f"gs://{bucket}/{prefix}",
)

# ---- Azure: managed disks and Blob Storage access tiers, by meter name. Premium SSD (P), Standard SSD (E) and
# Standard HDD (S) are billed per disk a month at the tier their size rounds up to (learn.microsoft.com/azure/
# virtual-machines/disks-understanding-billing: "each disk maps to a supported provisioned disk-size offering");
# Premium SSD v2 and Ultra Disk per GiB-hour of provisioned capacity, their IOPS and throughput apart.
AZURE_TIER_SIZES = (  # the tier number of each provisioned size, GiB (the managed disks pricing page)
    (4, 1),
    (8, 2),
    (16, 3),
    (32, 4),
    (64, 6),
    (128, 10),
    (256, 15),
    (512, 20),
    (1024, 30),
    (2048, 40),
    (4096, 50),
    (8192, 60),
    (16384, 70),
    (32767, 80),
)
AZURE_TIER_LETTER = {"Premium_LRS": "P", "StandardSSD_LRS": "E", "Standard_LRS": "S"}
AZURE_CAPACITY_METER = {
    "PremiumV2_LRS": "Premium LRS Provisioned Capacity",
    "UltraSSD_LRS": "Ultra LRS Provisioned Capacity",
}
AZURE_SNAPSHOT_METER = "LRS Snapshot"
BLOB_TIER_METER = {tier: f"{tier} LRS Data Stored" for tier in ("Hot", "Cool", "Cold", "Archive")}  # per GiB-month
_AZURE_TIER = re.compile(r"^([PES])(\d+) LRS Disk")


def _azure_disk(disk_type: str, size_gib: float) -> tuple[str, float] | None:
    """A managed disk's meter: its tier's (``P30 LRS Disk``, one disk a month) or its provisioned capacity's
    (GiB-hours, 730 a month); None for a type or a size no tier holds."""
    if disk_type in AZURE_CAPACITY_METER:
        return AZURE_CAPACITY_METER[disk_type], size_gib * HOURS_A_MONTH
    letter = AZURE_TIER_LETTER.get(disk_type)
    tier = next((n for gib, n in AZURE_TIER_SIZES if size_gib <= gib), None)
    if letter is None or tier is None:
        return None
    return f"{letter}{max(tier, 4) if letter == 'S' else tier} LRS Disk", 1.0  # Standard HDD starts at S4


def _azure_key(meter: str) -> str | None:
    tier = _AZURE_TIER.match(meter)
    if tier:
        return tier.group(0)
    known = (*AZURE_CAPACITY_METER.values(), AZURE_SNAPSHOT_METER, *BLOB_TIER_METER.values())
    return next((m for m in known if meter.startswith(m)), None)


def blob_location(account_container: str, prefix: str) -> str:
    """``account/container`` and a prefix -> the blob's URL (``https://acct.blob.core.windows.net/c/p``)."""
    account, _, container = account_container.partition("/")
    return f"https://{account}.blob.core.windows.net/{container}/{prefix}"


AZURE = StorageFacts(
    disk_meter=_azure_disk,
    snapshot_meter=AZURE_SNAPSHOT_METER,
    class_meters=BLOB_TIER_METER,
    cold_class="Cool",
    meter_key=_azure_key,
    location=blob_location,
)
