"""``aws_spot_advisor``: AWS's public Spot Instance Advisor feed → ``spot_interruption_bands``.

The feed (``spot-advisor-data.json``, the data behind aws.amazon.com/ec2/spot/instance-advisor) gives,
per region, OS and instance type, an interruption-frequency band ``r`` (0 = "<5%" … 4 = ">20%" of spot
instances interrupted in the last month; the band labels and upper bounds come from the feed's own
``ranges``) and the saving over on-demand ``s`` (percent). The spot model reads the bands as risk.
Read from ``url`` (default: AWS's public feed; HTTP with a timeout and bounded retries) or a local
``path``; a run replaces the regions it read, an unchanged feed is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from gpufinops.ingest.core import doctor, registry, transport
from gpufinops.ingest.core.bounds import Bounds
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import TransportOptions, option
from gpufinops.warehouse import reference_schema

log = logging.getLogger(__name__)

DEFAULT_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"


def check(source: doctor.ConfiguredSource, base_dir: Path, timeout: float) -> doctor.Result:
    """``gpufinops doctor``'s check: its file matches, or the advisor's JSON answers (here, beside its URL)."""
    opts = doctor.options(source)
    if opts.path:
        return doctor.files(source, base_dir)
    return doctor.http_get(opts.url or DEFAULT_URL, timeout, expect=None)


ATTEMPTS = 4


def _download(source: str, url: str, bounds: Bounds, attempts: int = ATTEMPTS) -> tuple[bytes, datetime | None]:
    """The feed within the source's bounds (``ingest.core.transport``), retried on 429/5xx and connection errors."""
    answer = transport.get_retried(source, url, bounds, {"User-Agent": "gpufinops"}, attempts - 1)
    modified = dict((k.lower(), v) for k, v in answer.headers).get("last-modified")
    return answer.body, parsedate_to_datetime(modified).astimezone(UTC) if modified else None


def parse(source: str, name: str, data: bytes, regions: list[str] | None, updated_at: datetime) -> pa.Table:
    try:
        feed = json.loads(data)
        ranges = {int(r["index"]): (str(r["label"]), int(r["max"])) for r in feed["ranges"]}
        advisor: dict[str, Any] = feed["spot_advisor"]
    except (ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"{source}: {name} is not a spot advisor feed ({type(exc).__name__}: {exc})") from None
    rows = []
    for region in sorted(advisor):
        if regions and region not in regions:
            continue
        for os_name in sorted(advisor[region]):
            for instance_type, item in sorted(advisor[region][os_name].items()):
                band = int(item["r"])
                if band not in ranges:
                    raise IngestError(
                        f"{source}: {name}: {region} {os_name} {instance_type} has band {band}, "
                        f"not one of the feed's ranges"
                    )
                label, upper = ranges[band]
                rows.append(
                    {
                        "provider": "aws",
                        "region": region,
                        "os": os_name,
                        "instance_type": instance_type,
                        "band_index": band,
                        "band_label": label,
                        "band_max_pct": upper,
                        "savings_pct": int(item["s"]) if item.get("s") is not None else None,
                        "source": name,
                        "updated_at": updated_at,
                    }
                )
    if not rows:
        raise IngestError(f"{source}: {name} holds no band for the configured regions")
    return pa.Table.from_pylist(rows, schema=reference_schema.SPOT_INTERRUPTION_BANDS)


@dataclass(frozen=True, kw_only=True)
class AwsSpotAdvisorOptions(TransportOptions):
    url: str = option(DEFAULT_URL, "the Spot Instance Advisor feed's URL")
    path: str | None = option(None, "a local copy of the feed instead of the URL")
    regions: list[str] | None = option(None, "only these AWS regions (default: every region of the feed)")


class AwsSpotAdvisor:
    meta = registry.IngestorMeta(
        name="aws_spot_advisor",
        target_table="spot_interruption_bands",
        key=("provider", "region", "os", "instance_type"),
        slice_expr="provider || '|' || region",
        source_column=None,  # reference data: a run replaces the regions it read
        cursor=registry.Cursor(remembers="digest of the last feed loaded", resume_item=None),
        lookback=timedelta(0),
        default_schedule="0 4 * * *",
        options=AwsSpotAdvisorOptions,
        description="AWS Spot Instance Advisor feed (interruption-frequency bands, savings), from its URL or a "
        "local copy",
        time_range=False,
        provider="aws",
        extra=None,
        transport=registry.Transport(client="http", endpoint="url", paged=False, unless="path"),
        freshness=registry.Freshness(kind="prices", lag_hours=168.0),
        doctor=check,
        init=("aws_cur_bucket", "aws_cur_path"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: AwsSpotAdvisorOptions = ctx.options
        if options.path:
            path = Path(options.path).expanduser()
            if ctx.base_dir and not path.is_absolute():
                path = Path(ctx.base_dir) / path
            if not path.is_file():
                raise IngestError(f"{ctx.source}: path {str(path)!r} does not exist")
            data, name = path.read_bytes(), path.name
            updated_at = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(microsecond=0)
        else:
            url = options.url
            data, modified = _download(ctx.source, url, ctx.options.bounds())
            name, updated_at = url, modified or datetime.now(UTC).replace(microsecond=0)
        regions = options.regions
        digest = hashlib.sha256(data + json.dumps(regions).encode()).hexdigest()
        if digest == ctx.state.get("digest") and not ctx.window.full_refresh:
            return FetchResult.unchanged(ctx.state, "feed unchanged")
        table = parse(ctx.source, name, data, regions, updated_at)
        slices = sorted({f"aws|{r}" for r in table.column("region").to_pylist()})
        watermark = updated_at.isoformat()
        return FetchResult(
            [Batch("spot_interruption_bands", table, slices)],
            {"digest": digest, "watermark": watermark},
            watermark=watermark,
        )


INGESTORS = [AwsSpotAdvisor]
