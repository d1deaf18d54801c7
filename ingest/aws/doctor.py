"""``gpufinops doctor``'s checks of the AWS source types (``ingest.core.doctor``: each spec carries its check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpufinops.ingest.core import extras
from gpufinops.ingest.core.doctor import FAIL, OK, WARN, ConfiguredSource, Result, export_folder, options


def aws_client(service: str, source: ConfiguredSource, timeout: float, region: str | None = None) -> Any:
    boto3 = extras.require("boto3", "aws", f"sources.{source.name}")
    import dataclasses

    from botocore.config import Config

    from gpufinops.ingest.core.transport import DEFAULT
    from gpufinops.ingest.core.transport_sdk import bound_boto3

    opts = options(source)
    config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"mode": "standard", "max_attempts": 1})
    made = boto3.session.Session().client(
        service,
        region_name=region or getattr(opts, "region", None) or "us-east-1",
        endpoint_url=opts.endpoint_url or None,
        config=config,
    )
    # through the one transport, as the source's own calls: the check's timeout is the whole request's deadline
    bounds = opts.bounds() if hasattr(opts, "bounds") else DEFAULT
    bounds = dataclasses.replace(bounds, connect_timeout_s=min(bounds.connect_timeout_s, timeout), timeout_s=timeout)
    return bound_boto3(made, source.name, bounds)


def first_region(regions: str | list[str] | None) -> str:
    """The region a check asks: the first configured (a name or a list), else us-east-1."""
    listed = [regions] if isinstance(regions, str) else list(regions or [])
    return listed[0] if listed else "us-east-1"


def aws_error(exc: Exception) -> str:
    error = (getattr(exc, "response", None) or {}).get("Error", {})  # a ReadTimeoutError has response = None
    code = error.get("Code")
    return f"{code}: {error.get('Message') or ''}".strip(": ") if code else f"{type(exc).__name__}: {exc}"


def bucket_refusal(s3: Any, bucket: str) -> str | None:
    """Why ``HeadBucket`` of ``bucket`` fails (404 NoSuchBucket, 403 AccessDenied, a timeout), or None."""
    try:
        s3.head_bucket(Bucket=bucket)
    except Exception as exc:  # botocore ClientError, or the transport's own error
        return f"s3://{bucket}: {aws_error(exc)}"
    return None


def aws_cur(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    if opts.path:
        fill = "sync the export's metadata/ and data/ folders there"
        return export_folder(source, opts.path, base_dir, "*Manifest.json", "manifest(s)", fill)
    if opts.engine == "athena":
        athena = aws_client("athena", source, timeout)
        athena.get_work_group(WorkGroup=opts.workgroup or "primary")
        return OK, f"Athena work group {opts.workgroup or 'primary'} answers", None
    bucket, prefix = opts.bucket, str(opts.prefix or "").strip("/")
    s3 = aws_client("s3", source, timeout)
    refused = bucket_refusal(s3, bucket)
    if refused:
        return FAIL, refused, f"check the bucket name and region, and grant s3:ListBucket on arn:aws:s3:::{bucket}"
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "", MaxKeys=1000)
    keys = [o["Key"] for o in listing.get("Contents", [])]
    manifests = [k for k in keys if k.endswith("Manifest.json")]
    where = f"s3://{bucket}/{prefix}" + (f" ({opts.understood})" if getattr(opts, "understood", None) else "")
    if not keys:
        return WARN, f"{where}: no objects", "check the prefix; a new export delivers within 24 hours"
    if not manifests:
        return (
            WARN,
            f"{where}: {len(keys)} object(s), no *-Manifest.json",
            "point prefix at the export (its metadata/ folder holds the manifests)",
        )
    more = "+" if listing.get("IsTruncated") else ""
    return OK, f"{where}: {len(keys)}{more} object(s), {len(manifests)} manifest(s)", None


def aws_spot_prices(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    region = first_region(options(source).regions)
    aws_client("ec2", source, timeout, region).describe_spot_price_history(MaxResults=5)
    return OK, f"EC2 DescribeSpotPriceHistory answers in {region}", None


def aws_pricing(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    region = first_region(options(source).regions)
    aws_client("ec2", source, timeout, region).describe_instance_types(MaxResults=5)
    return (
        OK,
        f"EC2 DescribeInstanceTypes answers in {region} (offline prices are used if Pricing is unreachable)",
        None,
    )
