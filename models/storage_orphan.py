"""storage_orphan: storage GPU work left behind.

* A volume unattached for at least ``storage_orphan_days`` whose last instance was a GPU resource: delete
  it, keeping a snapshot (an existing snapshot of it when there is one, else a new one priced at the bill's
  snapshot rate for the volume's size: the most a first, full snapshot holds). The saving is the volume's
  monthly cost at the bill's rates less the new snapshot's.
* A snapshot older than ``storage_snapshot_retention_days`` whose volume no longer exists and whose tags
  name a team: delete it; the saving is what the bill charged for it over the last 30 days (else its size
  at the bill's snapshot rate).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpufinops.models.recommendation import Findings, Withheld, money
from gpufinops.models.storage_common import (
    StorageInputs,
    finding,
    gpu_resource,
    load,
    storage_of,
    volume_monthly_cost,
    volume_team,
)
from gpufinops.models.storage_tier import StorageSettings

KIND = "storage_orphan"


def _snapshot_meter(provider: str) -> str:
    facts = storage_of(provider)
    return facts.snapshot_meter if facts else "snapshot"


def _volume_finding(inputs: StorageInputs, settings: StorageSettings, v: dict[str, Any], out: Findings) -> None:
    gpu, gpu_type = gpu_resource(inputs, v)
    if gpu is None or v.get("attached_instance_id") or v.get("detached_at") is None:
        return
    days = (inputs.now - v["detached_at"]).total_seconds() / 86400.0
    if days < settings.storage_orphan_days:
        return
    row = {"resource_id": v["volume_id"], "team": volume_team(inputs, v), "provider_code": v["provider"]}
    cost, lacking = volume_monthly_cost(inputs, v)
    snap_rate = inputs.rate(v["provider"], v["region"], _snapshot_meter(v["provider"]))
    kept = sorted(
        (
            s
            for s in inputs.snapshots
            if s["volume_id"] == v["volume_id"]
            and s["started_at"] is not None
            and v.get("last_attached_at") is not None
            and s["started_at"] >= v["last_attached_at"]
        ),
        key=lambda s: s["started_at"],
    )
    if cost is None or (not kept and snap_rate is None):
        out.withheld.append(
            Withheld.of(
                KIND,
                row,
                "unpriced_storage",
                f"the bill carries no {lacking or _snapshot_meter(v['provider'])} rate in {v['region']}",
            )
        )
        return
    if kept:
        keep = {"snapshot_id": kept[-1]["snapshot_id"], "new": False, "monthly_cost_usd": money(0)}
        snapshot_cost = Decimal(0)
    else:
        snapshot_cost = (snap_rate or Decimal(0)) * Decimal(str(v["size_gib"] or 0))
        keep = {"snapshot_id": None, "new": True, "size_gib": v["size_gib"], "monthly_cost_usd": money(snapshot_cost)}
    saving = money(cost - snapshot_cost)
    if saving < Decimal(str(settings.storage_min_monthly_savings_usd)):
        return
    action = (
        f"delete {v['volume_id']}: snapshot {keep['snapshot_id']} keeps it"
        if not keep["new"]
        else f"snapshot {v['volume_id']}, then delete it"
    ) + f" (last attached to GPU resource {gpu}, {gpu_type})"
    out.recommendations.append(
        finding(
            KIND,
            v["provider"],
            v["volume_id"],
            row["team"],
            current={
                "state": "unattached",
                "volume_type": v["volume_type"],
                "size_gib": v["size_gib"],
                "monthly_cost_usd": money(cost),
                "gpu_resource": gpu,
            },
            proposed={
                "action": action,
                "state": "deleted",
                "keep_snapshot": keep,
                "monthly_cost_usd": money(snapshot_cost),
            },
            monthly_savings_usd=saving,
            confidence=round(min(1.0, days / (2.0 * settings.storage_orphan_days)), 2),
            risk="medium" if keep["new"] else "low",
            evidence={
                "pattern": "orphan_volume",
                "gpu_resource_id": gpu,
                "gpu_resource_type": gpu_type,
                "unattached_days": round(days, 1),
                "region": v["region"],
                "rate_source": "the bill's own rates (last 30 days)",
            },
        )
    )


def _snapshot_finding(
    inputs: StorageInputs, settings: StorageSettings, s: dict[str, Any], volume_ids: set[str], out: Findings
) -> None:
    if s["volume_id"] in volume_ids or not s.get("team") or s["started_at"] is None:
        return  # its volume exists, or it is not named as any team's: out of scope
    age = (inputs.now - s["started_at"]).total_seconds() / 86400.0
    if age < settings.storage_snapshot_retention_days:
        return
    billed = inputs.snapshot_bills.get(s["snapshot_id"])
    rate = inputs.rate(s["provider"], s["region"], _snapshot_meter(s["provider"]))
    row = {"resource_id": s["snapshot_id"], "team": s["team"], "provider_code": s["provider"]}
    if billed is None and rate is None:
        out.withheld.append(
            Withheld.of(
                KIND,
                row,
                "unpriced_storage",
                f"the bill carries neither {s['snapshot_id']}'s lines nor a {_snapshot_meter(s['provider'])} rate",
            )
        )
        return
    cost = billed if billed is not None else (rate or Decimal(0)) * Decimal(str(s["size_gib"] or 0))
    saving = money(cost)
    if saving < Decimal(str(settings.storage_min_monthly_savings_usd)):
        return
    out.recommendations.append(
        finding(
            KIND,
            s["provider"],
            s["snapshot_id"],
            s["team"],
            current={
                "state": "kept",
                "size_gib": s["size_gib"],
                "monthly_cost_usd": saving,
                "volume_id": s["volume_id"],
            },
            proposed={
                "action": f"delete snapshot {s['snapshot_id']} (its volume {s['volume_id']} is gone)",
                "state": "deleted",
                "monthly_cost_usd": money(0),
            },
            monthly_savings_usd=saving,
            confidence=0.9,
            risk="medium",
            evidence={
                "pattern": "orphan_snapshot",
                "age_days": round(age, 1),
                "region": s["region"],
                "retention_days": settings.storage_snapshot_retention_days,
                "rate_source": "the snapshot's own bill lines" if billed is not None else "the bill's snapshot rate",
            },
        )
    )


def findings(inputs: StorageInputs, settings: StorageSettings) -> Findings:
    out = Findings()
    for v in inputs.volumes:
        _volume_finding(inputs, settings, v, out)
    volume_ids = {v["volume_id"] for v in inputs.volumes}
    for s in inputs.snapshots:
        _snapshot_finding(inputs, settings, s, volume_ids, out)
    return out


__all__ = ["KIND", "findings", "load"]
