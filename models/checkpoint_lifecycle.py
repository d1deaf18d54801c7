"""checkpoint_lifecycle: a configured checkpoint prefix whose old objects are not read → a lifecycle rule.

Objects are grouped by run and checkpoint (the first two path segments under the prefix). Over the days its
S3 request-metrics filter measured, the prefix's GETs must be no more than the objects of the checkpoints a
rule keeps (each run's newest ``lifecycle_keep_last`` and those younger than ``lifecycle_transition_days``):
every read could then have gone to those, none to the old ones. The rule: objects move to Glacier Instant
Retrieval (GCS: Coldline; Azure Blob Storage: Cool, its container written ``account/container``) after ``lifecycle_transition_days``; checkpoints outside each run's newest
``lifecycle_keep_last`` expire after ``lifecycle_expire_days``. Priced per checkpoint at the bill's own
storage-class rates: each checkpoint's bytes as the rule would leave them today, against what they cost now.
A prefix the inventory could not list, or without read measurements, is withheld and named.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, stable_id
from gpufinops.models.storage_common import GIB_PER_BYTE, StorageInputs, load, storage_of
from gpufinops.models.storage_tier import StorageSettings

KIND = "checkpoint_lifecycle"
MAX_EXPIRE_RULES = 998  # S3 takes 1,000 rules in one configuration: one is the transition


def _location(provider: str, bucket: str, prefix: str) -> str:
    facts = storage_of(provider)
    return facts.location(bucket, prefix) if facts else f"{provider}://{bucket}/{prefix}"


def _cold(provider: str) -> str:
    facts = storage_of(provider)
    return facts.cold_class if facts else "cold"


def _rate(inputs: StorageInputs, provider: str, region: str, storage_class: str) -> Decimal | None:
    facts = storage_of(provider)
    return inputs.rate(provider, region, facts.class_meters.get(storage_class)) if facts else None


def _plan(groups: list[dict[str, Any]], inputs: StorageInputs, settings: StorageSettings) -> list[dict[str, Any]]:
    """Each checkpoint group with its age, whether the rule keeps it and what the rule does to it today."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        by_run[g["run"] or ""].append(g)
    out = []
    for members in by_run.values():
        newest = sorted(
            {g["checkpoint"] for g in members},
            key=lambda c: max(g["newest_at"] for g in members if g["checkpoint"] == c),
            reverse=True,
        )[: settings.lifecycle_keep_last]
        for g in members:
            age = (inputs.now - g["newest_at"]).total_seconds() / 86400.0
            kept = g["checkpoint"] in newest
            if not kept and age >= settings.lifecycle_expire_days:
                fate = "expire"
            elif age >= settings.lifecycle_transition_days:
                fate = "cold"
            else:
                fate = "stay"
            out.append({**g, "age_days": age, "kept": kept or age < settings.lifecycle_transition_days, "fate": fate})
    return out


