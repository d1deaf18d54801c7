"""From the stored plans to GPUs per (cluster, team, GPU model): what the schedulers' formats carry.

Only each resource's plan is carried out (``models.plans``): its ``primary`` and ``step`` objects,
open or accepted; never an ``alternative`` (an exclusive option shown beside the plan), never a
conditional saving (packing other work onto spare GPUs), never a dismissed or applied finding.

A resource's plan is applied in order to where it runs today (its cluster, team, GPU model, GPUs and
spot share, from its cost lines), each object by its kind's export action (its spec's ``export``,
:data:`jobs.export.placement.ACTIONS`; a kind without one is refused, never skipped): a release ends it (0 GPUs); a
rightsize (gpu_count, gpu_type, quantization) sets its GPU model, count and instance type; spot_mix
sets its spot share; a repatriation moves it to the on-prem cluster and node group it names; a
commitment, an off-hours schedule or a storage change (the storage export's) changes no capacity. Each (cluster, team, GPU model) pool starts from its peak concurrent billed GPUs over the
last 14 days of cost data and moves by what the plans take out and put in.

Capacity: an on-prem pool's GPUs never exceed its cluster's node groups of that model (nodes × GPUs per
node); when the teams' pools together would (peaks at different hours, moves in), every team's share
is scaled down to fit, largest remainders first, and the manifest says so (GPUs billed to no team get
no quota and are left out of that sum). A cloud pool holds what the
plan provisions; on AWS its spot GPUs are whole nodes of its smallest instance type.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import polars as pl

from gpufinops.jobs.export.clusters import Cluster, ClusterMap
from gpufinops.jobs.export.inventory import Inventory
from gpufinops.jobs.export.placement import ACTIONS, Placement, action, apply, spot_share

__all__ = ["ACTIONS", "Placement", "action", "spot_share"]  # what a plan is applied with (jobs/export/placement.py)
from gpufinops.models import plans

ACTIONABLE = plans.OUTSTANDING  # what a total counts is what a scheduler carries out


def plan_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects an export carries out: primary and step objects, open or accepted, not conditional."""
    return [
        o
        for o in objects
        if o.get("status") in ACTIONABLE and plans.counted(o) and not (o.get("evidence") or {}).get("conditional")
    ]


@dataclass
class ResourcePlan:
    """One plan's objects (primary first) with the GPUs they act on before and after them: a resource's, or
    a workload's on a shared node (``workload_level``: the pod's whole GPUs, carried by the node's team)."""

    objects: list[dict[str, Any]]
    before: Placement
    after: Placement
    problem: str | None = None  # why it cannot be placed on a cluster
    workload_level: bool = False

    @property
    def plan_id(self) -> str:
        return self.objects[0].get("plan_id") or self.objects[0]["id"]

    @property
    def ids(self) -> list[str]:
        return [o["id"] for o in self.objects]

    @property
    def monthly_savings_usd(self) -> Decimal:
        return plans.total(self.objects)

    @property
    def resizes(self) -> bool:
        a, b = self.before, self.after
        return (
            a.cluster is not b.cluster
            or a.gpu_model != b.gpu_model
            or a.gpus != b.gpus
            or abs(a.spot_share - b.spot_share) > 1e-9
            or a.instance_type != b.instance_type
        )


def _today(row: dict[str, Any] | None, rec: dict[str, Any], clusters: ClusterMap) -> Placement:
    if row is not None:
        gpus = int(row["gpus"] or 0)
        return Placement(
            row["resource_id"],
            rec.get("team") or row["team"],
            clusters.of_resource[row["resource_id"]],
            row["gpu_model"],
            gpus,
            (row["spot_gpus"] or 0) / gpus if gpus else 0.0,
            row["instance_type"],
        )
    cur = rec.get("current") or {}
    return Placement(
        rec.get("resource_id"),
        rec.get("team"),
        None,
        cur.get("gpu_model"),
        int(cur.get("gpu_count") or 0),
        1.0 if cur.get("pricing") == "spot" else 0.0,
        cur.get("instance_type"),
    )


def workload_gpus(rec: dict[str, Any]) -> int | None:
    """The whole GPUs a pod-level finding acts on (``evidence.gpu_units`` without a MIG slice or a time-sliced
    share: those free no whole GPU), None for a node-level finding."""
    units = (rec.get("evidence") or {}).get("gpu_units")
    if not isinstance(units, list) or not units:
        return None
    return len({u for u in map(str, units) if ":" not in u and "@" not in u})


