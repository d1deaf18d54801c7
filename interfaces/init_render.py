"""The file ``gpufinops init`` writes: commented sections for the sources picked (``render``).

One function per part of the file (AWS, storage, Google Cloud, GPU metrics, FOCUS and on-prem), then
one section per answered question of a source spec (``InitQuestion``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

from gpufinops.interfaces.init_choices import Choices, Question


def _s(value: Any) -> str:
    """A TOML value (JSON strings, numbers and arrays of them are valid TOML)."""
    return json.dumps(value)


def _split_table(text: str) -> tuple[str, str, str]:
    parts = text.split(".")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"--bigquery-table {text!r}: expected PROJECT.DATASET.TABLE")
    return parts[0], parts[1], parts[2]


def _aws_sections(c: Choices) -> list[str]:
    lines = [
        "# --- AWS ------------------------------------------------------------------------------------",
        "# Credentials: boto3's default chain (AWS_PROFILE / AWS_ACCESS_KEY_ID, ~/.aws/credentials, an instance",
        "# or pod role), never this file. The CUR source needs s3:ListBucket and s3:GetObject on the export.",
        "[sources.aws_cur]",
        'type = "aws_cur"                  # CUR 2.0 / legacy CUR / AWS FOCUS, found by manifests',
    ]
    if c.aws_path:
        lines += [f"path = {_s(c.aws_path)}             # a local copy of the export"]
    else:
        lines += [f"bucket = {_s(c.aws_bucket)}"]
        if c.aws_prefix:  # the export's key prefix (none: the export sits at the bucket's root)
            lines.append(f"prefix = {_s(c.aws_prefix)}")
        lines.append(f"region = {_s(c.aws_region)}")
        if c.aws_endpoint:
            lines.append(f"endpoint_url = {_s(c.aws_endpoint)}")
    lines += ['# format = "auto"                # or cur2 | legacy | focus', ""]
    if c.aws_prices:
        endpoint = [f"endpoint_url = {_s(c.aws_endpoint)}"] if c.aws_endpoint else []
        lines += [
            "# EC2 spot price history (ec2:DescribeSpotPriceHistory) for the spot model",
            "[sources.aws_spot]",
            'type = "aws_spot_prices"',
            f"regions = {_s([c.aws_region])}",
            *endpoint,
            "",
            "# GPU instance types and on-demand prices (pricing:GetProducts, ec2:DescribeInstanceTypes)",
            "[sources.aws_prices]",
            'type = "aws_pricing"',
            f"regions = {_s([c.aws_region])}",
            *endpoint,
            "",
            "# Spot interruption frequency bands (the public Spot Instance Advisor data)",
            "[sources.aws_spot_advisor]",
            'type = "aws_spot_advisor"',
            f"regions = {_s([c.aws_region])}",
            "",
        ]
    return lines


def _storage_section(c: Choices) -> list[str]:
    from gpufinops.ingest.core.spec import OptionProblem
    from gpufinops.ingest.storage.options import PrefixRule

    lines = [
        "# EBS volumes and snapshots, and the objects under these prefixes only (ec2:DescribeVolumes,",
        "# ec2:DescribeSnapshots, ec2:DescribeInstances, s3:ListBucket, cloudwatch:GetMetricData): docs/storage.md",
        "[sources.storage]",
        'type = "aws_storage"',
        f"regions = {_s([c.aws_region])}",
    ]
    lines += [f"endpoint_url = {_s(c.aws_endpoint)}"] if c.aws_endpoint else []
    for url in c.aws_storage:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        try:
            PrefixRule.parse({"bucket": bucket, "prefix": prefix}, "prefix")
        except OptionProblem as exc:
            raise ValueError(f"--aws-storage-prefix {url!r}: {exc.problem} (expected s3://BUCKET/PREFIX)") from None
        lines += [
            "[[sources.storage.prefixes]]",
            f"bucket = {_s(bucket)}",
            f"prefix = {_s(prefix)}",
            'purpose = "checkpoint"             # or dataset',
        ]
    return lines + [""]


def _gcp_sections(c: Choices) -> list[str]:
    lines = [
        "# --- Google Cloud ---------------------------------------------------------------------------",
        "# Credentials: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, or",
        '# `gcloud auth application-default login`), or credentials_file = "/path/key.json"; never the key itself.',
        "[sources.gcp_billing]",
        'type = "gcp_billing_export"       # standard or detailed usage cost export',
    ]
    if c.gcp_path:
        lines += [f"path = {_s(c.gcp_path)}"]
    else:
        project, dataset, table = _split_table(c.bigquery_table or "")
        lines += [
            f"project = {_s(project)}",
            f"dataset = {_s(dataset)}",
            f"table = {_s(table)}",
            "lookback_days = 7                  # restatement window re-read on each run",
        ]
        if c.gcp_endpoint:
            lines.append(f"endpoint = {_s(c.gcp_endpoint)}   # an emulator: anonymous credentials")
    lines.append("")
    if c.gcp_prices:
        lines += [
            "# Compute Engine GPU SKUs from the Cloud Billing Catalog (on-demand, Spot, CUD)",
            "[sources.gcp_prices]",
            'type = "gcp_catalog"',
            'currency = "USD"',
        ]
        if c.gcp_catalog_endpoint:
            lines.append(f"endpoint = {_s(c.gcp_catalog_endpoint)}   # a test server: anonymous credentials")
        lines.append("")
    return lines


def _metrics_sections(c: Choices) -> list[str]:
    lines = []
    if c.dcgm_targets or c.prometheus_url or c.nvidia_smi_path:
        lines += [
            "# --- GPU utilisation ------------------------------------------------------------------------",
            "# Map hosts to billed resources when the metrics carry no instance id:",
            '# [sources.<name>.resource_map]  "ip-10-0-1-23" = "i-0abc123def4567890"',
        ]
    if c.dcgm_targets:
        lines += [
            "[sources.dcgm]",
            'type = "dcgm_exporter"             # scraped every minute: the exporter keeps no history',
            f"targets = {_s(c.dcgm_targets)}",
            '# resource_label = "instance_id"',
            "",
        ]
    if c.prometheus_url:
        lines += [
            "[sources.prometheus]",
            'type = "prometheus"                # hourly rollups pushed down to Prometheus',
            f"url = {_s(c.prometheus_url)}",
            "# selector = 'job=\"dcgm\"'",
            "backfill_days = 7",
            "",
        ]
    if c.nvidia_smi_path:
        lines += [
            "[sources.nvidia_smi]",
            'type = "nvidia_smi_csv"            # nvidia-smi --query-gpu ... --format=csv -l N logs',
            f"path = {_s(c.nvidia_smi_path)}",
            "",
        ]
    return lines


def _other_sections(c: Choices) -> list[str]:
    lines = []
    if c.focus_path:
        lines += [
            "# --- FOCUS exports ---------------------------------------------------------------------------",
            "[sources.focus]",
            'type = "focus_files"               # FOCUS 1.0-1.2 CSV or Parquet',
            f"path = {_s(c.focus_path)}",
            "",
        ]
    if c.onprem_groups:
        lines += [
            "# --- Private GPU cluster (listed after its GPU metrics source) ------------------------------",
            "[sources.onprem]",
            'type = "onprem"',
            f"pue = {c.onprem_pue}                          # facility / IT power",
            f"energy_usd_per_kwh = {c.onprem_energy}",
            f"amortisation_years = {c.onprem_years:g}",
            "# facility_usd_per_node_month = 150, operations_usd_per_node_month = 400, host_power_w = 1200",
            "",
        ]
        for group in c.onprem_groups:
            lines.append("[[sources.onprem.node_groups]]")
            lines += [f"{key} = {_s(value)}" for key, value in group.items()]
            lines.append("")
    return lines


def _declared_sections(c: Choices, asked: Sequence[Question]) -> list[str]:
    lines = []
    for q in asked:
        if q.flag in c.answers:
            lines += [f"[sources.{q.section}]", f"type = {_s(q.type)}", f"{q.option} = {_s(c.answers[q.flag])}", ""]
    return lines


def render(c: Choices, asked: Sequence[Question] = ()) -> str:
    lines = [
        f"# gpufinops config, written by `gpufinops init` on {date.today().isoformat()}.",
        "# Check it: gpufinops --config <this file> doctor   ·   Load it: gpufinops --config <this file> ingest",
        "# Relative paths are relative to this file. Every key is described in docs/config.md.",
        "",
        "[warehouse]",
        f"path = {_s(c.warehouse)}",
        '# memory_limit = "2GB"',
        "",
        "[teams]",
        f"tag_keys = {_s(c.team_tags)}   # where a team name is found, in order",
        "",
    ]
    if c.aws_bucket or c.aws_path:
        lines += _aws_sections(c)
    if c.aws_storage:
        lines += _storage_section(c)
    if c.bigquery_table or c.gcp_path:
        lines += _gcp_sections(c)
    lines += _metrics_sections(c) + _other_sections(c) + _declared_sections(c, asked)
    if not any(
        (
            c.aws_bucket,
            c.aws_path,
            c.aws_storage,
            c.bigquery_table,
            c.gcp_path,
            c.dcgm_targets,
            c.prometheus_url,
            c.nvidia_smi_path,
            c.focus_path,
            c.onprem_groups,
            c.answers,
        )
    ):
        lines += [
            "# No sources yet: add [sources.<name>] tables (docs/sources/index.md), or run `gpufinops init` again.",
            "",
        ]
    lines += [
        "# Optional: the weekly report's mail ([report]), API tokens ([[api.tokens]]), dashboard sign-in",
        "# ([dashboard] auth) and model thresholds ([models]): see docs/config.md.",
    ]
    return "\n".join(lines) + "\n"
