"""What ``gpufinops init``'s user picked: from the flags, or one question per source on a terminal.

The built-in sources' questions are asked here in their order; then each question a source spec
declares (``InitQuestion``, read from the ingest registry's specs only when init runs or parses).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpufinops.ingest.core.registry import Registry

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Question:
    """A source spec's ``InitQuestion`` with its type: init's flag, question and written section."""

    type: str  # the source type written
    flag: str  # argparse dest of its flag
    question: str  # asked on a terminal
    option: str  # the key the answer sets
    section: str  # [sources.<section>]


def questions(registry: Registry | None = None) -> list[Question]:
    """The generic questions the source specs declare, in type order (``registry``: the source types,
    default the built-in ones; building it imports every source module, so only ``init`` calls this)."""
    from gpufinops.ingest.core.registry import InitQuestion, default_registry

    registry = default_registry() if registry is None else registry
    return [
        Question(type=cls.meta.name, **dataclasses.asdict(cls.meta.init))
        for cls in registry  # in type order
        if isinstance(cls.meta.init, InitQuestion)
    ]


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
    answers: dict[str, str] = field(default_factory=dict)  # a spec question's flag -> its answer


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


def from_flags(args: argparse.Namespace, asked: Sequence[Question] = ()) -> Choices:
    answers = {q.flag: str(getattr(args, q.flag)) for q in asked if getattr(args, q.flag, None)}
    return Choices(
        answers=answers,
        warehouse=args.warehouse,
        team_tags=args.team_tag or Choices().team_tags,
        aws_bucket=args.aws_cur_bucket,
        aws_prefix=args.aws_cur_prefix,
        aws_path=args.aws_cur_path,
        aws_region=args.aws_region,
        aws_endpoint=args.aws_endpoint_url,
        aws_prices=not args.no_aws_prices,
        aws_storage=list(args.aws_storage_prefix or []),
        bigquery_table=args.bigquery_table,
        gcp_path=args.gcp_billing_path,
        gcp_endpoint=args.gcp_endpoint,
        gcp_catalog_endpoint=args.gcp_catalog_endpoint,
        gcp_prices=not args.no_gcp_prices,
        dcgm_targets=list(args.dcgm_target or []),
        prometheus_url=args.prometheus_url,
        nvidia_smi_path=args.nvidia_smi_path,
        focus_path=args.focus_path,
        onprem_groups=[parse_group(g) for g in args.onprem_group or []],
        onprem_pue=args.onprem_pue,
        onprem_energy=args.onprem_energy_usd_per_kwh,
        onprem_years=args.onprem_amortisation_years,
    )


def normalise_bucket(choices: Choices) -> str | None:
    """The AWS bucket as pasted (``s3://acme-cur/cur2/``, an ARN, a trailing slash) split into bucket and prefix
    (ingest/core/bucket_url.py); the sentence saying what was understood, or None. ValueError: no bucket name."""
    from gpufinops.ingest.core import bucket_url

    if not choices.aws_bucket:
        return None
    url = bucket_url.parse(choices.aws_bucket, "s3", choices.aws_prefix or "")
    choices.aws_bucket, choices.aws_prefix = url.bucket, url.prefix
    return url.understood()


def ask(choices: Choices, prompt: Callable[[str], str] = input, out=None, asked: Sequence[Question] = ()) -> Choices:
    """One question per source; Enter keeps the default shown in brackets (or skips the source)."""
    out = out or sys.stdout  # the stream at call time (a test's capture), not the one at import

    def q(text: str, default: str = "") -> str:
        answer = prompt(f"{text}{f' [{default}]' if default else ''}: ").strip()
        return answer or default

    print("gpufinops init: press Enter to skip a source (or keep the [default]).", file=out)
    choices.warehouse = q("Warehouse file (DuckDB), relative to the config", choices.warehouse)
    choices.aws_bucket = q("AWS: S3 bucket of your CUR 2.0 / Data Export", choices.aws_bucket or "") or None
    if choices.aws_bucket:
        understood = normalise_bucket(choices)  # s3://bucket/prefix/ or an ARN: the prefix becomes the default
        if understood:
            print(f"  ({understood})", file=out)
        choices.aws_prefix = q("AWS: key prefix of the export in that bucket", choices.aws_prefix)
        choices.aws_region = q("AWS: the bucket's region", choices.aws_region)
    prefixes = q(
        "AWS: checkpoint prefixes to inventory with the EBS volumes (s3://bucket/prefix, comma-separated)",
        ",".join(choices.aws_storage),
    )
    choices.aws_storage = [p.strip() for p in prefixes.split(",") if p.strip()]
    choices.bigquery_table = (
        q("Google Cloud: BigQuery billing export table (project.dataset.table)", choices.bigquery_table or "") or None
    )
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
            choices.onprem_groups.append(
                {
                    "name": name,
                    "nodes": [
                        n.strip() for n in q("  host names of its nodes (comma-separated)").split(",") if n.strip()
                    ],
                    "gpu_model": q("  GPU model (as gpu_specs names it, e.g. A100-SXM4-80GB)"),
                    "gpus_per_node": int(q("  GPUs per node", "8")),
                    "server_price_usd": float(q("  server price per node, USD")),
                }
            )
    for spec in asked:  # the specs' own questions, after the built-in ones
        answer = q(spec.question, choices.answers.get(spec.flag, ""))
        if answer:
            choices.answers[spec.flag] = answer
    return choices
