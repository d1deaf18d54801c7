"""SkyPilot task resource overrides: per workload, the recommended ``resources`` block.

Merge it into the workload's task YAML (``sky launch task.yaml`` reads ``resources``):
``accelerators`` ("L4:1") and ``instance_type`` from gpu_type / gpu_count / quantization findings,
``use_spot`` from spot_mix (a service that keeps part of its replicas on on-demand gets SkyServe's
``service.replica_policy.base_ondemand_fallback_replicas``), ``cloud`` from the provider. Findings that change no task resources
(commitments, a resource to switch off) are listed in a comment instead.
"""

from __future__ import annotations

from typing import Any

from jobs.export.labels import skypilot_accelerator
from jobs.export.plan import SIZE_KINDS, SPOT_KIND, changes_size, slug
from models.recommendation import provider_code

CLOUDS = {"aws": "aws", "gcp": "gcp", "azure": "azure", "onprem": "kubernetes"}


def _merge(resources: dict[str, Any], service: dict[str, Any], rec: dict[str, Any]) -> bool:
    """Fold one finding into a workload's resources (and SkyServe replica policy); False when it
    changes none."""
    cur, new = rec.get("current") or {}, rec.get("proposed") or {}
    if rec["kind"] in SIZE_KINDS:
        if not changes_size(rec):
            return False  # e.g. a schedule to stop it off-hours: no task resource changes
        count = new.get("gpu_count", cur.get("gpu_count"))
        model = new.get("gpu_model") or cur.get("gpu_model")
        if not count or not model:
            return False  # switched off, or nothing a task could request
        resources["accelerators"] = f"{skypilot_accelerator(model)}:{int(count)}"
        if new.get("instance_type"):
            resources["instance_type"] = new["instance_type"]
        provider = provider_code(new.get("provider") or rec.get("provider"))
        if provider in CLOUDS:
            resources["cloud"] = CLOUDS[provider]
        return True
    if rec["kind"] == SPOT_KIND:
        share = float(new["spot_share"]) if new.get("spot_share") is not None else (
            1.0 if new.get("pricing") == "spot" else 0.0)
        resources["use_spot"] = share > 0
        replicas = (rec.get("evidence") or {}).get("replicas")
        if 0 < share < 1 and isinstance(replicas, (int, float)) and replicas > 1:
            # a service keeps its on-demand share as SkyServe's on-demand fallback replicas
            service["replica_policy"] = {"base_ondemand_fallback_replicas": max(1, round((1 - share) * replicas))}
        resources.setdefault("cloud", CLOUDS.get(provider_code(rec.get("provider")) or "", None))
        if new.get("instance_type"):
            resources.setdefault("instance_type", new["instance_type"])
        if "accelerators" not in resources and (new.get("gpu_model") or cur.get("gpu_model")):
            count = new.get("gpu_count") or cur.get("gpu_count") or 1
            resources["accelerators"] = f"{skypilot_accelerator(new.get('gpu_model') or cur['gpu_model'])}:{int(count)}"
        return True
    return False


def documents(recs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[str]]]:
    by_workload: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in recs:
        name = rec.get("workload") or rec.get("resource_id") or rec["id"]
        by_workload.setdefault((rec.get("team") or "unattributed", name), []).append(rec)
    docs: list[tuple[dict[str, Any], list[str]]] = []
    for (team, name), group in sorted(by_workload.items()):
        # the larger saving decides where two findings set the same field
        group = sorted(group, key=lambda r: r.get("monthly_savings_usd") or 0)
        resources: dict[str, Any] = {}
        service: dict[str, Any] = {}
        used, unused = [], []
        for rec in group:
            (used if _merge(resources, service, rec) else unused).append(rec)
        notes = [f"team {team}, workload {name}"]
        notes += [f"{r['id']} ({r['kind']}): saves ${float(r.get('monthly_savings_usd') or 0):,.2f}/month"
                  for r in reversed(used)]
        notes += [f"{r['id']} ({r['kind']}): no task resource to change" for r in unused]
        resources = {k: v for k, v in resources.items() if v is not None}
        if resources:
            clash = sum(1 for (_t, other) in by_workload if other == name) > 1
            doc = {"name": slug(f"{team}-{name}" if clash else name, "task"), "resources": resources}
            if service:
                doc["service"] = service
            docs.append((doc, notes))
    return docs
