"""The Recommendation record (docs/models.md, *The recommendation object*) every model produces."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gpufinops.kernel import providers
from gpufinops.kernel.providers import provider_code  # re-exported: the models' one mapping
from gpufinops.warehouse import recommendation_read


def stable_id(kind: str, *parts: str | None) -> str:
    """The same finding gets the same id on every run (decisions attach to it)."""
    text = "|".join([kind, *[p or "" for p in parts]])
    return f"{kind}-{hashlib.sha1(text.encode()).hexdigest()[:16]}"


def money(value: Decimal | float | int) -> Decimal:
    return Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _plain(value: Any) -> Any:
    """JSON-safe plain Python: Decimals become floats, numpy scalars their Python values."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


@dataclass
class Recommendation:
    id: str
    kind: str
    team: str | None
    provider: str | None
    resource_id: str | None
    workload: str | None
    current: dict[str, Any]
    proposed: dict[str, Any]
    monthly_savings_usd: Decimal
    confidence: float
    risk: str
    evidence: dict[str, Any]
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    status: str = "open"
    # One plan per resource (models/plans.py): "primary" | "step" | "alternative", and the id its objects share.
    plan: str | None = None
    plan_id: str | None = None
    # The latest decision recorded on the finding (the read model's; None for a model's fresh output).
    decision: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Recommendation:
        """A stored finding's object (``warehouse.recommendation_read``: the read model) as a record, status and
        decision included; money back to exact cents."""
        values: dict[str, Any] = {name: obj.get(name) for name in recommendation_read.FIELDS}  # the read model's
        created = values["created_at"]
        values.update(
            id=str(values["id"]),
            kind=str(values["kind"]),
            current=dict(values["current"] or {}),
            proposed=dict(values["proposed"] or {}),
            evidence=dict(values["evidence"] or {}),
            monthly_savings_usd=money(Decimal(str(values["monthly_savings_usd"] or 0))),
            confidence=float(values["confidence"] or 0.0),
            risk=values["risk"] or "",
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else created or datetime.now(UTC),
            status=values["status"] or "open",
        )
        return cls(**values)


# Why a model made no finding on a resource it looked at, and what would let it: every withhold
# names the missing fact and the source that provides it (docs/models.md, *Withheld findings*).
WITHHOLD_REASONS = {
    "no_profiling_fields": (
        "DCGM's profiling fields (DCGM_FI_PROF_*: the detail names the ones the kind reads)",
        "dcgm_exporter or prometheus over a DCGM exporter whose counters file (-f, e.g. "
        "/etc/dcgm-exporter/dcp-metrics-included.csv) lists them; DCGM_FI_PROF_SM_ACTIVE, _SM_OCCUPANCY and "
        "_PIPE_FP16/FP32/FP64_ACTIVE are commented out (off) in default-counters.csv; nvidia-smi and "
        "CloudWatch cannot provide them",
    ),
    "thin_evidence": (
        "GPU metrics for enough of the lookback (days measured, share of billed hours)",
        "a utilisation source (dcgm_exporter, prometheus, nvidia_smi_csv) attributed to the resource",
    ),
    "unpriced": (
        "a price for the resource's type and region",
        "aws_pricing / aws_spot_prices (AWS), gcp_catalog / gcp_price_history (Google Cloud), azure_prices (Azure)",
    ),
    "unknown_gpu_count": (
        "the number of GPUs of the resource's instance type",
        "aws_pricing / gcp_catalog, or a type listed in warehouse/data/gpu_instance_types.csv",
    ),
    "unknown_gpu_spec": ("the GPU model's memory and throughput", "warehouse/data/gpu_specs.csv"),
    "incomplete_metrics": (
        "metrics from every GPU of the resource",
        "the utilisation source: export every GPU of the node (DCGM exporter on each GPU)",
    ),
    "policy": ("nothing: a rule forbids the change for this workload", "the resource's tags"),
    "short_history": (
        "more days of usage than the resource has had so far",
        "more days of history (the detail says how many): nothing to configure, the next runs will have them",
    ),
    "ramping": (
        "days of usage at the new level (the lookback still holds the level before the change)",
        "more days of history: re-run once the last days' level fills the lookback's busiest 5 % of hours",
    ),
    "no_fitting_target": (
        "a cheaper type the workload is known to fit (each one considered is listed with why it was refused)",
        "a benchmark of the workload on the refused GPU (a replica there measures its p95), or [models] "
        "max_target_util_pct / memory_headroom if the cap is stricter than the service needs",
    ),
    "no_iops_measurements": (
        "the volume's read and write operations over enough days",
        "CloudWatch AWS/EBS VolumeReadOps / VolumeWriteOps (the storage inventory reads them), Cloud "
        "Monitoring disk operations, or Azure Monitor's Composite Disk Read / Write Operations/sec",
    ),
    "unpriced_storage": (
        "the bill's rate for the storage meter (usage type or SKU) in the volume's or bucket's region",
        "a cost source carrying the account's storage lines (aws_cur, focus_files, gcp_billing_export, "
        "azure_cost_export)",
    ),
    "no_prefix_access": (
        "a listing of the configured prefix",
        "s3:ListBucket (GCS: storage.objects.list; Azure: Storage Blob Data Reader) on the bucket for the "
        "inventory's credentials",
    ),
    "no_read_metrics": (
        "GET requests on the prefix over the lookback",
        "an S3 request-metrics filter on the prefix, named in the prefix's read_filter (Azure: the storage "
        "account's GetBlob transactions in Azure Monitor)",
    ),
    "old_objects_read": (
        "nothing: the prefix is read more than its kept checkpoints explain",
        "the prefix's GET requests (a lifecycle rule would make those reads slower or dearer)",
    ),
    "capacity": (
        "free GPUs on the on-prem node group at its target utilisation",
        "more nodes in the group, or less load on it ([models] onprem_target_utilisation)",
    ),
}


