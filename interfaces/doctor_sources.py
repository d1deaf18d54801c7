"""``gpufinops doctor``'s reachability check of each configured source, with a timeout.

One function per source type, each a cheap read of what the ingestor will read (a source type's spec
names its check, ``IngestorMeta.doctor``, and the extra it needs, ``IngestorMeta.extra``): S3 HeadBucket +
ListObjectsV2 under the export's prefix (are there manifests?), one EC2 / Pricing call, BigQuery
``tables.get`` (is it a billing export?), one Cloud Billing Catalog page, an HTTP GET of each
DCGM exporter and a PromQL query (are GPU metrics there?), and the file globs. Each reads the source's
typed options (``options``: its spec's ``Options``, parsed as ingest parses them) and returns
``(status, detail, fix)``; an exception becomes a failed check naming the call.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import importlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpufinops.ingest.core import extras
from gpufinops.ingest.core.registry import IngestorMeta, Registry, default_registry
from gpufinops.jobs.config import SourceConfig

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
Result = tuple[str, str, str | None]
GPU_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "nvidia_smi_utilization_gpu_ratio")
BILLING_EXPORT_COLUMNS = {"billing_account_id", "service", "sku", "usage_start_time", "cost", "export_time"}
COMPUTE_SERVICE = "services/6F81-5844-456A"
Check = Callable[[SourceConfig, Path, float], Result]


@functools.cache
def _builtin() -> Registry:
    return default_registry()


def _meta(source_type: str, registry: Registry | None = None) -> IngestorMeta:
    return (registry or _builtin()).get(source_type).meta


def options(source: SourceConfig) -> Any:
    """The source's typed options (its spec's ``Options``, parsed once by the config loader)."""
    return source.parsed


def _paths(pattern: str | list[str] | None, base_dir: Path) -> list[str]:
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or [])
    found: list[str] = []
    for p in patterns:
        full = os.path.expanduser(p)
        full = full if os.path.isabs(full) else str(base_dir / full)
        found += [f for f in glob.glob(full, recursive=True) if os.path.isfile(f)]
    return sorted(set(found))


def files(source: SourceConfig, base_dir: Path, key: str = "path") -> Result:
    pattern = getattr(options(source), key)
    matched = _paths(pattern, base_dir)
    if not matched:
        return (
            FAIL,
            f"{key} {pattern!r} matches no file (relative to {base_dir})",
            f'point sources.{source.name}.{key} at the files (a glob like "logs/*.csv")',
        )
    return OK, f"{len(matched)} file(s) match {pattern!r}", None


# --- AWS ---------------------------------------------------------------------------------------------


def _aws_client(service: str, source: SourceConfig, timeout: float, region: str | None = None) -> Any:
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


def _first_region(regions: str | list[str] | None) -> str:
    """The region a check asks: the first configured (a name or a list), else us-east-1."""
    listed = [regions] if isinstance(regions, str) else list(regions or [])
    return listed[0] if listed else "us-east-1"


def _aws_error(exc: Exception) -> str:
    error = (getattr(exc, "response", None) or {}).get("Error", {})  # a ReadTimeoutError has response = None
    code = error.get("Code")
    return f"{code}: {error.get('Message') or ''}".strip(": ") if code else f"{type(exc).__name__}: {exc}"


def aws_cur(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    if opts.path:
        root = Path(os.path.expanduser(opts.path))
        root = root if root.is_absolute() else base_dir / root
        if not root.is_dir():
            return FAIL, f"path {root} is not a directory", f"point sources.{source.name}.path at the synced export"
        manifests = list(root.rglob("*Manifest.json"))
        return (
            (OK, f"{root}: {len(manifests)} manifest(s)", None)
            if manifests
            else (WARN, f"{root}: no *-Manifest.json yet", "sync the export's metadata/ and data/ folders there")
        )
    if opts.engine == "athena":
        athena = _aws_client("athena", source, timeout)
        athena.get_work_group(WorkGroup=opts.workgroup or "primary")
        return OK, f"Athena work group {opts.workgroup or 'primary'} answers", None
    bucket, prefix = opts.bucket, str(opts.prefix or "").strip("/")
    s3 = _aws_client("s3", source, timeout)
    try:
        s3.head_bucket(Bucket=bucket)
    except Exception as exc:  # botocore ClientError: 404 NoSuchBucket, 403 AccessDenied
        return (
            FAIL,
            f"s3://{bucket}: {_aws_error(exc)}",
            f"check the bucket name and region, and grant s3:ListBucket on arn:aws:s3:::{bucket}",
        )
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


def aws_spot_prices(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    region = _first_region(options(source).regions)
    _aws_client("ec2", source, timeout, region).describe_spot_price_history(MaxResults=5)
    return OK, f"EC2 DescribeSpotPriceHistory answers in {region}", None


def aws_pricing(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    region = _first_region(options(source).regions)
    _aws_client("ec2", source, timeout, region).describe_instance_types(MaxResults=5)
    return (
        OK,
        f"EC2 DescribeInstanceTypes answers in {region} (offline prices are used if Pricing is unreachable)",
        None,
    )


def aws_spot_advisor(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    if opts.path:
        return files(source, base_dir)
    from gpufinops.ingest.aws.aws_spot_advisor import DEFAULT_URL

    return http_get(opts.url or DEFAULT_URL, timeout, expect=None)


def aws_storage(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    region = _first_region(opts.regions)
    _aws_client("ec2", source, timeout, region).describe_volumes(MaxResults=5)
    s3 = _aws_client("s3", source, timeout, region)
    buckets = sorted({rule.bucket for rule in opts.rules})
    for bucket in buckets:
        try:
            s3.head_bucket(Bucket=bucket)
        except Exception as exc:  # botocore ClientError: 404 NoSuchBucket, 403 AccessDenied
            return (
                WARN,
                f"s3://{bucket}: {_aws_error(exc)} (its prefixes are recorded as not listed)",
                f"check the bucket name, and grant s3:ListBucket on arn:aws:s3:::{bucket}",
            )
    return OK, f"EC2 DescribeVolumes answers in {region}; {len(buckets)} bucket(s) reachable", None


def cloudwatch_gpu(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    cloudwatch = _aws_client("cloudwatch", source, timeout, opts.region)
    listing = cloudwatch.list_metrics(Namespace=opts.namespace)
    series = len(listing.get("Metrics", []))
    more = "+" if listing.get("NextToken") else ""
    if not series:
        return (
            WARN,
            f"CloudWatch {opts.namespace} in {opts.region}: no metrics",
            "check the namespace and region, and that the CloudWatch agent publishes nvidia_smi_* metrics",
        )
    return OK, f"CloudWatch ListMetrics answers in {opts.region}: {series}{more} {opts.namespace} series", None


# --- Google Cloud ------------------------------------------------------------------------------------


def _gcp_options(source: SourceConfig, base_dir: Path) -> Any:
    """The source's typed options (config validation checked them), credentials_file beside the config."""
    opts = options(source)
    if opts.credentials_file and not os.path.isabs(opts.credentials_file):
        opts = dataclasses.replace(opts, credentials_file=str(base_dir / opts.credentials_file))
    return opts


