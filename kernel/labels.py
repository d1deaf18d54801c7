"""The one label table: the human name of every code a person reads (kinds, patterns, pricing terms,
alert rules, workloads, roles, units) and the one name of spend that no team can be charged for.

Pure Python, no UI import: the dashboard, the weekly report, the CLI tables and the API's ``*_label``
fields all read it, so a code reads the same on every surface. A code missing from the table still
reads as words (``new_code`` → ``New code``), but a test checks that every code a registry can produce
has its own entry here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpufinops.kernel import providers

# Spend (or GPU-hours) that no team can be charged for: one name on every surface.
NO_TEAM = "(unattributed)"


def team_label(team: str | None) -> str:
    """A team as people read it: the tag's value, or :data:`NO_TEAM` where there is none."""
    return team if team else NO_TEAM


# --- the table, one mapping per kind of code ----------------------------------------------------------

# Recommendation kinds: each kind's label is a fact of its spec (docs/architecture.md, *Add a model kind*)
# and only there. This layer sits below the models and cannot read their registry, so the registry hands
# the labels down when it is imported (``models.registry`` calls :func:`name_kinds`; the dashboard's,
# the jobs' and the interfaces' packages import it first). Until then the table is empty, and labelling
# a code through it says so rather than guess a kind's name from its words.
KINDS: dict[str, str] = {}


class KindsNotLoaded(LookupError):
    """A code was labelled before ``gpufinops.models.registry`` handed the kinds' labels down."""


def name_kinds(labelled: Mapping[str, str]) -> None:
    """Make ``labelled`` (kind -> label, in the registry's order) the kinds' labels (the registry calls it)."""
    KINDS.clear()
    KINDS.update(labelled)


def _kinds() -> dict[str, str]:
    if not KINDS:
        raise KindsNotLoaded("no recommendation kind is labelled yet: import gpufinops.models.registry first")
    return KINDS


