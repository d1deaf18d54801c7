"""Kueue manifests (kueue.x-k8s.io/v1beta2): the recommended spot/on-demand GPU split as quotas.

One ``ResourceFlavor`` per (provider, GPU model, capacity type) a team needs, a ``ClusterQueue`` per
team whose ``nvidia.com/gpu`` ``nominalQuota`` per flavor is the plan's split (spot flavors listed
first, so Kueue admits onto spot until its quota is used, then on-demand), and a ``LocalQueue``
named ``gpu`` in the team's namespace (the team name as a Kubernetes name).
"""

from __future__ import annotations

from typing import Any

from jobs.export.labels import GPU_RESOURCE, flavor_labels
from jobs.export.plan import Pool, slug

API_VERSION = "kueue.x-k8s.io/v1beta2"
MANAGED = {"app.kubernetes.io/managed-by": "gpufinops"}


def flavor_name(pool: Pool, spot: bool) -> str:
    capacity = "spot" if spot else ("onprem" if pool.provider == "onprem" else "on-demand")
    return slug(f"{pool.provider}-{pool.gpu_model}-{capacity}")


def _flavors(pool: Pool) -> list[tuple[str, bool, int]]:
    """(flavor, spot?, quota) for a pool, spot first; a pool always keeps one flavor."""
    out = []
    if pool.spot_gpus:
        out.append((flavor_name(pool, True), True, pool.spot_gpus))
    if pool.on_demand_gpus or not out:
        out.append((flavor_name(pool, False), False, pool.on_demand_gpus))
    return out


def resource_flavor(pool: Pool, name: str, spot: bool) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": dict(MANAGED)},
            "spec": {"nodeLabels": flavor_labels(pool.provider, pool.gpu_model, spot)}}


def cluster_queue(team: str, pools: list[Pool]) -> dict[str, Any]:
    flavors = [{"name": name, "resources": [{"name": GPU_RESOURCE, "nominalQuota": quota}]}
               for pool in pools for name, _spot, quota in _flavors(pool)]
    flavors.sort(key=lambda f: not f["name"].endswith("-spot"))  # stable: spot flavors first
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": f"gpufinops-{slug(team)}", "labels": {**MANAGED, "gpufinops.io/team": slug(team)}},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": slug(team)}},
                     "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": [GPU_RESOURCE], "flavors": flavors}]}}


def local_queue(team: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": "gpu", "namespace": slug(team), "labels": dict(MANAGED)},
            "spec": {"clusterQueue": f"gpufinops-{slug(team)}"}}


def documents(pools: list[Pool]) -> list[tuple[dict[str, Any], list[str]]]:
    """Every manifest with the comment lines that say where its numbers come from."""
    docs: list[tuple[dict[str, Any], list[str]]] = []
    seen: set[str] = set()
    for pool in pools:
        for name, spot, _quota in _flavors(pool):
            if name not in seen:
                seen.add(name)
                docs.append((resource_flavor(pool, name, spot), [f"{pool.gpu_model} GPUs at {pool.provider}, "
                                                                  f"{'spot' if spot else 'on-demand'}"]))
    for team in sorted({p.team for p in pools}):
        mine = [p for p in pools if p.team == team]
        notes = [f"team {team}: {p.provider} {p.gpu_model}: {p.gpus} GPU{'s' if p.gpus != 1 else ''} ({p.spot_gpus} spot, "
                 f"{p.on_demand_gpus} on-demand); today {p.current_gpus} ({p.current_spot_gpus} spot)" for p in mine]
        ids = sorted({i for p in mine for i in p.recommendation_ids})
        notes.append(f"from recommendations: {', '.join(ids) if ids else 'none (today as is)'}")
        docs.append((cluster_queue(team, mine), notes))
        docs.append((local_queue(team), []))
    return docs
