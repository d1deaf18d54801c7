"""From stored recommendations to a GPU plan per team: how many GPUs of which model, how many on spot.

The schedulers' formats (Kueue quotas, Karpenter NodePools, SkyPilot resources) all carry the same
plan. It starts from what each team runs today (peak concurrent billed GPUs per provider and GPU
model, ``queries.team_gpu_capacity``; where no cost lines exist, the recommendations' ``current``)
and applies the actionable findings generically by their ``current``/``proposed`` keys:

- a finding that changes ``gpu_count``, ``gpu_model`` or ``provider`` (gpu_count, gpu_type,
  quantization, onprem_vs_cloud, an always-idle idle_gpu) moves GPUs between pools; per resource
  only the finding with the largest savings counts, so two findings never both shrink one node;
- a spot_mix finding sets the pool's spot share: ``proposed.spot_share`` (0–1) of its GPUs, or all
  of them when ``proposed.pricing`` is ``spot``; a team without one keeps today's share;
- ``proposed.instance_type`` joins the pool's recommended instance types.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from models.recommendation import provider_code

SIZE_KINDS = ("gpu_count", "gpu_type", "quantization", "onprem_vs_cloud", "idle_gpu")
SPOT_KIND = "spot_mix"


@dataclass
class Pool:
    """GPUs of one model at one provider for one team: today and as recommended."""
    team: str
    provider: str
    gpu_model: str
    current_gpus: int = 0
    current_spot_gpus: int = 0
    gpus: int = 0
    spot_gpus: int = 0
    instance_types: list[str] = field(default_factory=list)       # recommended first
    spot_instance_types: list[str] = field(default_factory=list)  # proposed for spot capacity
    recommendation_ids: list[str] = field(default_factory=list)
    monthly_savings_usd: float = 0.0
    spot_delta: float = 0.0  # fractional spot GPUs moved by per-resource findings, rounded once at the end

    @property
    def on_demand_gpus(self) -> int:
        return max(self.gpus - self.spot_gpus, 0)

    def note(self, rec: dict[str, Any]) -> None:
        if rec["id"] not in self.recommendation_ids:
            self.recommendation_ids.append(rec["id"])
            self.monthly_savings_usd += float(rec.get("monthly_savings_usd") or 0)


def slug(text: str | None, default: str = "unattributed") -> str:
    """A Kubernetes name / label value: lower-case alphanumerics and '-', at most 63 characters."""
    value = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")[:63].strip("-")
    return value or default


def _provider(rec: dict[str, Any], proposed: dict[str, Any] | None = None) -> str | None:
    """The finding's provider code (aws | gcp | onprem …), or the one it proposes moving to."""
    return provider_code((proposed or {}).get("provider") or rec.get("provider"))


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(round(float(value)))
    except (TypeError, ValueError):
        return None


def _share(value: Any) -> float | None:
    try:
        share = float(value)
    except (TypeError, ValueError):
        return None
    return min(max(share, 0.0), 1.0) if share == share else None