PATTERNS = {  # evidence["pattern"]
    "always_idle": "Always idle",
    "idle_off_hours": "Idle off hours",
    "idle_stretches": "Idle stretches",
    "allocated_idle": "Allocated but idle",
    "repatriate": "Move on-prem",
    "shrink_cluster": "Shrink the cluster",
    "burst_to_spot": "Burst to spot",
    "keep_onprem": "Keep on-prem",
    "orphan_volume": "Unattached volume",
    "orphan_snapshot": "Snapshot past retention",
    "cold_checkpoints": "Cold checkpoints",
    "idle_held": "Memory held, engine idle",
    "stalled_job": "Stalled after busy work",
    "input_bound": "Waiting for input",
    "no_tensor_cores": "FP32, tensor cores idle",
    "memory_bound_inference": "Memory-bound serving",
}
PRICING = {  # current / proposed pricing terms
    "on_demand": "On-demand",
    "spot": "Spot",
    "spot_mix": "Spot mix",
    "committed": "Committed",
    "commit_1y": "1-year commitment",
    "commit_3y": "3-year commitment",
    "owned": "Owned (on-prem)",
    "cloud": "Cloud",
}
STATES = {  # current / proposed resource states
    "released": "Released",
    "scheduled_off_hours": "Off nights and weekends",
    "scale_to_zero": "Scaled to zero when idle",
    "running": "Running",
    "stopped": "Stopped",
    "deleted": "Deleted",
    "unattached": "Unattached",
    "kept": "Kept",
}
ALERT_RULES = {
    "budget": "Budget",
    "budget_forecast": "Budget forecast",
    "anomaly": "Spend anomaly",
    "idle_burn": "Idle GPU spend",
    "stalled_job": "Stalled job",
    "stale_data": "Stale data",
    "budget_enforcement": "Budget enforcement",
}
SEVERITIES = {"info": "Info", "warning": "Warning", "critical": "Critical"}
STATUSES = {  # recommendations, alerts and ingest runs
    "open": "Open",
    "accepted": "Accepted",
    "dismissed": "Dismissed",
    "applied": "Applied",
    "resolved": "Resolved",
    "expired": "Expired",
    "superseded": "Superseded",
    "running": "Running",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "skipped": "Skipped",
}
WORKLOADS = {
    "training": "Training",
    "batch_inference": "Batch inference",
    "online_inference": "Online inference",
    "inference": "Inference",
    "serving": "Serving",
    "notebook": "Notebook",
    "batch": "Batch",
}
ROLES = {"finance": "Finance", "lead": "Team lead", "scheduler": "Scheduler"}
PLANS = {"primary": "Primary", "step": "Step", "alternative": "Alternative"}
WITHHOLD_REASONS = {
    "thin_evidence": "Thin evidence",
    "no_profiling_fields": "No DCGM profiling fields",
    "unpriced": "No price",
    "unknown_gpu_count": "Unknown GPU count",
    "unknown_gpu_spec": "Unknown GPU spec",
    "incomplete_metrics": "Incomplete metrics",
    "policy": "Policy",
    "capacity": "No capacity",
    "short_history": "Short history",
    "ramping": "Ramping up",
    "no_fitting_target": "No target fits",
    "no_iops_measurements": "No IOPS measurements",
    "unpriced_storage": "No storage rate on the bill",
    "no_prefix_access": "Prefix not listable",
    "no_read_metrics": "No read measurements",
    "old_objects_read": "Old checkpoints read",
}
BASES = {  # gpu_allocation_hourly.basis
    "whole": "Whole GPU",
    "mig": "MIG slice",
    "timeslice": "Time-sliced",
    "mps": "MPS",
    "unallocated": "Unallocated",
}
METHODS = {  # gpu_allocation_hourly.method: how a row's share of its GPU (or slice) was measured
    "presence": "Sole user",
    "slices": "Its MIG slice",
    "measured": "By measured activity",
    "equal": "Equal shares of the time",
    "idle": "Idle time",
    "unmeasured": "No metrics",
    "spread": "Spread over namespaces",
}
COST_BASES = {  # unit costs: how a serving pod-hour was charged (derived/unit_costs.py)
    "allocation": "Allocated GPU share",
    "whole_resource": "Whole resource",
}
SERVERS = {  # serving_metrics_hourly.server
    "vllm": "vLLM",
    "tgi": "Hugging Face TGI",
    "triton": "NVIDIA Triton",
    "sglang": "SGLang",
}
DIRECTIONS = {"spike": "Above the expected range", "drop": "Below the expected range"}  # a cost anomaly's
PERIODS = {"month": "Month", "quarter": "Quarter", "year": "Year", "week": "Week", "day": "Day"}
UNITS = {  # what a number is counted in
    "usd": "USD",
    "usd_per_hour": "USD per hour",
    "usd_per_gpu_hour": "USD per GPU-hour",
    "gpu_hours": "GPU-hours",
    "hours": "hours",
    "days": "days",
    "pct": "%",
    "gib": "GiB",
    "mib": "MiB",
    "kwh": "kWh",
    "kg_co2e": "kg CO₂e",
    "tokens": "tokens",
    "requests": "requests",
}


class _ProviderLabels(Mapping[str, str]):
    """The provider codes as people name them, read from each provider's spec (kernel/providers.py) at the
    call: one label per provider on every path, with or without ``field="provider"``, a registered one too."""

    def __getitem__(self, code: str) -> str:
        found = providers.spec(code)
        if found is None:
            raise KeyError(code)
        return found.label

    def __iter__(self):
        return (p.code for p in providers.registered())

    def __len__(self) -> int:
        return len(providers.registered())


PROVIDER_NAMES: Mapping[str, str] = _ProviderLabels()

TABLES: dict[str, Mapping[str, str]] = {
    "kind": KINDS,
    "pattern": PATTERNS,
    "pricing": PRICING,
    "state": STATES,
    "rule": ALERT_RULES,
    "severity": SEVERITIES,
    "status": STATUSES,
    "workload": WORKLOADS,
    "role": ROLES,
    "plan": PLANS,
    "reason": WITHHOLD_REASONS,
    "basis": BASES,
    "method": METHODS,
    "cost_basis": COST_BASES,
    "server": SERVERS,
    "period": PERIODS,
    "unit": UNITS,
    "provider": PROVIDER_NAMES,
    "direction": DIRECTIONS,
}
ACRONYMS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "usd": "USD",
    "id": "ID",
    "mig": "MIG",
    "mps": "MPS",
    "gib": "GiB",
    "mib": "MiB",
    "cpu": "CPU",
    "sm": "SM",
    "od": "on-demand",
}
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")