def gcp_billing_export(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    if options(source).path:
        return files(source, base_dir)
    from gpufinops.ingest.gcp import gcp_common

    opts = _gcp_options(source, base_dir)
    name = f"{opts.project}.{opts.dataset}.{opts.table}"
    client = gcp_common.bigquery_client(source.name, opts, str(opts.project))
    try:
        table = client.get_table(name, timeout=timeout, retry=None)
    except Exception as exc:
        status = gcp_common.status_of(exc)
        fix = (
            "grant roles/bigquery.dataViewer on the dataset and roles/bigquery.jobUser on the project"
            if status == 403
            else "check project, dataset and table (BigQuery → the billing export's table name)"
        )
        return FAIL, f"BigQuery {name}: {gcp_common.describe_error(source.name, 'tables.get', exc)}", fix
    columns = {f.name for f in table.schema}
    missing = sorted(BILLING_EXPORT_COLUMNS - columns)
    if missing:
        return (
            WARN,
            f"BigQuery {name} lacks {', '.join(missing)}: not a billing export table?",
            "use the gcp_billing_export_v1_… or gcp_billing_export_resource_v1_… table",
        )
    return OK, f"BigQuery {name}: {table.num_rows or 0:,} rows, a billing export schema", None


def gcp_catalog(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.gcp import gcp_common

    client = gcp_common.catalog_client(source.name, _gcp_options(source, base_dir))
    from google.cloud.billing_v1 import ListSkusRequest

    pager = client.list_skus(request=ListSkusRequest(parent=COMPUTE_SERVICE, page_size=1), timeout=timeout, retry=None)
    first = next(iter(pager.skus), None)
    return (
        (OK, "Cloud Billing Catalog answers (Compute Engine SKUs)", None)
        if first is not None
        else (WARN, "Cloud Billing Catalog answered with no Compute Engine SKU", "check the endpoint")
    )


def gcp_price_history(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)


# --- GPU metrics -------------------------------------------------------------------------------------


def _get(url: str) -> tuple[urllib.request.Request, str]:
    """The GET ingest makes (``user:password@`` becomes Basic auth) and the URL without its credentials."""
    from gpufinops.ingest.metrics import scrape

    request = scrape._request(url)
    request.add_header("User-Agent", "gpufinops-doctor")
    return request, scrape.display_url(url)


def http_get(url: str, timeout: float, expect: tuple[str, ...] | None = GPU_METRICS) -> Result:
    request, url = _get(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(4_000_000).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return FAIL, f"GET {url}: HTTP {exc.code}", "check the URL and path (a DCGM exporter serves /metrics)"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return FAIL, f"GET {url}: {reason}", "check the host, port and firewall from this machine"
    if expect and not any(name in body for name in expect):
        return WARN, f"GET {url}: answers, but no {' / '.join(expect)} metric", "is this a DCGM or nvidia_smi exporter?"
    return OK, f"GET {url}: answers{' with GPU metrics' if expect else ''}", None


def dcgm_exporter(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    targets = options(source).targets or []
    targets = [targets] if isinstance(targets, str) else targets
    results = []
    for target in targets:
        if target.startswith(("http://", "https://")):
            results.append(http_get(target, timeout))
        else:
            path = target[len("file://") :] if target.startswith("file://") else target
            matched = _paths(path, base_dir)
            results.append(
                (OK, f"{len(matched)} file(s) match {path!r}", None)
                if matched
                else (FAIL, f"{path!r} matches no file", f"fix sources.{source.name}.targets")
            )
    failed = [r for r in results if r[0] == FAIL]
    worst = failed or [r for r in results if r[0] == WARN]
    if worst:
        return (
            worst[0][0],
            f"{len(results) - len(failed)} of {len(results)} target(s) answer; {worst[0][1]}",
            worst[0][2],
        )
    return OK, f"{len(results)} target(s) answer with GPU metrics", None


def series_count(base: str, query: str, timeout: float) -> tuple[int, None] | tuple[None, Result]:
    """What Prometheus at `base` answers to an instant `count(...)` query: (the count, None), with 0 for an
    empty result; or (None, the FAIL naming the URL, with its userinfo masked) when it does not answer."""
    url = _get(base)[1]
    target = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': query})}")[0]
    try:
        with urllib.request.urlopen(target, timeout=timeout) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return None, (FAIL, f"Prometheus {url}: HTTP {exc.code} on /api/v1/query", "check the URL (the server's root)")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, (FAIL, f"Prometheus {url}: {getattr(exc, 'reason', exc)}", "check the host, port and firewall")
    result = answer.get("data", {}).get("result", [])
    return (int(float(result[0]["value"][1])) if result else 0), None


def prometheus(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    base = str(opts.url).rstrip("/")
    url = _get(base)[1]
    selector = opts.selector
    for metric in GPU_METRICS:  # series seen in the last day (an instant query sees only the last 5 minutes)
        series = f"{metric}{{{selector}}}" if selector else metric
        count, failed = series_count(base, f"count(last_over_time({series}[1d]))", timeout)
        if failed:
            return failed
        if count:
            return OK, f"Prometheus {url}: {count:,} {metric} series in the last day", None
    return (
        WARN,
        f"Prometheus {url} answers, but has no {' / '.join(GPU_METRICS)} series in the last day"
        + (f" matching {selector}" if selector else ""),
        "scrape the DCGM exporters from it (or fix the selector)",
    )


def gcp_storage(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.storage import gcp_inventory

    opts = options(source)
    project = opts.project
    c = gcp_inventory.clients(opts.endpoint or None, None, project)
    c.disks.aggregated_list(request={"project": project, "max_results": 5}, timeout=timeout)
    return OK, f"Compute disks.aggregatedList answers for project {project}", None


def nvidia_smi_csv(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)


def focus_files(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)


def onprem(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
    groups = options(source).node_groups or []
    nodes = sum(len(g.get("nodes") or []) for g in groups if isinstance(g, dict))
    return OK, f"{len(groups)} node group(s), {nodes} node(s) (costed from the GPU metrics sources)", None


def check_of(source_type: str, registry: Registry | None = None) -> Check | None:
    """The reachability check a source type's spec names (``IngestorMeta.doctor``, "module:function"),
    None when it declares none (it reaches nothing) or the type is unknown."""
    registry = registry or _builtin()
    if source_type not in registry:
        return None
    named = _meta(source_type, registry).doctor
    if named is None:
        return None
    module, _, function = named.partition(":")
    check: Check = getattr(importlib.import_module(module), function)
    return check


def needs_extra(source: SourceConfig, registry: Registry | None = None) -> str | None:
    """The extra a source's API calls need (its spec's ``extra``; None: it reads files or plain HTTP)."""
    registry = registry or _builtin()
    if source.type not in registry:
        return None
    meta = _meta(source.type, registry)
    if meta.extra is None:
        return None
    return meta.extra.needed(source.parsed)