def price_sources(provider: str | None) -> str | None:
    """The source types that price a provider (its spec's ``price_sources``), or None."""
    spec = providers.spec(provider)
    return spec.price_sources if spec is not None else None


@dataclass(frozen=True)
class Withheld:
    """A resource a model examined and made no finding on, with the reason and the fact it lacked."""

    kind: str
    resource_id: str | None
    reason: str  # a WITHHOLD_REASONS key
    detail: str  # one sentence with the numbers
    team: str | None = None
    provider: str | None = None
    missing: str = ""
    source_hint: str = ""

    @classmethod
    def of(
        cls, kind: str, row: dict[str, Any] | None, reason: str, detail: str, resource_id: str | None = None
    ) -> Withheld:
        missing, hint = WITHHOLD_REASONS[reason]
        row = row or {}
        provider = row.get("provider_code") or provider_code(row.get("provider"))
        spec = providers.spec(provider)
        if reason in ("unpriced", "unknown_gpu_count") and spec is not None and spec.price_sources:
            inventory = f", or a type listed in its GPU inventory ({spec.inventory.name})" if spec.inventory else ""
            hint = spec.price_sources + (inventory if reason == "unknown_gpu_count" else "")
        return cls(
            kind=kind,
            resource_id=resource_id or row.get("resource_id"),
            reason=reason,
            detail=detail,
            team=row.get("team"),
            provider=provider,
            missing=missing,
            source_hint=hint,
        )

    @classmethod
    def from_detail(
        cls, kind: str, row: dict[str, Any] | None, detail: str, resource_id: str | None = None
    ) -> Withheld:
        """Classify a model's own sentence ("unpriced: …", "only 3.0 measured days …")."""
        lowered = detail.lower()
        if lowered.startswith("unpriced"):
            reason = "unknown_gpu_spec" if "gpu_specs" in lowered else "unpriced"
        elif lowered.startswith(("only", "metrics cover")):
            reason = "thin_evidence"
        else:
            reason = "policy"
        return cls.of(kind, row, reason, detail, resource_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Findings:
    """What a model's recommend step returns (models/registry.py): its candidates, the resources it
    withheld (with the missing fact) and, for onprem_vs_cloud, the comparison: every node group's and
    workload's verdict, facts rather than recommendations."""

    recommendations: list[Recommendation] = field(default_factory=list)
    withheld: list[Withheld] = field(default_factory=list)
    comparison: list[Recommendation] = field(default_factory=list)


def on_resource(
    kind: str,
    row: dict[str, Any],
    id_parts: tuple[str | None, ...],
    workload: str | None,
    created_at: datetime | None = None,
    **what: Any,
) -> Recommendation:
    """A finding on the resource of ``row`` (its provider name, resource_id and team), its id from the kind,
    the provider, the resource and ``id_parts``, made at ``created_at`` (default: now); ``what``: current,
    proposed, monthly_savings_usd, confidence, risk, evidence."""
    rec = Recommendation(
        id=stable_id(kind, row["provider"], row["resource_id"], *id_parts),
        kind=kind,
        team=row["team"],
        provider=provider_code(row["provider"]),
        resource_id=row["resource_id"],
        workload=workload,
        **what,
    )
    if created_at is not None:
        rec.created_at = created_at
    return rec


def pod_workload(row: dict[str, Any]) -> str:
    """A pod's workload name: namespace/pod (the pod alone outside a namespace)."""
    return f"{row['namespace']}/{row['pod']}" if row["namespace"] else row["pod"]


def from_warehouse(
    con: Any, settings: Any, settings_class: Any, load: Callable[[Any, Any], Any], find: Callable[[Any, Any], Findings]
) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld) of one model over the warehouse: its settings (``settings_class``'s own,
    or a `[models]` section to parse), what its ``load`` step reads, then its ``find`` step (no connection)."""
    s = settings if isinstance(settings, settings_class) else settings_class.from_config(settings)
    found = find(load(con, s), s)
    return found.recommendations, found.withheld


# The flat view of a recommendation: the CLI's `recommend --format csv` and the dashboard's CSV
# download write these columns, from this one function (nested current/proposed/evidence become the
# few words a reader needs; the JSON format keeps them whole).
FLAT_COLUMNS = (
    "id",
    "plan",
    "kind",
    "team",
    "provider",
    "resource_id",
    "monthly_savings_usd",
    "confidence",
    "action",
    "pattern",
    "change",
    "plan_id",
    "status",
    "decision",
)
CHANGE_KEYS = (
    "instance_type",
    "gpu_model",
    "gpu_count",
    "pricing",
    "precision",
    "state",
    "volume_type",
    "storage_class",
)


def change_text(current: dict[str, Any], proposed: dict[str, Any]) -> str:
    """What a recommendation changes, in a few words: ``gpu_model A100-80GB → L4, gpu_count 8 → 2``.
    A key the proposal leaves open (None) is not a change; a key with no current value reads
    ``state → released``."""
    parts = []
    for key in CHANGE_KEYS:
        new = proposed.get(key)
        old = current.get(key)
        if new is None or new == old:
            continue
        parts.append(f"{key} {old} → {new}" if old is not None else f"{key} → {new}")
    return ", ".join(parts)


def flat_row(rec: dict[str, Any]) -> dict[str, Any]:
    """A recommendation (``to_dict()`` form, or a warehouse row with JSON text) as FLAT_COLUMNS."""

    def part(name: str) -> dict[str, Any]:
        value = rec.get(name)
        if isinstance(value, str):
            value = json.loads(value or "{}")
        return value if isinstance(value, dict) else {}

    current, proposed, evidence = part("current"), part("proposed"), part("evidence")
    savings = rec.get("monthly_savings_usd")
    decision = rec.get("decision")  # the object's {"decision": …} or the read model's column
    if isinstance(decision, dict):
        decision = decision.get("decision")
    return {
        "id": rec.get("id"),
        "plan": rec.get("plan"),
        "kind": rec.get("kind"),
        "team": rec.get("team"),
        "provider": rec.get("provider"),
        "plan_id": rec.get("plan_id"),
        "resource_id": rec.get("resource_id"),
        "monthly_savings_usd": money(Decimal(str(savings))) if savings is not None else None,
        "confidence": float(rec["confidence"]) if rec.get("confidence") is not None else None,
        "action": proposed.get("action"),
        "pattern": evidence.get("pattern"),
        "change": change_text(current, proposed),
        "status": rec.get("status"),
        "decision": decision or None,
    }


def flat_csv(recs: list[dict[str, Any]]) -> str:
    """Recommendations as flat CSV (FLAT_COLUMNS; money as exact decimal text, unknown values empty)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FLAT_COLUMNS)
    for rec in recs:
        row = flat_row(rec)
        writer.writerow(["" if row[c] is None else row[c] for c in FLAT_COLUMNS])
    return buffer.getvalue()
