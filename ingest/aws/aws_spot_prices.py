"""``aws_spot_prices``: EC2 DescribeSpotPriceHistory for GPU instance types → ``spot_prices``.

For every configured region and every GPU instance type (``instance_types`` in the config, else
every type DescribeInstanceTypes reports with ``GpuInfo``), the Linux/UNIX spot price history is
read page by page from the region's watermark minus a one-hour lookback. A price point is one
(zone, instance type, product, timestamp): a point already stored is never stored again, so runs
overlap freely. A full refresh replaces the points the API returns (older history stays).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa

from gpufinops.ingest.aws import aws_common, doctor
from gpufinops.ingest.core import paging, registry, spec_facts
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import option
from gpufinops.warehouse import reference_schema

log = logging.getLogger(__name__)

PRODUCT = "Linux/UNIX"
LOOKBACK = timedelta(hours=1)
DEFAULT_HISTORY = timedelta(days=30)  # first run: AWS keeps 90 days; 30 is enough for the spot model
TYPES_PER_CALL = 100


@dataclass(frozen=True, kw_only=True)
class AwsRegionsOptions(aws_common.AwsClientOptions):
    """The options of a source reading GPU instance types region by region."""

    regions: str | list[str] = option(doc="the AWS regions to read (a name or a list)")
    instance_types: list[str] | None = option(
        None, "instance types to read besides (spot: instead of) every type DescribeInstanceTypes reports with GpuInfo"
    )

    def region_names(self) -> list[str]:
        return [self.regions] if isinstance(self.regions, str) else list(self.regions)


@dataclass(frozen=True, kw_only=True)
class AwsSpotPricesOptions(AwsRegionsOptions):
    pass


def gpu_instance_types(ec2: Any, source: str, region: str) -> list[dict]:
    """Every instance type of the region that has GPUs (DescribeInstanceTypes, paginated)."""
    found = []
    try:
        pages = paging.Pages(source, f"DescribeInstanceTypes in {region}")
        for page in pages.each(ec2.get_paginator("describe_instance_types").paginate()):
            found += [t for t in page.get("InstanceTypes", []) if t.get("GpuInfo", {}).get("Gpus")]
    except Exception as exc:
        if aws_common.is_client_error(exc):
            raise aws_common.describe_error(source, f"DescribeInstanceTypes in {region}", exc) from None
        raise
    return sorted(found, key=lambda t: t["InstanceType"])


def _history(ec2: Any, source: str, region: str, types: list[str], start: datetime, end: datetime) -> list[dict]:
    points = []
    paginator = ec2.get_paginator("describe_spot_price_history")
    try:
        for i in range(0, len(types), TYPES_PER_CALL):
            pages = paging.Pages(source, f"DescribeSpotPriceHistory in {region}")
            for page in pages.each(
                paginator.paginate(
                    InstanceTypes=types[i : i + TYPES_PER_CALL],
                    ProductDescriptions=[PRODUCT],
                    StartTime=start,
                    EndTime=end,
                )
            ):
                points += page.get("SpotPriceHistory", [])
    except Exception as exc:
        if aws_common.is_client_error(exc):
            raise aws_common.describe_error(source, f"DescribeSpotPriceHistory in {region}", exc) from None
        raise
    return points


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _table(region: str, points: list[dict]) -> pa.Table:
    rows = {}
    for p in points:
        ts = _utc(p["Timestamp"])
        key = (p["AvailabilityZone"], p["InstanceType"], p["ProductDescription"], ts)
        rows[key] = Decimal(str(p["SpotPrice"]))
    keys = sorted(rows)
    return pa.table(
        {
            "provider": ["aws"] * len(keys),
            "region": [region] * len(keys),
            "zone": [k[0] for k in keys],
            "instance_type": [k[1] for k in keys],
            "product": [k[2] for k in keys],
            "ts": [k[3] for k in keys],
            "price_usd": [rows[k] for k in keys],
        },
        schema=reference_schema.SPOT_PRICES,
    )


def _point_keys(data: pa.Table) -> list[str]:
    """The slice key of every point (the meta's slice_expr, computed here)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    columns = [data.column(c).to_pylist() for c in ("provider", "zone", "instance_type", "product", "ts")]
    return [f"{p}|{z}|{t}|{d}|{(ts - epoch) // timedelta(microseconds=1)}" for p, z, t, d, ts in zip(*columns)]


class AwsSpotPrices:
    meta = registry.IngestorMeta(
        **spec_facts.AWS_API,
        name="aws_spot_prices",
        target_table="spot_prices",
        key=("provider", "region", "zone", "instance_type", "product", "ts"),
        slice_expr="provider || '|' || zone || '|' || instance_type || '|' || product || '|' || CAST(epoch_us(ts) AS VARCHAR)",
        source_column=None,  # spot_prices has no source column: points are deduplicated on their key
        cursor=registry.Cursor(remembers="newest price timestamp per region", resume_item=None),
        lookback=LOOKBACK,
        default_schedule="0 * * * *",
        options=AwsSpotPricesOptions,
        time_range=True,
        description="EC2 `DescribeSpotPriceHistory` (Linux/UNIX) of every GPU type `DescribeInstanceTypes` "
        "reports with `GpuInfo`",
        freshness=registry.Freshness(kind="prices", lag_hours=24.0),
        doctor=doctor.aws_spot_prices,
        init=("aws_cur_bucket", "aws_cur_path"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: AwsSpotPricesOptions = ctx.options
        window = ctx.window
        now = datetime.now(UTC).replace(microsecond=0)
        until = min(window.until, now) if window.until else now
        marks: dict[str, str] = dict(ctx.state.get("regions", {}))
        tables = []
        for region in options.region_names():
            ec2 = aws_common.client("ec2", ctx.source, options, region=region)
            types = options.instance_types or [t["InstanceType"] for t in gpu_instance_types(ec2, ctx.source, region)]
            if not types:
                raise IngestError(f"{ctx.source}: DescribeInstanceTypes in {region} reported no GPU instance type")
            # the cursor is one time per region, not one per source: the runner's window gives the
            # range (--since) and each region resumes from its own mark minus the lookback
            if window.ranged and window.since:
                start = window.since
            elif region in marks:
                start = datetime.fromisoformat(marks[region]) - LOOKBACK
            else:
                start = until - DEFAULT_HISTORY
            points = _history(ec2, ctx.source, region, sorted(types), start, until)
            log.info(
                "%s: %s: %d spot price point(s) for %d type(s) since %s",
                ctx.source,
                region,
                len(points),
                len(types),
                start.isoformat(),
            )
            table = _table(region, points)
            if table.num_rows:
                newest = max(table.column("ts").to_pylist()).isoformat()
                marks[region] = max(marks.get(region, newest), newest)
            tables.append(table)
        data = pa.concat_tables(tables)
        watermark = min(marks.values()) if marks else None
        state = {"regions": marks}
        if ctx.window.full_refresh:  # replace exactly the points the API returned; older history stays
            return FetchResult([Batch("spot_prices", data, _point_keys(data))], state, watermark=watermark)
        name = f"_spot_{hashlib.sha256(ctx.run_id.encode()).hexdigest()[:12]}"
        ctx.con.register(name, data)
        new = ctx.con.execute(
            f"SELECT count(*) FROM {name} n WHERE NOT EXISTS (SELECT 1 FROM spot_prices s "
            f"WHERE s.provider = n.provider AND s.zone = n.zone AND s.instance_type = n.instance_type "
            f"AND s.product = n.product AND s.ts = n.ts)"
        ).fetchall()[0][0]
        if not new:
            ctx.con.unregister(name)
            return FetchResult([], state, watermark=watermark, skipped_reason="no new spot price point")
        sql = (
            f"SELECT * FROM {name} n WHERE NOT EXISTS (SELECT 1 FROM spot_prices s WHERE s.provider = n.provider "
            f"AND s.zone = n.zone AND s.instance_type = n.instance_type AND s.product = n.product AND s.ts = n.ts) "
            f"AND n.provider = {sql_literal('aws')}"
        )
        return FetchResult([Batch("spot_prices", sql, [])], state, watermark=watermark)


INGESTORS = [AwsSpotPrices]
