"""The ``aws_storage`` source: the AWS storage inventory (``aws_inventory``) as a registered ingestor.

Configured like every source (``[sources.storage] type = "aws_storage"``, its keys ``StorageOptions``) and
run by ``gpufinops ingest`` / ``serve`` through the ingest runner: a ledger row per run, the rows checked
against the storage tables' domains (warehouse/domains.py) in the load, one transaction. A run replaces the
source's volumes, snapshots and prefix groups (the latest listing) and the measured hours and days it read
(older ones are kept). The inventory is taken at the whole hour: a second run within the hour that lists the
same account is skipped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.core import registry, spec_facts
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.storage import aws_inventory, doctor
from gpufinops.ingest.storage.options import StorageOptions
from gpufinops.warehouse.storage_schema import STORAGE_TABLES

# The clock an inventory is taken by (the storage models' "now" is the newest observation).
clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731

# table -> (slice expression of a replaced slice, the columns naming a row in an error)
SLICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "storage_volumes": ("source", ("volume_id",)),
    "storage_snapshots": ("source", ("snapshot_id",)),
    "storage_objects": ("source", ("bucket", "prefix", "run", "checkpoint")),
    "storage_volume_ops_hourly": ("volume_id || '|' || CAST(epoch(hour) AS BIGINT)", ("volume_id", "hour")),
    "storage_prefix_reads_daily": (
        "bucket || '|' || prefix || '|' || CAST(epoch(day) AS BIGINT)",
        ("bucket", "prefix", "day"),
    ),
}


# table -> the call its rows come from: a value outside its domain names the call, its server and the row
AWS_CALLS = {
    "storage_volumes": "ec2 DescribeVolumes",
    "storage_snapshots": "ec2 DescribeSnapshots",
    "storage_objects": "s3 ListObjectsV2",
    "storage_volume_ops_hourly": "cloudwatch GetMetricData (AWS/EBS)",
    "storage_prefix_reads_daily": "cloudwatch GetMetricData (AWS/S3)",
}


def calls_at(calls: dict[str, str], endpoint: str | None, default: str) -> dict[str, str]:
    """Each table's call at the server it asks (``endpoint``'s host, else ``default``)."""
    host = (endpoint or "").split("://", 1)[-1].split("/", 1)[0] or default
    return {table: f"{call} at {host}" for table, call in calls.items()}


def tables(inv: aws_inventory.Inventory) -> dict[str, list[dict]]:
    return {
        "storage_volumes": inv.volumes,
        "storage_snapshots": inv.snapshots,
        "storage_objects": inv.objects,
        "storage_volume_ops_hourly": inv.volume_ops,
        "storage_prefix_reads_daily": inv.prefix_reads,
    }


def _slices(source: str, table: str, rows: list[dict]) -> list[Any]:
    if table == "storage_volume_ops_hourly":
        return sorted({f"{r['volume_id']}|{int(r['hour'].timestamp())}" for r in rows})
    if table == "storage_prefix_reads_daily":
        return sorted({f"{r['bucket']}|{r['prefix']}|{int(r['day'].timestamp())}" for r in rows})
    return [source]  # the latest listing replaces the source's whole inventory


def previous_volumes(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, dict[str, Any]]:
    """The last inventory's volumes of ``source`` by id (what the next one carries forward)."""
    cur = con.execute("SELECT * FROM storage_volumes WHERE source = ?", [source])
    names = [d[0] for d in cur.description]
    return {row[names.index("volume_id")]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}


def batches(source: str, inv: aws_inventory.Inventory, run_id: str, where: str | dict[str, str]) -> list[Batch]:
    """The inventory as the runner's batches, one per storage table (the volumes counted as its rows);
    ``where``: what an error says the rows came from (per table: the call and its server)."""
    out = []
    for table, rows in tables(inv).items():
        slice_expr, key = SLICES[table]
        data = pa.Table.from_pylist([{**r, "ingest_run_id": run_id} for r in rows], schema=STORAGE_TABLES[table])
        out.append(
            Batch(
                table,
                data,
                _slices(source, table, rows),
                slice_expr=slice_expr,
                source_column="source",
                context=where.get(table, "the storage inventory") if isinstance(where, dict) else where,
                key=key,
                counted=table == "storage_volumes",
            )
        )
    return out


def summary(inv: aws_inventory.Inventory, prefixes: int) -> str:
    refused = sorted({f"s3://{o['bucket']}/{o['prefix']}" for o in inv.objects if o["access"] != "ok"})
    return (
        f"{len(inv.volumes)} volume(s), {len(inv.snapshots)} snapshot(s), "
        f"{sum(o['objects'] for o in inv.objects)} object(s) under {prefixes} prefix(es), "
        f"{len({o['volume_id'] for o in inv.volume_ops})} volume(s) measured"
        + (f"; not listed: {', '.join(refused)}" if refused else "")
    )


def fingerprint(inv: aws_inventory.Inventory) -> str:
    text = json.dumps(tables(inv), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def inventory_hour() -> datetime:
    """The whole UTC hour an inventory is taken at (a second run within it over the same account is skipped)."""
    return clock().astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def loaded(
    ctx: IngestContext, inv: aws_inventory.Inventory, prefixes: int, now: datetime, where: dict[str, str]
) -> FetchResult:
    """The inventory's batches, or nothing when it is the one the last run loaded; ``where``: each table's call
    at its server, what an error names."""
    digest, watermark = fingerprint(inv), summary(inv, prefixes)
    if digest == ctx.state.get("digest"):
        return FetchResult([], ctx.state, watermark=watermark, skipped_reason="the inventory is unchanged this hour")
    return FetchResult(
        batches(ctx.source, inv, ctx.run_id, where),
        {"digest": digest, "observed_at": now.isoformat()},
        watermark=watermark,
    )


class AwsStorage:
    meta = registry.IngestorMeta(
        **spec_facts.AWS_API,
        **spec_facts.STORAGE_INVENTORY,
        name="aws_storage",
        default_schedule="30 5 * * *",
        options=StorageOptions,
        description="AWS storage inventory: EBS volumes and snapshots, objects under configured S3 prefixes, "
        "CloudWatch operations of provisioned-IOPS volumes and GETs of a prefix",
        doctor=doctor.aws_storage,
        init=("aws_storage_prefix",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        from gpufinops.ingest.aws import aws_common

        options: StorageOptions = ctx.options
        source = ctx.source
        if not options.regions:
            raise IngestError(f"sources.{source}.regions: name at least one region")
        now = inventory_hour()
        clients = aws_inventory.Clients(
            ec2=lambda region: aws_common.client("ec2", source, options, region),
            cloudwatch=lambda region: aws_common.client("cloudwatch", source, options, region),
            s3=aws_common.client("s3", source, options, options.regions[0]),
        )
        try:
            inv = aws_inventory.collect(source, clients, options, now, previous_volumes(ctx.con, source))
        except Exception as exc:  # an SDK error: one sentence, never a traceback with request data
            if not aws_common.is_client_error(exc):
                raise
            raise aws_common.describe_error(source, "the storage inventory", exc) from None
        return loaded(ctx, inv, len(options.rules), now, calls_at(AWS_CALLS, options.endpoint_url, "AWS"))


INGESTORS = [AwsStorage]
