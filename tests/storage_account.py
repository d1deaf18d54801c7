"""A held-out AWS account in moto for the storage models: GPU instances and their volumes, a terminated GPU
instance's volume, old snapshots, checkpoint prefixes with ages, CloudWatch operations, and its bill.

Two things the real APIs cannot be asked to do are done inside the in-process moto server, and only here:
objects and snapshots are created at chosen past times (moto's clock is set while they are created: S3 and
EC2 stamp the creation time themselves), and a checkpoint object's declared size is set on moto's own key
(real checkpoints are gigabytes; the test uploads a few bytes). Everything else goes through boto3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.warehouse import cost_schema

ACCOUNT = "123456789012"
REGION = "us-east-1"
RATES = {  # the bill's own rates, $ per unit-month (us-east-1 list prices)
    "EBS:VolumeUsage.gp3": Decimal("0.08"),
    "EBS:VolumeP-IOPS.gp3": Decimal("0.005"),
    "EBS:VolumeP-Throughput.gp3": Decimal("0.04"),
    "EBS:VolumeUsage.io2": Decimal("0.125"),
    "EBS:VolumeP-IOPS.io2": Decimal("0.065"),
    "EBS:VolumeUsage.piops": Decimal("0.125"),
    "EBS:VolumeP-IOPS.piops": Decimal("0.065"),
    "EBS:SnapshotUsage": Decimal("0.05"),
    "TimedStorage-ByteHrs": Decimal("0.023"),
    "TimedStorage-GIR-ByteHrs": Decimal("0.004"),
}
GIB = 2**30


@contextlib.contextmanager
def moto_clock(at: datetime) -> Iterator[None]:
    """moto stamps S3 objects and EBS volumes/snapshots with this time while the block runs."""
    import moto.ec2.models.elastic_block_store as ebs
    import moto.s3.models as s3m

    saved = (ebs.utcnow, s3m.utcnow)
    naive = at.astimezone(UTC).replace(tzinfo=None)
    ebs.utcnow = s3m.utcnow = lambda: naive
    try:
        yield
    finally:
        ebs.utcnow, s3m.utcnow = saved


def declare_size(bucket: str, key: str, size: int) -> None:
    from moto.s3.models import s3_backends

    s3_backends[ACCOUNT]["aws"].buckets[bucket].keys.getlist(key)[-1].contentsize = size


def clients(endpoint: str):
    import boto3

    from gpufinops.ingest.storage.aws_inventory import Clients

    make = lambda service: lambda region: boto3.client(service, region_name=region, endpoint_url=endpoint)  # noqa: E731
    return Clients(
        ec2=make("ec2"), cloudwatch=make("cloudwatch"), s3=boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    )


def _instance(ec2: Any, instance_type: str, team: str) -> str:
    return ec2.run_instances(
        ImageId="ami-12c6146b",  # one of moto's own images (listing them all takes seconds)
        InstanceType=instance_type,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": team}]}],
    )["Instances"][0]["InstanceId"]


def _volume(ec2: Any, kind: str, size: int, iops: int | None = None, team: str | None = None, **extra: Any) -> str:
    args: dict[str, Any] = {"AvailabilityZone": f"{REGION}a", "Size": size, "VolumeType": kind, **extra}
    if iops:
        args["Iops"] = iops
    if team:
        args["TagSpecifications"] = [{"ResourceType": "volume", "Tags": [{"Key": "team", "Value": team}]}]
    return ec2.create_volume(**args)["VolumeId"]


def _ops(cw: Any, volume_id: str, end: datetime, iops: float, mibps: float, hours: int = 14 * 24) -> None:
    data = []
    for h in range(hours):
        ts = end - timedelta(hours=h + 1)
        share = 1.0 if h == 30 else 0.4  # one busiest hour; the rest lower
        for name, value in (
            ("VolumeReadOps", iops * 3600 * share * 0.7),
            ("VolumeWriteOps", iops * 3600 * share * 0.3),
            ("VolumeReadBytes", mibps * 2**20 * 3600 * share),
            ("VolumeWriteBytes", 0.0),
        ):
            data.append(
                {
                    "MetricName": name,
                    "Timestamp": ts,
                    "Value": value,
                    "Dimensions": [{"Name": "VolumeId", "Value": volume_id}],
                }
            )
    for at in range(0, len(data), 500):
        cw.put_metric_data(Namespace="AWS/EBS", MetricData=data[at : at + 500])


def plant(endpoint: str, now: datetime) -> dict[str, Any]:
    """Create the account; returns the ids and the clock times the inventory is to be taken at."""
    c = clients(endpoint)
    ec2, cw, s3 = c.ec2(REGION), c.cloudwatch(REGION), c.s3
    ids: dict[str, Any] = {}
    ids["p4d"] = _instance(ec2, "p4d.24xlarge", "vision")
    ids["g5"] = _instance(ec2, "g5.12xlarge", "speech")
    ids["m5"] = _instance(ec2, "m5.large", "web")
    ids["p5_gone"] = _instance(ec2, "p5.48xlarge", "llm")
    with moto_clock(now - timedelta(days=60)):
        ids["tier"] = _volume(ec2, "io2", 500, 16000, team="vision")  # measured low: → gp3
        ids["busy"] = _volume(ec2, "io1", 800, 20000)  # measured above gp3's baseline: nothing
        ids["unmeasured"] = _volume(ec2, "io2", 200, 8000)  # no metrics: withheld
        ids["cpu_io2"] = _volume(ec2, "io2", 300, 6000)  # a CPU instance's: out of scope
        ids["orphan"] = _volume(ec2, "gp3", 1000)  # the terminated p5's: orphan
        ids["cpu_orphan"] = _volume(ec2, "gp3", 400)  # detached from a CPU instance: out of scope
    for vol, inst, dev in (
        ("tier", "p4d", "/dev/sdf"),
        ("busy", "g5", "/dev/sdf"),
        ("unmeasured", "p4d", "/dev/sdg"),
        ("cpu_io2", "m5", "/dev/sdf"),
        ("orphan", "p5_gone", "/dev/sdf"),
        ("cpu_orphan", "m5", "/dev/sdg"),
    ):
        ec2.attach_volume(VolumeId=ids[vol], InstanceId=ids[inst], Device=dev)
    with moto_clock(now - timedelta(days=200)):
        gone = _volume(ec2, "gp3", 400)
        ids["old_snapshot"] = ec2.create_snapshot(
            VolumeId=gone,
            TagSpecifications=[{"ResourceType": "snapshot", "Tags": [{"Key": "team", "Value": "vision"}]}],
        )["SnapshotId"]
        ids["untagged_snapshot"] = ec2.create_snapshot(VolumeId=gone)["SnapshotId"]  # no team: out of scope
        ec2.delete_volume(VolumeId=gone)
    with moto_clock(now - timedelta(days=20)):
        ids["kept_snapshot"] = ec2.create_snapshot(
            VolumeId=ids["tier"],
            TagSpecifications=[{"ResourceType": "snapshot", "Tags": [{"Key": "team", "Value": "vision"}]}],
        )["SnapshotId"]
    _ops(cw, ids["tier"], now, iops=1200, mibps=40)
    _ops(cw, ids["busy"], now, iops=5200, mibps=200)
    _ops(cw, ids["cpu_io2"], now, iops=300, mibps=5)
    s3.create_bucket(Bucket="ml-ckpt")
    ckpt_gib = {"run-a": 40, "run-b": 25}
    for run, gib in ckpt_gib.items():
        for n, age in enumerate((2, 12, 24, 38, 52, 66, 80, 95, 110, 125)):
            with moto_clock(now - timedelta(days=age, hours=1)):
                for part in ("model.safetensors", "optimizer.pt"):
                    key = f"llm/{run}/step-{1000 * (10 - n):06d}/{part}"
                    s3.put_object(Bucket="ml-ckpt", Key=key, Body=b"x")
                    declare_size("ml-ckpt", key, gib * GIB // 2)
    with moto_clock(now - timedelta(days=100)):
        s3.put_object(Bucket="ml-ckpt", Key="datasets/imagenet/part-0", Body=b"x")  # not configured: never listed
        s3.create_bucket(Bucket="ml-data")
        s3.put_object(Bucket="ml-data", Key="shards/a/0.tar", Body=b"x")
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    cw.put_metric_data(
        Namespace="AWS/S3",
        MetricData=[
            {
                "MetricName": "GetRequests",
                "Timestamp": day - timedelta(days=d, hours=-12),
                "Value": 1.0,
                "Dimensions": [{"Name": "BucketName", "Value": "ml-ckpt"}, {"Name": "FilterId", "Value": "llm"}],
            }
            for d in range(1, 8)
        ],
    )
    ids["ckpt_gib"] = ckpt_gib
    return ids


def options(**extra: Any):
    from gpufinops.ingest.storage.options import StorageOptions

    return StorageOptions.of(
        regions=[REGION],
        prefixes=[
            {"bucket": "ml-ckpt", "prefix": "llm/", "purpose": "checkpoint", "team": "llm", "read_filter": "llm"},
            {"bucket": "ml-data", "prefix": "shards/", "purpose": "dataset", "team": "vision"},
            {"bucket": "no-such-bucket", "prefix": "ckpt/", "purpose": "checkpoint", "team": "speech"},
        ],
        **extra,
    )


def bill(con: duckdb.DuckDBPyConnection, ids: dict[str, Any], now: datetime) -> None:
    """30 days of the account's bill: each volume's, snapshot's and bucket's storage lines at RATES, and the
    GPU instances' usage (their type and GPU count, as a CUR carries them)."""
    rows = []
    start = (now - timedelta(days=30)).replace(hour=0, minute=0, second=0, microsecond=0)

    def line(resource: str, meter: str, quantity_month: Decimal, **extra: Any) -> None:
        for d in range(30):
            q = (quantity_month / 30).quantize(Decimal("1e-12"))
            rows.append(
                {
                    "ProviderName": "AWS",
                    "RegionId": REGION,
                    "SkuMeter": meter,
                    "ResourceId": resource,
                    "ChargeCategory": "Usage",
                    "PricingQuantity": q,
                    "ConsumedQuantity": q,
                    "BilledCost": q * RATES.get(meter, Decimal(1)),
                    "EffectiveCost": q * RATES.get(meter, Decimal(1)),
                    "ChargePeriodStart": start + timedelta(days=d),
                    "ChargePeriodEnd": start + timedelta(days=d + 1),
                    "ServiceName": "Amazon Elastic Compute Cloud",
                    "x_Source": "bill",
                    **extra,
                }
            )

    for vol, kind, size, iops in (
        ("tier", "io2", 500, 16000),
        ("busy", "piops", 800, 20000),
        ("unmeasured", "io2", 200, 8000),
        ("cpu_io2", "io2", 300, 6000),
    ):
        line(ids[vol], f"EBS:VolumeUsage.{kind}", Decimal(size))
        line(ids[vol], f"EBS:VolumeP-IOPS.{kind}", Decimal(iops))
    for vol, size in (("orphan", 1000), ("cpu_orphan", 400)):
        line(ids[vol], "EBS:VolumeUsage.gp3", Decimal(size))
    line(ids["old_snapshot"], "EBS:SnapshotUsage", Decimal(400))
    line(ids["kept_snapshot"], "EBS:SnapshotUsage", Decimal(120))
    stored = Decimal(sum(ids["ckpt_gib"].values()) * 10)
    line("ml-ckpt", "TimedStorage-ByteHrs", stored)
    line("ml-ckpt", "TimedStorage-GIR-ByteHrs", Decimal(10))  # the account already keeps some objects in Glacier IR
    for inst, kind, gpus, team in (
        ("p4d", "p4d.24xlarge", 8, "vision"),
        ("g5", "g5.12xlarge", 4, "speech"),
        ("p5_gone", "p5.48xlarge", 8, "llm"),
        ("m5", "m5.large", None, "web"),
    ):
        line(ids[inst], "BoxUsage:" + kind, Decimal(720), x_InstanceType=kind, x_GpuCount=gpus, x_Team=team)
    con.register(
        "bill_lines",
        pa.Table.from_pylist(
            [{f.name: r.get(f.name) for f in cost_schema.COST_LINE_ITEMS} for r in rows],
            schema=cost_schema.COST_LINE_ITEMS,
        ),
    )
    con.execute("INSERT INTO cost_line_items BY NAME SELECT * FROM bill_lines")
    con.unregister("bill_lines")
