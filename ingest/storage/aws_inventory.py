"""The AWS storage inventory through boto3: EBS volumes and snapshots, objects under configured S3 prefixes,
CloudWatch ``AWS/EBS`` operations of provisioned-IOPS volumes and ``AWS/S3`` GETs of a prefix's filter.

A pure fetch with the clients passed in (``Clients``): every listing is paged through
``ingest.core.paging.Pages`` (bounded pages and time, a repeated token stops it), only configured prefixes
are listed (never a bucket's whole key space), and objects are folded into (run, checkpoint, storage class)
groups while they are read, so memory grows with checkpoints, not objects. A volume that is unattached now
keeps the instance it was last seen attached to in the previous inventory (``previous``): EC2 forgets it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gpufinops.ingest.core.paging import Pages
from gpufinops.ingest.storage.options import PrefixRule, StorageOptions
from gpufinops.ingest.storage.prefix_groups import PrefixGroups

IOPS_TYPES = ("io1", "io2")  # provisioned-IOPS volumes: the ones whose measured operations are read
EBS_METRICS = ("VolumeReadOps", "VolumeWriteOps", "VolumeReadBytes", "VolumeWriteBytes")
QUERIES_PER_CALL = 500  # GetMetricData's limit


@dataclass
class Clients:
    """boto3 clients by region (ec2, cloudwatch) and one s3 client."""

    ec2: Callable[[str], Any]
    cloudwatch: Callable[[str], Any]
    s3: Any


@dataclass
class Inventory:
    """Rows per storage table (``warehouse.storage_schema``), plain dicts; ``scope`` counts what was read."""

    volumes: list[dict] = field(default_factory=list)
    snapshots: list[dict] = field(default_factory=list)
    objects: list[dict] = field(default_factory=list)
    volume_ops: list[dict] = field(default_factory=list)
    prefix_reads: list[dict] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)


def _tags(items: list[dict] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or () if "Key" in t}


def _team(tags: dict[str, str], keys: list[str]) -> str | None:
    return next((tags[k] for k in keys if tags.get(k)), None)


def _paged(pages: Pages, client: Any, method: str, **kwargs: Any) -> Iterator[dict]:
    """Every page of ``client.method``'s listing, bounded (``Pages``); a refusal or an answer botocore can
    not read (a size ``NaN``, a time ``yesterday``) is one sentence naming the call, server and object."""
    from gpufinops.ingest.aws.aws_common import describe_error, is_client_error, unreadable_answer
    from gpufinops.ingest.core.transport_sdk import last_answer

    try:
        yield from pages.each(client.get_paginator(method).paginate(**kwargs))
    except (ValueError, RuntimeError) as exc:  # botocore's parser: an integer or time it can not read
        operation = client.meta.method_to_api_mapping.get(method, method)
        raise unreadable_answer(pages.source, pages.what, exc, last_answer(client, operation)) from None
    except Exception as exc:
        if not is_client_error(exc):
            raise
        raise describe_error(pages.source, pages.what, exc) from None


def _listing(pages: Pages, paginator: Any, **kwargs: Any) -> Iterator[dict]:
    yield from pages.each(paginator.paginate(**kwargs))


def _call(client: Any, operation: str, region: str | None = None) -> str:
    from gpufinops.ingest.aws.aws_common import call_name

    return call_name(client, operation, region)


def _instance_types(ec2: Any, ids: set[str], pages: Pages) -> dict[str, str]:
    """instance id -> type, for the instances volumes are attached to (terminated ones while EC2 lists them)."""
    out: dict[str, str] = {}
    wanted = sorted(ids)
    for start in range(0, len(wanted), 200):
        chunk = wanted[start : start + 200]
        for page in _paged(pages, ec2, "describe_instances", Filters=[{"Name": "instance-id", "Values": chunk}]):
            for reservation in page.get("Reservations", []):
                for inst in reservation.get("Instances", []):
                    out[inst["InstanceId"]] = inst.get("InstanceType")
    return out


def volumes(
    source: str,
    ec2: Any,
    region: str,
    options: StorageOptions,
    now: datetime,
    previous: dict[str, dict],
    inv: Inventory,
) -> None:
    pages = Pages(source, _call(ec2, "DescribeVolumes", region), bounds=options.bounds())
    rows = []
    for page in _paged(pages, ec2, "describe_volumes", PaginationConfig={"PageSize": 500}):
        for vol in page.get("Volumes", []):
            tags = _tags(vol.get("Tags"))
            attached = next(
                (a for a in vol.get("Attachments", []) if a.get("State") in ("attached", "attaching")), None
            )
            before = previous.get(vol["VolumeId"], {})
            row = {
                "source": source,
                "provider": "aws",
                "region": region,
                "zone": vol.get("AvailabilityZone"),
                "volume_id": vol["VolumeId"],
                "volume_type": vol.get("VolumeType"),
                "size_gib": float(vol.get("Size") or 0),
                "iops": _num(vol.get("Iops")),
                "throughput_mibps": _num(vol.get("Throughput")),
                "state": vol.get("State"),
                "attached_instance_id": attached["InstanceId"] if attached else None,
                "last_instance_id": attached["InstanceId"] if attached else before.get("last_instance_id"),
                "last_instance_type": before.get("last_instance_type") if not attached else None,
                "last_attached_at": _utc(attached.get("AttachTime")) if attached else before.get("last_attached_at"),
                "detached_at": None
                if attached
                else (before.get("detached_at") or (now if before.get("attached_instance_id") else None)),
                "created_at": _utc(vol.get("CreateTime")),
                "team": _team(tags, options.team_tag_keys),
                "tags": json.dumps(tags, sort_keys=True) if tags else None,
                "observed_at": now,
            }
            if attached is None and before.get("attached_instance_id"):
                row["last_attached_at"] = before.get("observed_at") or before.get("last_attached_at")
            rows.append(row)
    wanted = {r["attached_instance_id"] for r in rows if r["attached_instance_id"]}
    types = _instance_types(
        ec2, wanted, Pages(source, _call(ec2, "DescribeInstances", region), bounds=options.bounds())
    )
    for row in rows:
        if row["attached_instance_id"]:
            row["last_instance_type"] = types.get(row["attached_instance_id"])
    inv.volumes.extend(rows)
    inv.calls["DescribeVolumes"] = inv.calls.get("DescribeVolumes", 0) + pages.pages


def snapshots(source: str, ec2: Any, region: str, options: StorageOptions, now: datetime, inv: Inventory) -> None:
    pages = Pages(source, _call(ec2, "DescribeSnapshots", region), bounds=options.bounds())
    for page in _paged(pages, ec2, "describe_snapshots", OwnerIds=["self"], PaginationConfig={"PageSize": 1000}):
        for snap in page.get("Snapshots", []):
            tags = _tags(snap.get("Tags"))
            inv.snapshots.append(
                {
                    "source": source,
                    "provider": "aws",
                    "region": region,
                    "snapshot_id": snap["SnapshotId"],
                    "volume_id": snap.get("VolumeId"),
                    "size_gib": float(snap.get("VolumeSize") or 0),
                    "started_at": _utc(snap.get("StartTime")),
                    "team": _team(tags, options.team_tag_keys),
                    "tags": json.dumps(tags, sort_keys=True) if tags else None,
                    "observed_at": now,
                }
            )
    inv.calls["DescribeSnapshots"] = inv.calls.get("DescribeSnapshots", 0) + pages.pages


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def prefix_objects(
    source: str, s3: Any, rule: PrefixRule, options: StorageOptions, now: datetime, inv: Inventory
) -> None:
    """Fold the objects under one configured prefix into (root, run, checkpoint, class) groups."""
    folded = PrefixGroups(rule)
    pages = Pages(source, f"{_call(s3, 'ListObjectsV2')} s3://{rule.bucket}/{rule.literal}", bounds=options.bounds())
    access = "ok"
    try:
        for page in _listing(pages, s3.get_paginator("list_objects_v2"), Bucket=rule.bucket, Prefix=rule.literal):
            for obj in page.get("Contents", []):
                if folded.holds(obj["Key"]):
                    folded.add(obj["Key"], obj.get("StorageClass"), obj.get("Size"), _utc(obj.get("LastModified")))
            if folded.seen >= options.max_objects_per_prefix:
                access = f"partial: listing stopped at {folded.seen} objects (max_objects_per_prefix)"
                break
    except Exception as exc:  # noqa: BLE001  # a prefix without access is named, the others still listed
        from gpufinops.ingest.aws.aws_common import describe_error, is_client_error

        if not is_client_error(exc):
            raise
        access = str(describe_error(source, f"listing s3://{rule.bucket}/{rule.literal}", exc))
        folded.groups = {}
    inv.calls["ListObjectsV2"] = inv.calls.get("ListObjectsV2", 0) + pages.pages
    inv.objects.extend(folded.rows(source, "aws", access, now))


def _metric_rows(
    source: str, cw: Any, queries: list[dict], start: datetime, end: datetime, options: StorageOptions, what: str
) -> Iterator[tuple[str, datetime, float]]:
    """(query id, timestamp, value) of every datapoint of ``queries``, GetMetricData paged and batched."""
    for at in range(0, len(queries), QUERIES_PER_CALL):
        batch = queries[at : at + QUERIES_PER_CALL]
        pages = Pages(source, f"{_call(cw, 'GetMetricData')} ({what})", bounds=options.bounds())
        for page in _paged(pages, cw, "get_metric_data", MetricDataQueries=batch, StartTime=start, EndTime=end):
            for result in page.get("MetricDataResults", []):
                for ts, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    yield result["Id"], ts.astimezone(UTC), float(value)


def volume_ops(source: str, cw: Any, ids: list[str], options: StorageOptions, now: datetime, inv: Inventory) -> None:
    """Hourly read/write operations and bytes of ``ids`` from CloudWatch AWS/EBS (Sum per hour)."""
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=options.metrics_days)
    queries, names = [], {}
    for n, volume_id in enumerate(ids):
        for m, metric in enumerate(EBS_METRICS):
            qid = f"v{n}m{m}"
            names[qid] = (volume_id, metric)
            queries.append(
                {
                    "Id": qid,
                    "ReturnData": True,
                    "MetricStat": {
                        "Stat": "Sum",
                        "Period": 3600,
                        "Metric": {
                            "Namespace": "AWS/EBS",
                            "MetricName": metric,
                            "Dimensions": [{"Name": "VolumeId", "Value": volume_id}],
                        },
                    },
                }
            )
    rows: dict[tuple[str, datetime], dict] = {}
    column = {
        "VolumeReadOps": "read_ops",
        "VolumeWriteOps": "write_ops",
        "VolumeReadBytes": "read_bytes",
        "VolumeWriteBytes": "write_bytes",
    }
    for qid, ts, value in _metric_rows(source, cw, queries, start, end, options, "AWS/EBS"):
        volume_id, metric = names[qid]
        hour = ts.replace(minute=0, second=0, microsecond=0)
        row = rows.setdefault(
            (volume_id, hour),
            {
                "source": source,
                "volume_id": volume_id,
                "hour": hour,
                "read_ops": 0.0,
                "write_ops": 0.0,
                "read_bytes": 0.0,
                "write_bytes": 0.0,
            },
        )
        row[column[metric]] += value
    inv.volume_ops.extend(rows.values())


def prefix_reads(
    source: str, cw: Any, rules: list[PrefixRule], options: StorageOptions, now: datetime, inv: Inventory
) -> None:
    """Daily GET requests of each prefix that names its S3 request-metrics filter (AWS/S3 GetRequests)."""
    measured = [r for r in rules if r.read_filter]
    if not measured:
        return
    end = now.replace(hour=0, minute=0, second=0, microsecond=0)
    start = end - timedelta(days=options.metrics_days)
    queries = [
        {
            "Id": f"p{n}",
            "ReturnData": True,
            "MetricStat": {
                "Stat": "Sum",
                "Period": 86400,
                "Metric": {
                    "Namespace": "AWS/S3",
                    "MetricName": "GetRequests",
                    "Dimensions": [
                        {"Name": "BucketName", "Value": r.bucket},
                        {"Name": "FilterId", "Value": r.read_filter},
                    ],
                },
            },
        }
        for n, r in enumerate(measured)
    ]
    days: dict[tuple[int, datetime], float] = {}
    for qid, ts, value in _metric_rows(source, cw, queries, start, end, options, "AWS/S3"):
        day = ts.replace(hour=0, minute=0, second=0, microsecond=0)
        days[(int(qid[1:]), day)] = days.get((int(qid[1:]), day), 0.0) + value
    for n, rule in enumerate(measured):  # a measured prefix has a row per day, zero where nothing was read
        for d in range(options.metrics_days):
            day = start + timedelta(days=d)
            inv.prefix_reads.append(
                {
                    "source": source,
                    "bucket": rule.bucket,
                    "prefix": rule.literal,
                    "day": day,
                    "get_requests": days.get((n, day), 0.0),
                }
            )


def collect(
    source: str, clients: Clients, options: StorageOptions, now: datetime, previous: dict[str, dict] | None = None
) -> Inventory:
    """The whole inventory of one AWS account (``previous``: volume id -> its row in the last inventory)."""
    inv = Inventory()
    for region in options.regions:
        ec2 = clients.ec2(region)
        volumes(source, ec2, region, options, now, previous or {}, inv)
        snapshots(source, ec2, region, options, now, inv)
        iops_ids = [v["volume_id"] for v in inv.volumes if v["region"] == region and v["volume_type"] in IOPS_TYPES]
        if iops_ids:
            volume_ops(source, clients.cloudwatch(region), iops_ids, options, now, inv)
    for rule in options.rules:
        prefix_objects(source, clients.s3, rule, options, now, inv)
    prefix_reads(source, clients.cloudwatch(options.regions[0]), options.rules, options, now, inv)
    return inv