def _prefix_finding(
    inputs: StorageInputs,
    settings: StorageSettings,
    key: tuple[str, str, str],
    groups: list[dict[str, Any]],
    out: Findings,
) -> None:
    provider, bucket, prefix = key
    where = _location(provider, bucket, prefix)
    team = next((g["team"] for g in groups if g["team"]), None)
    row = {"resource_id": where, "team": team, "provider_code": provider}
    refused = next((g["access"] for g in groups if g["access"] != "ok"), None)
    if refused:
        out.withheld.append(Withheld.of(KIND, row, "no_prefix_access", f"{where}: {refused}"))
        return
    listed = [g for g in groups if g["objects"]]
    if not listed:
        return
    literal = next((r for r in inputs.reads if r[0] == bucket and prefix.startswith(r[1])), None)
    if literal is None:
        out.withheld.append(Withheld.of(KIND, row, "no_read_metrics", f"no GET measurements of {where}"))
        return
    plan = _plan(listed, inputs, settings)
    kept_objects = sum(g["objects"] for g in plan if g["kept"])
    gets = inputs.reads[literal]
    if gets > kept_objects:
        out.withheld.append(
            Withheld.of(
                KIND,
                row,
                "old_objects_read",
                f"{gets:.0f} GETs on {where} over {inputs.read_days.get(literal, 0)} days, more than the "
                f"{kept_objects} objects of the checkpoints a rule keeps: older checkpoints may be read",
            )
        )
        return
    region = inputs.bucket_regions.get(bucket, "")
    cold = _cold(provider)
    now_cost = new_cost = Decimal(0)
    for g in plan:
        rate_now = _rate(inputs, provider, region, g["storage_class"])
        rate_cold = _rate(inputs, provider, region, cold)
        if rate_now is None or (g["fate"] == "cold" and rate_cold is None):
            lacking = g["storage_class"] if rate_now is None else cold
            out.withheld.append(
                Withheld.of(
                    KIND,
                    row,
                    "unpriced_storage",
                    f"the bill carries no {lacking} storage rate for {bucket} ({region or 'no region'})",
                )
            )
            return
        gib = Decimal(g["bytes"]) * GIB_PER_BYTE
        now_cost += gib * rate_now
        new_cost += Decimal(0) if g["fate"] == "expire" else gib * (rate_cold if g["fate"] == "cold" else rate_now)
    saving = money(now_cost - new_cost)
    if saving < Decimal(str(settings.storage_min_monthly_savings_usd)):
        return
    expiring = sorted((g for g in plan if not g["kept"]), key=lambda g: -g["bytes"])
    paths = sorted(
        {
            f"{g['prefix']}{g['run']}/{g['checkpoint']}" if g["run"] else f"{g['prefix']}{g['checkpoint']}"
            for g in expiring[:MAX_EXPIRE_RULES]
        }
    )
    gib_of = lambda fate: round(sum(g["bytes"] for g in plan if g["fate"] == fate) / 2**30, 3)  # noqa: E731
    out.recommendations.append(
        Recommendation(
            id=stable_id(KIND, provider, bucket, prefix),
            kind=KIND,
            team=team,
            provider=provider,
            resource_id=where,
            workload=None,
            current={
                "storage_class": "mixed" if len({g["storage_class"] for g in plan}) > 1 else plan[0]["storage_class"],
                "objects": sum(g["objects"] for g in plan),
                "gib": gib_of("stay") + gib_of("cold") + gib_of("expire"),
                "monthly_cost_usd": money(now_cost),
            },
            proposed={
                "action": f"lifecycle rule on {where}: {cold} after {settings.lifecycle_transition_days} days, "
                f"expire after {settings.lifecycle_expire_days} days, keep each run's last "
                f"{settings.lifecycle_keep_last}",
                "bucket": bucket,
                "prefix": prefix,
                "storage_class": cold,
                "transition_days": settings.lifecycle_transition_days,
                "expire_days": settings.lifecycle_expire_days,
                "keep_last": settings.lifecycle_keep_last,
                "expire_prefixes": paths,
                "monthly_cost_usd": money(new_cost),
            },
            monthly_savings_usd=saving,
            confidence=0.8 if len(paths) == len(expiring) else 0.6,
            risk="low",
            evidence={
                "pattern": "cold_checkpoints",
                "gets": gets,
                "read_days": inputs.read_days.get(literal, 0),
                "kept_objects": kept_objects,
                "gib_to_cold": gib_of("cold"),
                "gib_to_expire": gib_of("expire"),
                "region": region,
                "rate_source": "the bill's own rates (last 30 days)",
                "expire_rules_left_out": max(0, len(expiring) - len(paths)),
                **({"account_resource_id": inputs.bucket_accounts[bucket]} if bucket in inputs.bucket_accounts else {}),
            },
        )
    )


def findings(inputs: StorageInputs, settings: StorageSettings) -> Findings:
    out = Findings()
    by_prefix: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for g in inputs.objects:
        if g["purpose"] == "checkpoint":
            by_prefix[(g["provider"], g["bucket"], g["prefix"])].append(g)
    for key in sorted(by_prefix):
        _prefix_finding(inputs, settings, key, by_prefix[key], out)
    return out


__all__ = ["KIND", "findings", "load"]
