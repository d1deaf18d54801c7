"""``gpufinops doctor``'s checks of the storage inventories (``ingest.core.doctor``: each spec carries its check)."""

from __future__ import annotations

from pathlib import Path

from gpufinops.ingest.aws.doctor import aws_client, bucket_refusal, first_region
from gpufinops.ingest.core.doctor import OK, WARN, ConfiguredSource, Result, options


def aws_storage(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    region = first_region(opts.regions)
    aws_client("ec2", source, timeout, region).describe_volumes(MaxResults=5)
    s3 = aws_client("s3", source, timeout, region)
    buckets = sorted({rule.bucket for rule in opts.rules})
    for bucket in buckets:
        refused = bucket_refusal(s3, bucket)
        if refused:
            why = f"{refused} (its prefixes are recorded as not listed)"
            return WARN, why, f"check the bucket name, and grant s3:ListBucket on arn:aws:s3:::{bucket}"
    return OK, f"EC2 DescribeVolumes answers in {region}; {len(buckets)} bucket(s) reachable", None


def gcp_storage(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.storage import gcp_inventory

    opts = options(source)
    project = opts.project
    c = gcp_inventory.clients(opts.endpoint or None, None, project)
    c.disks.aggregated_list(request={"project": project, "max_results": 5}, timeout=timeout)
    return OK, f"Compute disks.aggregatedList answers for project {project}", None


def azure_storage(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.storage import azure_arm

    opts = options(source)
    disks = azure_arm.listing(source.name, opts, "disks", azure_arm.bearer_token(source.name, opts))
    return (
        OK,
        f"ARM Microsoft.Compute/disks list answers for subscription {opts.subscription}: {len(disks)} disk(s)",
        None,
    )