class Planner:
    def __init__(self) -> None:
        self.pools: dict[tuple[str, str, str], Pool] = {}

    def pool(self, team: str | None, provider: str | None, gpu_model: str | None) -> Pool:
        key = (team or "unattributed", provider or "unknown", gpu_model or "unknown")
        if key not in self.pools:
            self.pools[key] = Pool(*key)
        return self.pools[key]

    def add_capacity(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            pool = self.pool(row["team"], provider_code(row["provider_name"]), row["gpu_model"])
            pool.current_gpus += int(row["peak_gpus"] or 0)
            pool.current_spot_gpus += int(row["peak_spot_gpus"] or 0)
            for itype in row.get("instance_types") or []:
                if itype not in pool.instance_types:
                    pool.instance_types.append(itype)

    def add_baseline_from(self, recs: list[dict[str, Any]]) -> None:
        """Pools no cost line describes: today's size from the findings' ``current`` per resource."""
        known = set(self.pools)
        seen: dict[tuple, tuple[int, bool]] = {}
        for rec in recs:
            cur = rec.get("current") or {}
            count = _int(cur.get("gpu_count"))
            key = (rec.get("team") or "unattributed", _provider(rec) or "unknown", cur.get("gpu_model") or "unknown")
            if count is None or key in known:
                continue
            resource = (key, rec.get("resource_id") or rec.get("workload") or rec["id"])
            if count >= seen.get(resource, (-1, False))[0]:
                seen[resource] = (count, cur.get("pricing") == "spot")
            if cur.get("instance_type"):
                pool = self.pool(*key)
                if cur["instance_type"] not in pool.instance_types:
                    pool.instance_types.append(cur["instance_type"])
        for (key, _resource), (count, spot) in seen.items():
            pool = self.pool(*key)
            pool.current_gpus += count
            pool.current_spot_gpus += count if spot else 0

    def start(self) -> None:
        for pool in self.pools.values():
            pool.gpus, pool.spot_gpus = pool.current_gpus, pool.current_spot_gpus

    def apply_size(self, recs: list[dict[str, Any]]) -> None:
        best: dict[tuple, dict[str, Any]] = {}
        for rec in recs:
            if rec["kind"] not in SIZE_KINDS or not changes_size(rec):
                continue
            resource = (rec.get("team"), _provider(rec), rec.get("resource_id") or rec.get("workload") or rec["id"])
            if resource not in best or (rec.get("monthly_savings_usd") or 0) > (best[resource].get("monthly_savings_usd") or 0):
                best[resource] = rec
        for rec in best.values():
            cur, new = rec.get("current") or {}, rec.get("proposed") or {}
            old_count = _int(cur.get("gpu_count")) or 0
            old_pool = self.pool(rec.get("team"), _provider(rec), cur.get("gpu_model"))
            old_pool.gpus -= old_count
            if cur.get("pricing") == "spot":
                old_pool.spot_gpus -= old_count
            old_pool.note(rec)
            new_pool = self.pool(rec.get("team"), _provider(rec, new), new.get("gpu_model") or cur.get("gpu_model"))
            new_count = _int(new.get("gpu_count"))
            new_count = old_count if new_count is None else new_count
            new_pool.gpus += new_count
            if (new.get("pricing") or cur.get("pricing")) == "spot":
                new_pool.spot_gpus += new_count
            new_pool.note(rec)
            if new_count and new.get("instance_type") and new["instance_type"] not in new_pool.instance_types:
                new_pool.instance_types.insert(0, new["instance_type"])

    def apply_spot(self, recs: list[dict[str, Any]]) -> None:
        for rec in recs:
            if rec["kind"] != SPOT_KIND:
                continue
            cur, new = rec.get("current") or {}, rec.get("proposed") or {}
            share = _share(new.get("spot_share"))
            if share is None and new.get("pricing") == "spot":
                share = 1.0
            if share is None:
                continue
            model = new.get("gpu_model") or cur.get("gpu_model")
            pools = [p for p in self.pools.values() if p.team == (rec.get("team") or "unattributed")
                     and p.provider == (_provider(rec) or "unknown") and (model is None or p.gpu_model == model)]
            count = _int(new.get("gpu_count")) if new.get("gpu_count") is not None else _int(cur.get("gpu_count"))
            for pool in pools:
                if count is None or len(pools) > 1:  # a team-wide finding: the share of the pool
                    pool.spot_gpus, pool.spot_delta = round(share * pool.gpus), 0.0
                else:  # one workload's GPUs: move its share, leave the rest of the pool as it is
                    old_share = _share(cur.get("spot_share"))
                    old_share = old_share if old_share is not None else (1.0 if cur.get("pricing") == "spot" else 0.0)
                    pool.spot_delta += share * count - old_share * count
                pool.note(rec)
                itype = new.get("instance_type")
                if itype and itype not in pool.spot_instance_types:
                    pool.spot_instance_types.append(itype)

    def finish(self) -> list[Pool]:
        for pool in self.pools.values():
            pool.gpus = max(pool.gpus, 0)
            pool.spot_gpus = min(max(round(pool.spot_gpus + pool.spot_delta), 0), pool.gpus)
        return sorted(self.pools.values(), key=lambda p: (p.team, p.provider, p.gpu_model))


def changes_size(rec: dict[str, Any]) -> bool:
    cur, new = rec.get("current") or {}, rec.get("proposed") or {}
    moved = "provider" in new and _provider(rec, new) != _provider(rec)
    return moved or any(key in new and new[key] != cur.get(key) for key in ("gpu_count", "gpu_model"))


def build(capacity: list[dict[str, Any]], recs: list[dict[str, Any]]) -> list[Pool]:
    """The recommended pools for every team the capacity rows or the (actionable) findings name."""
    planner = Planner()
    planner.add_capacity(capacity)
    planner.add_baseline_from(recs)
    planner.start()
    planner.apply_size(recs)
    planner.apply_spot(recs)
    return planner.finish()