def _before(row: dict[str, Any] | None, rec: dict[str, Any], clusters: ClusterMap) -> Placement:
    """Where a plan starts: the resource as it runs today; for a pod-level plan only the pod's whole GPUs of
    it, in the pool of the team the node's GPUs are billed to (whose quota holds them)."""
    gpus = workload_gpus(rec)
    today = _today(row, rec, clusters)
    if gpus is None or row is None:
        return today
    return replace(today, team=row["team"], gpus=gpus)


def resource_plans(
    objects: list[dict[str, Any]], resources: dict[str, dict], clusters: ClusterMap
) -> list[ResourcePlan]:
    """Every plan among ``objects`` (already filtered by :func:`plan_objects`), largest saving first."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        grouped[obj.get("plan_id") or obj["id"]].append(obj)
    out = []
    for members in grouped.values():
        members.sort(
            key=lambda o: (
                o.get("plan") != "primary",
                len((o.get("evidence") or {}).get("priced_after") or ()),
                o["id"],
            )
        )
        first = members[0]
        before = _before(resources.get(first.get("resource_id") or ""), first, clusters)
        state, problem = before, None
        if before.cluster is None:
            problem = (
                f"resource {first.get('resource_id')} has no GPU cost lines in the window: its cluster is unknown"
                if first.get("resource_id")
                else "no resource: nothing to place on a cluster"
            )
        for obj in members:
            state, issue = apply(state, obj, clusters)
            problem = problem or issue
        out.append(ResourcePlan(members, before, state, problem, workload_gpus(first) is not None))
    return sorted(out, key=lambda p: (-p.monthly_savings_usd, p.plan_id))


@dataclass
class Pool:
    """GPUs of one model for one team (None: no team) on one cluster: today and as planned."""

    cluster: Cluster
    team: str | None
    gpu_model: str
    current_gpus: int = 0
    current_spot_gpus: int = 0
    delta_gpus: float = 0.0
    delta_spot_gpus: float = 0.0
    gpus: int = 0
    spot_gpus: int = 0
    capped_from: int | None = None  # the planned GPUs before the cluster's capacity cut them
    instance_types: dict[str, set[str]] = field(default_factory=dict)  # type -> {"spot", "on-demand"}
    plans: list[ResourcePlan] = field(default_factory=list)

    @property
    def on_demand_gpus(self) -> int:
        return self.gpus - self.spot_gpus

    def add_instance_type(self, name: str | None, share: float) -> None:
        if name:
            kinds = self.instance_types.setdefault(name, set())
            kinds.update(({"spot"} if share > 0 else set()) | ({"on-demand"} if share < 1 else set()))

    def types_for(self, capacity: str) -> list[str]:
        return sorted(t for t, kinds in self.instance_types.items() if capacity in kinds)


@dataclass
class FleetPlan:
    pools: list[Pool]
    plans: list[ResourcePlan]

    def of_cluster(self, cluster: Cluster) -> list[Pool]:
        return [p for p in self.pools if p.cluster is cluster]

    def plans_of(self, cluster: Cluster) -> list[ResourcePlan]:
        return [p for p in self.plans if cluster in (p.before.cluster, p.after.cluster)]

    def unplaced(self) -> list[ResourcePlan]:
        return [p for p in self.plans if p.problem]

    def scoped(self, team: str | None) -> FleetPlan:
        """One team's pools and plans, cut from the whole fleet's (so a team's on-prem quota is the same
        with or without ``--team``: the other teams' share of the cluster still counts)."""
        if team is None:
            return self
        return FleetPlan(
            [p for p in self.pools if p.team == team], [p for p in self.plans if p.objects[0].get("team") == team]
        )


class _Pools:
    def __init__(self) -> None:
        self.pools: dict[tuple, Pool] = {}

    def get(self, cluster: Cluster, team: str | None, gpu_model: str | None) -> Pool:
        key = (cluster.label, team, gpu_model or "unknown")
        if key not in self.pools:
            self.pools[key] = Pool(cluster, team, gpu_model or "unknown")
        return self.pools[key]


def _peaks(hours: pl.DataFrame, clusters: ClusterMap) -> pl.DataFrame:
    labels = {rid: c.label for rid, c in clusters.of_resource.items()}
    if hours.is_empty():
        return pl.DataFrame(
            schema={
                "cluster": pl.String,
                "team": pl.String,
                "gpu_model": pl.String,
                "gpus": pl.Int64,
                "spot_gpus": pl.Int64,
            }
        )
    return (
        hours.with_columns(pl.col("resource_id").replace_strict(labels, default=None).alias("cluster"))
        .filter(pl.col("cluster").is_not_null())
        .group_by("cluster", "team", "gpu_model", "hour")
        .agg(pl.col("gpus").sum(), pl.col("spot_gpus").sum())
        .group_by("cluster", "team", "gpu_model")
        .agg(pl.col("gpus").max(), pl.col("spot_gpus").max())
    )


def _step(pool: Pool, inventory: Inventory, capacity: str) -> int:
    """The GPUs of the smallest AWS instance type the pool's ``capacity`` runs on (1 elsewhere)."""
    if pool.cluster.provider != "aws":
        return 1
    sizes = [
        t.gpus
        for name in (pool.types_for(capacity) or list(pool.instance_types))
        if (t := inventory.get("aws", name)) is not None
    ]
    return min(sizes, default=1)


def _finish(pool: Pool, inventory: Inventory) -> None:
    pool.gpus = max(0, round(pool.current_gpus + pool.delta_gpus))
    spot = max(0.0, pool.current_spot_gpus + pool.delta_spot_gpus)
    step = _step(pool, inventory, "spot")
    pool.spot_gpus = min(pool.gpus, step * round(spot / step))


def _fit_onprem(pools: list[Pool]) -> None:
    """Scale the teams' pools of one on-prem (cluster, model) down to its GPUs, largest remainders first."""
    capacity = pools[0].cluster.capacity(pools[0].gpu_model) or 0
    planned = sum(p.gpus for p in pools)
    if planned <= capacity:
        return
    shares = [(p, p.gpus * capacity / planned) for p in pools]
    fitted = {id(p): math.floor(s) for p, s in shares}
    left = capacity - sum(fitted.values())
    for p, _share in sorted(shares, key=lambda ps: (-(ps[1] - math.floor(ps[1])), ps[0].team or "")):
        if left <= 0:
            break
        fitted[id(p)] += 1
        left -= 1
    for p in pools:
        p.capped_from, p.gpus = p.gpus, fitted[id(p)]
        p.spot_gpus = 0


def build(
    objects: list[dict[str, Any]],
    resources: list[dict],
    hours: pl.DataFrame,
    clusters: ClusterMap,
    inventory: Inventory,
) -> FleetPlan:
    """The planned pools of every cluster the cost lines or the plans name."""
    by_id = {r["resource_id"]: r for r in resources}
    planned = resource_plans(plan_objects(objects), by_id, clusters)
    pools = _Pools()
    by_label = {c.label: c for c in clusters.all()}
    for row in _peaks(hours, clusters).iter_rows(named=True):
        pool = pools.get(by_label[row["cluster"]], row["team"], row["gpu_model"])
        pool.current_gpus, pool.current_spot_gpus = int(row["gpus"]), int(row["spot_gpus"])
    final = {rid: _today(row, {}, clusters) for rid, row in by_id.items()}
    for plan in planned:
        a, b = plan.before, plan.after
        if plan.problem or a.cluster is None or b.cluster is None:  # no problem: both clusters are known
            continue
        old, new = pools.get(a.cluster, a.team, a.gpu_model), pools.get(b.cluster, b.team, b.gpu_model)
        old.delta_gpus -= a.gpus
        old.delta_spot_gpus -= a.gpus * a.spot_share
        new.delta_gpus += b.gpus
        new.delta_spot_gpus += b.gpus * b.spot_share
        for pool in {id(old): old, id(new): new}.values():
            pool.plans.append(plan)
        if a.resource_id and not plan.workload_level:  # a pod's release leaves the node's other GPUs running
            final[a.resource_id] = b
    for placement in final.values():
        if placement.cluster is not None and placement.gpus > 0:
            pools.get(placement.cluster, placement.team, placement.gpu_model).add_instance_type(
                placement.instance_type, placement.spot_share
            )
    for pool in pools.pools.values():
        _finish(pool, inventory)
    onprem: dict[tuple, list[Pool]] = defaultdict(list)
    for pool in pools.pools.values():
        if pool.cluster.provider == "onprem" and pool.team is not None:  # GPUs billed to no team get no quota
            onprem[(pool.cluster.label, pool.gpu_model)].append(pool)
    for group in onprem.values():
        _fit_onprem(group)
    ordered = sorted(pools.pools.values(), key=lambda p: (p.cluster.name, p.team or "", p.gpu_model))
    return FleetPlan(ordered, planned)
