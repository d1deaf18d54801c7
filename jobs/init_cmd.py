"""``gpufinops init``: write a commented ``gpufinops.toml`` for the sources a user picks.

Interactive on a terminal (one question per source, Enter skips it), or driven by flags for
scripts (``--aws-cur-bucket``, ``--bigquery-table``, ``--dcgm-target``, …; ``--yes`` never asks).
The file is validated with the same loader every command uses before it is written, so what
``init`` writes always loads; an existing file is kept unless ``--force``. Secrets never go in it:
the cloud SDKs' default credential chains are named in its comments instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from gpufinops.jobs import files

SOURCE_FLAGS = ("aws_cur_bucket", "aws_cur_path", "bigquery_table", "gcp_billing_path", "dcgm_target",
                "prometheus_url", "nvidia_smi_path", "focus_path", "onprem_group", "aws_storage_prefix")
DEFAULT_REGION = "us-east-1"


def add_parser(sub: argparse._SubParsersAction) -> None:
    init = sub.add_parser("init", help="write a commented gpufinops.toml for your clouds and GPU metrics "
                                       "(asks on a terminal; flags for scripts)")
    init.add_argument("--out", default="gpufinops.toml", metavar="PATH", help="the file to write (default: ./gpufinops.toml)")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.add_argument("--yes", action="store_true", help="never ask: use the flags given and defaults for the rest")
    init.add_argument("--interactive", action="store_true", help="ask even when stdin is not a terminal")
    init.add_argument("--warehouse", default="data/gpufinops.duckdb", metavar="PATH",
                      help="the DuckDB warehouse, relative to the config file (default: data/gpufinops.duckdb)")
    init.add_argument("--team-tag", action="append", metavar="KEY",
                      help="a tag/label key holding the team name, in order (repeatable; default: team, user:team, "
                           "user_team, k8s_label_team)")
    aws = init.add_argument_group("AWS")
    aws.add_argument("--aws-cur-bucket", metavar="BUCKET", help="S3 bucket of the CUR 2.0 / Data Export")
    aws.add_argument("--aws-cur-prefix", default="", metavar="PREFIX", help="key prefix of the export in the bucket")
    aws.add_argument("--aws-cur-path", metavar="DIR", help="a local copy of the export instead of S3")
    aws.add_argument("--aws-region", default=DEFAULT_REGION, metavar="REGION",
                     help=f"the bucket's region, and the region priced (default: {DEFAULT_REGION})")
    aws.add_argument("--aws-endpoint-url", metavar="URL", help="an S3/EC2-compatible endpoint (tests, a proxy)")
    aws.add_argument("--aws-storage-prefix", action="append", metavar="S3_URL",
                     help="s3://BUCKET/PREFIX of checkpoints to inventory, with the account's EBS volumes and "
                          "snapshots (repeatable; the aws_storage source)")
    aws.add_argument("--no-aws-prices", action="store_true",
                     help="leave out the EC2 spot price, pricing and spot advisor sources")
    gcp = init.add_argument_group("Google Cloud")
    gcp.add_argument("--bigquery-table", metavar="PROJECT.DATASET.TABLE", help="the BigQuery billing export table")
    gcp.add_argument("--gcp-billing-path", metavar="GLOB", help="the export extracted to JSONL / Parquet / CSV files")
    gcp.add_argument("--gcp-endpoint", metavar="URL", help="a BigQuery API endpoint (an emulator; anonymous credentials)")
    gcp.add_argument("--gcp-catalog-endpoint", metavar="URL",
                     help="a Cloud Billing Catalog endpoint (a test server; anonymous credentials)")
    gcp.add_argument("--no-gcp-prices", action="store_true", help="leave out the Cloud Billing Catalog source")
    gpu = init.add_argument_group("GPU metrics")
    gpu.add_argument("--dcgm-target", action="append", metavar="URL", help="a DCGM exporter /metrics URL (repeatable)")
    gpu.add_argument("--prometheus-url", metavar="URL", help="a Prometheus server scraping DCGM or nvidia_smi metrics")
    gpu.add_argument("--nvidia-smi-path", metavar="GLOB", help="nvidia-smi --query-gpu CSV logs")
    other = init.add_argument_group("FOCUS files and on-prem")
    other.add_argument("--focus-path", metavar="GLOB", help="FOCUS 1.0–1.2 CSV / Parquet files (local paths)")
    other.add_argument("--onprem-group", action="append", metavar="SPEC",
                       help="an on-prem node group: 'name=hgx nodes=n1,n2 gpu_model=A100-SXM4-80GB gpus_per_node=8 "
                            "server_price_usd=60000' (repeatable)")
    other.add_argument("--onprem-pue", type=float, default=1.4, metavar="X", help="facility power / IT power (default: 1.4)")
    other.add_argument("--onprem-energy-usd-per-kwh", type=float, default=0.12, metavar="USD",
                       help="energy price per kWh (default: 0.12)")
    other.add_argument("--onprem-amortisation-years", type=float, default=4, metavar="N",
                       help="hardware amortisation period (default: 4)")


# --- what the user picked -------------------------------------------------------------------------

@dataclass
class Choices:
    warehouse: str = "data/gpufinops.duckdb"
    team_tags: list[str] = field(default_factory=lambda: ["team", "user:team", "user_team", "k8s_label_team"])
    aws_bucket: str | None = None
    aws_prefix: str = ""
    aws_path: str | None = None
    aws_region: str = DEFAULT_REGION
    aws_endpoint: str | None = None
    aws_prices: bool = True
    aws_storage: list[str] = field(default_factory=list)  # s3://bucket/prefix of checkpoints to inventory
    bigquery_table: str | None = None
    gcp_path: str | None = None
    gcp_endpoint: str | None = None
    gcp_catalog_endpoint: str | None = None
    gcp_prices: bool = True
    dcgm_targets: list[str] = field(default_factory=list)
    prometheus_url: str | None = None
    nvidia_smi_path: str | None = None
    focus_path: str | None = None
    onprem_groups: list[dict[str, Any]] = field(default_factory=list)
    onprem_pue: float = 1.4
    onprem_energy: float = 0.12
    onprem_years: float = 4


def parse_group(spec: str) -> dict[str, Any]:
    """``name=hgx nodes=n1,n2 gpu_model=A100-SXM4-80GB gpus_per_node=8 server_price_usd=60000``."""
    group: dict[str, Any] = {}
    for part in spec.split():
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise ValueError(f"--onprem-group: {part!r} is not key=value")
        group[key] = [n for n in value.split(",") if n] if key == "nodes" else _number_or_text(value)
    missing = [k for k in ("name", "nodes", "gpu_model", "gpus_per_node", "server_price_usd") if k not in group]
    if missing:
        raise ValueError(f"--onprem-group {spec!r}: missing {', '.join(missing)}")
    return group


def _number_or_text(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            continue
    return value


def from_flags(args: argparse.Namespace) -> Choices:
    return Choices(warehouse=args.warehouse, team_tags=args.team_tag or Choices().team_tags,
                   aws_bucket=args.aws_cur_bucket, aws_prefix=args.aws_cur_prefix, aws_path=args.aws_cur_path,
                   aws_region=args.aws_region, aws_endpoint=args.aws_endpoint_url, aws_prices=not args.no_aws_prices,
                   aws_storage=list(args.aws_storage_prefix or []),
                   bigquery_table=args.bigquery_table, gcp_path=args.gcp_billing_path, gcp_endpoint=args.gcp_endpoint,
                   gcp_catalog_endpoint=args.gcp_catalog_endpoint,
                   gcp_prices=not args.no_gcp_prices, dcgm_targets=list(args.dcgm_target or []),
                   prometheus_url=args.prometheus_url, nvidia_smi_path=args.nvidia_smi_path,
                   focus_path=args.focus_path, onprem_groups=[parse_group(g) for g in args.onprem_group or []],
                   onprem_pue=args.onprem_pue, onprem_energy=args.onprem_energy_usd_per_kwh,
                   onprem_years=args.onprem_amortisation_years)


def ask(choices: Choices, prompt: Callable[[str], str] = input, out=sys.stdout) -> Choices:
    """One question per source; Enter keeps the default shown in brackets (or skips the source)."""
    def q(text: str, default: str = "") -> str:
        answer = prompt(f"{text}{f' [{default}]' if default else ''}: ").strip()
        return answer or default

    print("gpufinops init: press Enter to skip a source (or keep the [default]).", file=out)
    choices.warehouse = q("Warehouse file (DuckDB), relative to the config", choices.warehouse)
    choices.aws_bucket = q("AWS: S3 bucket of your CUR 2.0 / Data Export", choices.aws_bucket or "") or None
    if choices.aws_bucket:
        choices.aws_prefix = q("AWS: key prefix of the export in that bucket", choices.aws_prefix)
        choices.aws_region = q("AWS: the bucket's region", choices.aws_region)
    prefixes = q("AWS: checkpoint prefixes to inventory with the EBS volumes (s3://bucket/prefix, comma-separated)",
                 ",".join(choices.aws_storage))
    choices.aws_storage = [p.strip() for p in prefixes.split(",") if p.strip()]
    choices.bigquery_table = q("Google Cloud: BigQuery billing export table (project.dataset.table)",
                               choices.bigquery_table or "") or None
    targets = q("DCGM exporter /metrics URLs (comma-separated)", ",".join(choices.dcgm_targets))
    choices.dcgm_targets = [t.strip() for t in targets.split(",") if t.strip()]
    choices.prometheus_url = q("Prometheus server URL", choices.prometheus_url or "") or None
    choices.nvidia_smi_path = q("nvidia-smi CSV logs (glob)", choices.nvidia_smi_path or "") or None
    choices.focus_path = q("FOCUS export files (glob)", choices.focus_path or "") or None
    if q("On-prem GPU cluster? (y/N)", "n").lower().startswith("y"):
        choices.onprem_pue = float(q("On-prem: PUE (facility power / IT power)", str(choices.onprem_pue)))
        choices.onprem_energy = float(q("On-prem: energy price, USD per kWh", str(choices.onprem_energy)))
        choices.onprem_years = float(q("On-prem: amortisation, years", str(choices.onprem_years)))
        while True:
            name = q("On-prem node group name (Enter when done)")
            if not name:
                break
            choices.onprem_groups.append({
                "name": name, "nodes": [n.strip() for n in q("  host names of its nodes (comma-separated)").split(",")
                                        if n.strip()],
                "gpu_model": q("  GPU model (as gpu_specs names it, e.g. A100-SXM4-80GB)"),
                "gpus_per_node": int(q("  GPUs per node", "8")),
                "server_price_usd": float(q("  server price per node, USD"))})
    return choices


# --- the file ---------------------------------------------------------------------------------------

def _s(value: Any) -> str:
    """A TOML value (JSON strings, numbers and arrays of them are valid TOML)."""
    return json.dumps(value)


def _split_table(text: str) -> tuple[str, str, str]:
    parts = text.split(".")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"--bigquery-table {text!r}: expected PROJECT.DATASET.TABLE")
    return parts[0], parts[1], parts[2]


def _aws_sections(c: Choices) -> list[str]:
    lines = ["# --- AWS ------------------------------------------------------------------------------------",
             "# Credentials: boto3's default chain (AWS_PROFILE / AWS_ACCESS_KEY_ID, ~/.aws/credentials, an instance",
             "# or pod role), never this file. The CUR source needs s3:ListBucket and s3:GetObject on the export.",
             "[sources.aws_cur]", 'type = "aws_cur"                  # CUR 2.0 / legacy CUR / AWS FOCUS, found by manifests']
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
        lines += ["# EC2 spot price history (ec2:DescribeSpotPriceHistory) for the spot model",
                  "[sources.aws_spot]", 'type = "aws_spot_prices"', f"regions = {_s([c.aws_region])}", *endpoint, "",
                  "# GPU instance types and on-demand prices (pricing:GetProducts, ec2:DescribeInstanceTypes)",
                  "[sources.aws_prices]", 'type = "aws_pricing"', f"regions = {_s([c.aws_region])}", *endpoint, "",
                  "# Spot interruption frequency bands (the public Spot Instance Advisor data)",
                  "[sources.aws_spot_advisor]", 'type = "aws_spot_advisor"', f"regions = {_s([c.aws_region])}", ""]
    return lines


def _storage_section(c: Choices) -> list[str]:
    from gpufinops.ingest.core.spec import OptionProblem
    from gpufinops.ingest.storage.options import PrefixRule

    lines = ["# EBS volumes and snapshots, and the objects under these prefixes only (ec2:DescribeVolumes,",
             "# ec2:DescribeSnapshots, ec2:DescribeInstances, s3:ListBucket, cloudwatch:GetMetricData): docs/storage.md",
             "[sources.storage]", 'type = "aws_storage"', f"regions = {_s([c.aws_region])}"]
    lines += [f"endpoint_url = {_s(c.aws_endpoint)}"] if c.aws_endpoint else []
    for url in c.aws_storage:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        try:
            PrefixRule.parse({"bucket": bucket, "prefix": prefix}, "prefix")
        except OptionProblem as exc:
            raise ValueError(f"--aws-storage-prefix {url!r}: {exc.problem} (expected s3://BUCKET/PREFIX)") from None
        lines += ["[[sources.storage.prefixes]]", f"bucket = {_s(bucket)}", f"prefix = {_s(prefix)}",
                  'purpose = "checkpoint"             # or dataset']
    return lines + [""]


def _gcp_sections(c: Choices) -> list[str]:
    lines = ["# --- Google Cloud ---------------------------------------------------------------------------",
             "# Credentials: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, or",
             "# `gcloud auth application-default login`), or credentials_file = \"/path/key.json\"; never the key itself.",
             "[sources.gcp_billing]", 'type = "gcp_billing_export"       # standard or detailed usage cost export']
    if c.gcp_path:
        lines += [f"path = {_s(c.gcp_path)}"]
    else:
        project, dataset, table = _split_table(c.bigquery_table or "")
        lines += [f"project = {_s(project)}", f"dataset = {_s(dataset)}", f"table = {_s(table)}",
                  "lookback_days = 7                  # restatement window re-read on each run"]
        if c.gcp_endpoint:
            lines.append(f"endpoint = {_s(c.gcp_endpoint)}   # an emulator: anonymous credentials")
    lines.append("")
    if c.gcp_prices:
        lines += ["# Compute Engine GPU SKUs from the Cloud Billing Catalog (on-demand, Spot, CUD)",
                  "[sources.gcp_prices]", 'type = "gcp_catalog"', 'currency = "USD"']
        if c.gcp_catalog_endpoint:
            lines.append(f"endpoint = {_s(c.gcp_catalog_endpoint)}   # a test server: anonymous credentials")
        lines.append("")
    return lines


def _metrics_sections(c: Choices) -> list[str]:
    lines = []
    if c.dcgm_targets or c.prometheus_url or c.nvidia_smi_path:
        lines += ["# --- GPU utilisation ------------------------------------------------------------------------",
                  "# Map hosts to billed resources when the metrics carry no instance id:",
                  "# [sources.<name>.resource_map]  \"ip-10-0-1-23\" = \"i-0abc123def4567890\""]
    if c.dcgm_targets:
        lines += ["[sources.dcgm]", 'type = "dcgm_exporter"             # scraped every minute: the exporter keeps no history',
                  f"targets = {_s(c.dcgm_targets)}", '# resource_label = "instance_id"', ""]
    if c.prometheus_url:
        lines += ["[sources.prometheus]", 'type = "prometheus"                # hourly rollups pushed down to Prometheus',
                  f"url = {_s(c.prometheus_url)}", "# selector = 'job=\"dcgm\"'", "backfill_days = 7", ""]
    if c.nvidia_smi_path:
        lines += ["[sources.nvidia_smi]", 'type = "nvidia_smi_csv"            # nvidia-smi --query-gpu ... --format=csv -l N logs',
                  f"path = {_s(c.nvidia_smi_path)}", ""]
    return lines


def _other_sections(c: Choices) -> list[str]:
    lines = []
    if c.focus_path:
        lines += ["# --- FOCUS exports ---------------------------------------------------------------------------",
                  "[sources.focus]", 'type = "focus_files"               # FOCUS 1.0-1.2 CSV or Parquet',
                  f"path = {_s(c.focus_path)}", ""]
    if c.onprem_groups:
        lines += ["# --- Private GPU cluster (listed after its GPU metrics source) ------------------------------",
                  "[sources.onprem]", 'type = "onprem"', f"pue = {c.onprem_pue}                          # facility / IT power",
                  f"energy_usd_per_kwh = {c.onprem_energy}", f"amortisation_years = {c.onprem_years:g}",
                  "# facility_usd_per_node_month = 150, operations_usd_per_node_month = 400, host_power_w = 1200", ""]
        for group in c.onprem_groups:
            lines.append("[[sources.onprem.node_groups]]")
            lines += [f"{key} = {_s(value)}" for key, value in group.items()]
            lines.append("")
    return lines


def render(c: Choices) -> str:
    lines = [f"# gpufinops config, written by `gpufinops init` on {date.today().isoformat()}.",
             "# Check it: gpufinops --config <this file> doctor   ·   Load it: gpufinops --config <this file> ingest",
             "# Relative paths are relative to this file. Every key is described in docs/config.md.", "",
             "[warehouse]", f"path = {_s(c.warehouse)}", '# memory_limit = "2GB"', "",
             "[teams]", f"tag_keys = {_s(c.team_tags)}   # where a team name is found, in order", ""]
    if c.aws_bucket or c.aws_path:
        lines += _aws_sections(c)
    if c.aws_storage:
        lines += _storage_section(c)
    if c.bigquery_table or c.gcp_path:
        lines += _gcp_sections(c)
    lines += _metrics_sections(c) + _other_sections(c)
    if not any((c.aws_bucket, c.aws_path, c.aws_storage, c.bigquery_table, c.gcp_path, c.dcgm_targets, c.prometheus_url,
                c.nvidia_smi_path, c.focus_path, c.onprem_groups)):
        lines += ["# No sources yet: add [sources.<name>] tables (docs/sources/index.md), or run `gpufinops init` again.",
                  ""]
    lines += ["# Optional: the weekly report's mail ([report]), API tokens ([[api.tokens]]), dashboard sign-in",
              "# ([dashboard] auth) and model thresholds ([models]): see docs/config.md."]
    return "\n".join(lines) + "\n"


def write(text: str, out: Path) -> int:
    """Validate ``text`` with the config loader, then write it; 0, or 2 with the key at fault."""
    from gpufinops.jobs import config as config_mod

    try:
        with files.replacing(out, make_parents=True) as tmp:  # the one file writer: renamed only when valid
            tmp.write_text(text)
            config_mod.load(str(tmp), environ={})
    except config_mod.ConfigError as exc:
        print(f"gpufinops: init: the config would not load: {exc}", file=sys.stderr)
        return 2
    return 0


def run(args: argparse.Namespace, prompt: Callable[[str], str] = input) -> int:
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"gpufinops: init: {out} exists; keep it, or write it again with --force", file=sys.stderr)
        return 2
    try:
        choices = from_flags(args)
        picked_by_flags = any(getattr(args, name) for name in SOURCE_FLAGS)
        if args.interactive or (not args.yes and not picked_by_flags and sys.stdin.isatty()):
            choices = ask(choices, prompt)
        elif not args.yes and not picked_by_flags:  # no terminal to ask on, nothing asked for: no empty config
            flags = ", ".join("--" + name.replace("_", "-") for name in SOURCE_FLAGS)
            print(f"gpufinops: init: no terminal to ask on and no source given: pass one or more of {flags} "
                  f"(--yes writes a template without sources, --interactive asks anyway)", file=sys.stderr)
            return 2
        text = render(choices)
    except (ValueError, EOFError) as exc:
        print(f"gpufinops: init: {exc}", file=sys.stderr)
        return 2
    status = write(text, out)
    if status == 0:
        from gpufinops.jobs.demo_summary import exe_name

        sources, exe = text.count("\n[sources."), exe_name()
        if not sources:
            print(f"Wrote {out}: a commented template with no source yet (ingest has nothing to load). Next: add "
                  f"[sources.<name>] tables to it, or write it again with flags:\n"
                  f"  {exe} init --force --out {out} --aws-cur-bucket BUCKET     # or --help for every source flag")
            return status
        print(f"Wrote {out} ({sources} source(s)). Next:\n"
              f"  {exe} --config {out} doctor     # checks credentials and every source\n"
              f"  {exe} --config {out} ingest     # loads them")
    return status