def words(code: str) -> str:
    """A code as words: ``new_code`` → ``New code`` (acronyms kept: ``gpu_hours`` → ``GPU hours``)."""
    parts = [ACRONYMS.get(p) or _provider_label(p) or p for p in code.split("_") if p]
    text = " ".join(parts)
    return text[:1].upper() + text[1:] if text else code


def _provider_label(code: str) -> str | None:
    """A provider code's label (its spec's ``label``: AWS, GCP, Azure, on-prem), or None."""
    spec = providers.spec(code)
    return spec.label if spec is not None else None


def _table(name: str) -> Mapping[str, str]:
    """One label table; the kinds' is the one the registry handed down (KindsNotLoaded before it did)."""
    return _kinds() if name == "kind" else TABLES[name]


def label(code: str | None, field: str | None = None) -> str:
    """The human name of ``code``: from ``field``'s table (``kind``, ``pattern``, …) when given, else
    from the first table that knows it, else its words. None reads as a dash."""
    if code is None or code == "":
        return "—"
    text = str(code)
    if field == "provider":
        return _provider_label(text) or text
    if field is not None and field in TABLES:
        found = _table(field).get(text)
        if found is not None:
            return found
    for name in TABLES:
        found = _table(name).get(text)  # the table the check reads is the one the label comes from
        if found is not None:
            return found
    return words(text) if SNAKE.match(text) else text


def labels_of(codes: str | None, field: str) -> str:
    """A comma-separated list of codes (``allocation,whole_resource``) as their labels."""
    return ", ".join(label(code, field) for code in (codes or "").split(",") if code) or "—"


def is_code(text: str) -> bool:
    """``text`` looks like a snake_case code a person should never read (``idle_gpu``)."""
    return bool(SNAKE.match(text))


# Fields whose values are codes, and the `*_label` field the API writes beside each.
LABELLED_FIELDS = ("kind", "pattern", "status", "rule", "severity", "workload", "plan", "role", "basis")


def with_labels(record: Mapping[str, Any], fields: tuple[str, ...] = LABELLED_FIELDS) -> dict[str, Any]:
    """``record`` with a ``<field>_label`` beside each code field it holds (codes unchanged; additive),
    ``team_label``, ``current_pricing_label`` / ``proposed_state_label`` … for a recommendation's
    ``current`` / ``proposed`` terms, and ``pattern_label`` from its evidence."""
    out = dict(record)
    for name in fields:
        value = record.get(name)
        if isinstance(value, str) and f"{name}_label" not in record:
            out[f"{name}_label"] = label(value, name)
    evidence = record.get("evidence")
    if "pattern" not in record and isinstance(evidence, Mapping) and isinstance(evidence.get("pattern"), str):
        out["pattern_label"] = label(evidence["pattern"], "pattern")
    if "team" in record:
        out["team_label"] = team_label(record.get("team"))
    for side in ("current", "proposed"):  # beside the object, which stays exactly as a scheduler reads it
        part = record.get(side)
        if isinstance(part, Mapping):
            for key in ("pricing", "state"):
                if isinstance(part.get(key), str):
                    out[f"{side}_{key}_label"] = label(part[key], key)
    return out


def age(hours: float | None) -> str:
    """An age as people say it: ``45 minutes``, ``5 hours``, ``31 days`` (never ``740.5`` hours)."""
    if hours is None or hours != hours or hours in (float("inf"), float("-inf")):
        return "—"
    if hours < 0:
        return "in the future"
    if hours < 1:
        minutes = round(hours * 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    if hours < 48:
        whole = round(hours)
        return f"{whole} hour{'s' if whole != 1 else ''}"
    days = round(hours / 24)
    return f"{days} days"


PERCENT_RULES = ("budget", "budget_forecast")  # their thresholds are shares of the budget


def period_text(value: Any) -> str:
    """An alert's period as people read it: ``2026-10`` stays; an ISO time reads as a day (or a day and
    a minute, in UTC)."""
    if value is None:
        return "-"
    text = str(value)
    if "T" not in text:
        return text
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    if (moment.hour, moment.minute) == (0, 0):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.tzinfo is not None else "")


def threshold_text(rule: str | None, value: Any) -> str:
    """A budget's threshold as a percentage (``1`` → ``100 %``); other rules' thresholds as they read."""
    if value is None:
        return "-"
    if rule in PERCENT_RULES:
        try:
            share = float(value)
        except ValueError:
            return str(value)
        return f"{share * 100:g} %" if share == share and abs(share) != float("inf") else str(value)
    return str(value)
