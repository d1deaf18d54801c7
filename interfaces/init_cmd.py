"""``gpufinops init``: write a commented ``gpufinops.toml`` for the sources a user picks.

Interactive on a terminal (one question per source, Enter skips it), or driven by flags for
scripts (``--aws-cur-bucket``, ``--bigquery-table``, ``--dcgm-target``, …; ``--yes`` never asks).
The file is validated with the same loader every command uses before it is written, so what
``init`` writes always loads; an existing file is kept unless ``--force``. Secrets never go in it:
the cloud SDKs' default credential chains are named in its comments instead.

This module is the command (its flags, the run, the write); ``interfaces.init_choices`` holds what the
user picked (flags, questions), ``interfaces.init_render`` the file. The built-in sources' sections are
init's own (each spec's ``init`` names their flags); a source whose spec declares an
``InitQuestion`` gets its flag, its question and its section from that spec alone (read from the
ingest registry, which the command line builds only when it parses ``init``: interfaces/cli_parser.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpufinops.jobs import files

if TYPE_CHECKING:
    from gpufinops.ingest.core.registry import Registry
from gpufinops.interfaces.init_choices import DEFAULT_REGION, Question, ask, from_flags, normalise_bucket, questions
from gpufinops.interfaces.init_render import render

# the flags of init's own sections (the built-in sources' specs name theirs: ``IngestorMeta.init``)
SOURCE_FLAGS = (
    "aws_cur_bucket",
    "aws_cur_path",
    "bigquery_table",
    "gcp_billing_path",
    "dcgm_target",
    "prometheus_url",
    "nvidia_smi_path",
    "focus_path",
    "onprem_group",
    "aws_storage_prefix",
)


def add_parser(sub: argparse._SubParsersAction, asked: Sequence[Question] | None = None) -> None:
    """The ``init`` command and its flags (``asked``: the specs' generic questions, default: ``questions()``)."""
    init = sub.add_parser(
        "init",
        help="write a commented gpufinops.toml for your clouds and GPU metrics (asks on a terminal; flags for scripts)",
    )
    init.add_argument(
        "--out", default="gpufinops.toml", metavar="PATH", help="the file to write (default: ./gpufinops.toml)"
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.add_argument("--yes", action="store_true", help="never ask: use the flags given and defaults for the rest")
    init.add_argument("--interactive", action="store_true", help="ask even when stdin is not a terminal")
    init.add_argument(
        "--warehouse",
        default="data/gpufinops.duckdb",
        metavar="PATH",
        help="the DuckDB warehouse, relative to the config file (default: data/gpufinops.duckdb)",
    )
    init.add_argument(
        "--team-tag",
        action="append",
        metavar="KEY",
        help="a tag/label key holding the team name, in order (repeatable; default: team, user:team, "
        "user_team, k8s_label_team)",
    )
    aws = init.add_argument_group("AWS")
    aws.add_argument("--aws-cur-bucket", metavar="BUCKET", help="S3 bucket of the CUR 2.0 / Data Export")
    aws.add_argument("--aws-cur-prefix", default="", metavar="PREFIX", help="key prefix of the export in the bucket")
    aws.add_argument("--aws-cur-path", metavar="DIR", help="a local copy of the export instead of S3")
    aws.add_argument(
        "--aws-region",
        default=DEFAULT_REGION,
        metavar="REGION",
        help=f"the bucket's region, and the region priced (default: {DEFAULT_REGION})",
    )
    aws.add_argument("--aws-endpoint-url", metavar="URL", help="an S3/EC2-compatible endpoint (tests, a proxy)")
    aws.add_argument(
        "--aws-storage-prefix",
        action="append",
        metavar="S3_URL",
        help="s3://BUCKET/PREFIX of checkpoints to inventory, with the account's EBS volumes and "
        "snapshots (repeatable; the aws_storage source)",
    )
    aws.add_argument(
        "--no-aws-prices", action="store_true", help="leave out the EC2 spot price, pricing and spot advisor sources"
    )
    gcp = init.add_argument_group("Google Cloud")
    gcp.add_argument("--bigquery-table", metavar="PROJECT.DATASET.TABLE", help="the BigQuery billing export table")
    gcp.add_argument("--gcp-billing-path", metavar="GLOB", help="the export extracted to JSONL / Parquet / CSV files")
    gcp.add_argument(
        "--gcp-endpoint", metavar="URL", help="a BigQuery API endpoint (an emulator; anonymous credentials)"
    )
    gcp.add_argument(
        "--gcp-catalog-endpoint",
        metavar="URL",
        help="a Cloud Billing Catalog endpoint (a test server; anonymous credentials)",
    )
    gcp.add_argument("--no-gcp-prices", action="store_true", help="leave out the Cloud Billing Catalog source")
    gpu = init.add_argument_group("GPU metrics")
    gpu.add_argument("--dcgm-target", action="append", metavar="URL", help="a DCGM exporter /metrics URL (repeatable)")
    gpu.add_argument("--prometheus-url", metavar="URL", help="a Prometheus server scraping DCGM or nvidia_smi metrics")
    gpu.add_argument("--nvidia-smi-path", metavar="GLOB", help="nvidia-smi --query-gpu CSV logs")
    other = init.add_argument_group("FOCUS files and on-prem")
    other.add_argument("--focus-path", metavar="GLOB", help="FOCUS 1.0–1.2 CSV / Parquet files (local paths)")
    other.add_argument(
        "--onprem-group",
        action="append",
        metavar="SPEC",
        help="an on-prem node group: 'name=hgx nodes=n1,n2 gpu_model=A100-SXM4-80GB gpus_per_node=8 "
        "server_price_usd=60000' (repeatable)",
    )
    other.add_argument(
        "--onprem-pue", type=float, default=1.4, metavar="X", help="facility power / IT power (default: 1.4)"
    )
    other.add_argument(
        "--onprem-energy-usd-per-kwh",
        type=float,
        default=0.12,
        metavar="USD",
        help="energy price per kWh (default: 0.12)",
    )
    other.add_argument(
        "--onprem-amortisation-years",
        type=float,
        default=4,
        metavar="N",
        help="hardware amortisation period (default: 4)",
    )
    specs = questions() if asked is None else asked
    if specs:
        declared = init.add_argument_group("other sources (their specs' questions)")
        for q in specs:
            declared.add_argument(
                "--" + q.flag.replace("_", "-"),
                metavar="VALUE",
                help=f"{q.question} (the {q.type} source's {q.option})",
            )


def write(text: str, out: Path, registry: Registry | None = None) -> int:
    """Validate ``text`` with the config loader (``registry``: the source types it knows, default the
    built-in ones), then write it; 0, or 2 with the key at fault."""
    from gpufinops.jobs import config as config_mod

    try:
        with files.replacing(out, make_parents=True) as tmp:  # the one file writer: renamed only when valid
            tmp.write_text(text)
            config_mod.load(str(tmp), environ={}, registry=registry)
    except config_mod.ConfigError as exc:
        print(f"gpufinops: init: the config would not load: {exc}", file=sys.stderr)
        return 2
    return 0


def run(
    args: argparse.Namespace,
    prompt: Callable[[str], str] = input,
    asked: Sequence[Question] | None = None,
    registry: Registry | None = None,
) -> int:
    """``gpufinops init``; ``asked`` and ``registry``: the specs' questions and the source types the
    written file is checked against (default: the built-in ones)."""
    specs = questions() if asked is None else asked
    source_flags = SOURCE_FLAGS + tuple(q.flag for q in specs)
    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"gpufinops: init: {out} exists; keep it, or write it again with --force", file=sys.stderr)
        return 2
    try:
        choices = from_flags(args, specs)
        picked_by_flags = any(getattr(args, name, None) for name in source_flags)
        if args.interactive or (not args.yes and not picked_by_flags and sys.stdin.isatty()):
            choices = ask(choices, prompt, asked=specs)
        elif not args.yes and not picked_by_flags:  # no terminal to ask on, nothing asked for: no empty config
            flags = ", ".join("--" + name.replace("_", "-") for name in source_flags)
            print(
                f"gpufinops: init: no terminal to ask on and no source given: pass one or more of {flags} "
                f"(--yes writes a template without sources, --interactive asks anyway)",
                file=sys.stderr,
            )
            return 2
        understood = normalise_bucket(choices)
        if understood:
            print(f"gpufinops: init: --aws-cur-bucket: {understood}")
        text = render(choices, specs)
    except (ValueError, EOFError) as exc:
        print(f"gpufinops: init: {exc}", file=sys.stderr)
        return 2
    status = write(text, out, registry)
    if status == 0:
        from gpufinops.jobs.demo_summary import exe_name

        sources, exe = text.count("\n[sources."), exe_name()
        if not sources:
            print(
                f"Wrote {out}: a commented template with no source yet (ingest has nothing to load). Next: add "
                f"[sources.<name>] tables to it, or write it again with flags:\n"
                f"  {exe} init --force --out {out} --aws-cur-bucket BUCKET     # or --help for every source flag"
            )
            return status
        print(
            f"Wrote {out} ({sources} source(s)). Next:\n"
            f"  {exe} --config {out} doctor     # checks credentials and every source\n"
            f"  {exe} --config {out} ingest     # loads them"
        )
    return status
