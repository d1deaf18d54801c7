"""Karpenter NodePools (karpenter.sh/v1) for the GPU pools of each AWS-backed (EKS) cluster.

Per team, GPU model and capacity type one NodePool: a ``karpenter.sh/capacity-type`` requirement,
the plan's instance types (``node.kubernetes.io/instance-type``: every type the team's resources of that
GPU model run on once the plan is applied, known to the shipped inventory; its whole-GPU types of the
model when none is), an ``nvidia.com/gpu`` limit carrying the plan's split, and a weight that makes
Karpenter try the team's spot pool first and fall back to on-demand once the spot limit is reached.

A limit Karpenter can never reach is no limit: Karpenter only launches a node whose GPUs fit in what is
left of it, so every limit is a whole number of the smallest listed type's GPUs (the plan's GPUs rounded
up, and the comment says so). Nodes carry ``gpufinops.io/team`` and an ``nvidia.com/gpu`` NoSchedule
taint, so only the team's GPU pods (selecting that label, tolerating the taint) land there. GKE and
on-prem clusters get no NodePool: Karpenter provisions AWS capacity here.
"""

from __future__ import annotations

import math
from typing import Any

from gpufinops.jobs.export.clusters import Cluster
from gpufinops.jobs.export.inventory import Inventory
from gpufinops.jobs.export.labels import CAPACITY_TYPE, GPU_RESOURCE
from gpufinops.jobs.export.names import UniqueNames, slug
from gpufinops.jobs.export.plan import FleetPlan, Pool

API_VERSION = "karpenter.sh/v1"
SPOT_WEIGHT, ON_DEMAND_WEIGHT = 60, 30


def instance_types(pool: Pool, capacity: str, inventory: Inventory) -> tuple[list[tuple[str, int]], str]:
    """(type, GPUs) the NodePool may launch, fewest GPUs first, and where the list comes from."""

    def known(names: list[str]) -> list[tuple[str, int]]:
        found = [
            (n, t.gpus) for n in names if (t := inventory.get("aws", n)) is not None and t.gpu_model == pool.gpu_model
        ]
        return sorted(found, key=lambda nt: (nt[1], nt[0]))

    for names, origin in ((pool.types_for(capacity), "the plan"), (list(pool.instance_types), "the plan")):
        if found := known(names):
            return found, origin
    fallback = [(t.name, t.gpus) for t in inventory.of_model("aws", pool.gpu_model)]
    return fallback, "the inventory (the plan names no known type)"


def node_pool(
    cluster: Cluster, pool: Pool, name: str, capacity: str, limit: int, types: list[str], node_class: str
) -> dict[str, Any]:
    labels = {"gpufinops.io/team": slug(pool.team), "gpufinops.io/gpu-model": slug(pool.gpu_model)}
    requirements = [
        {"key": CAPACITY_TYPE, "operator": "In", "values": [capacity]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "NodePool",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "gpufinops", **cluster.labels()},
            "annotations": cluster.annotations(),
        },
        "spec": {
            "weight": SPOT_WEIGHT if capacity == "spot" else ON_DEMAND_WEIGHT,
            "limits": {GPU_RESOURCE: limit},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
                    "requirements": requirements,
                    "taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}],
                },
            },
        },
    }


def cluster_documents(
    cluster: Cluster, fleet: FleetPlan, inventory: Inventory, node_class: str
) -> tuple[list[tuple[dict[str, Any], list[str]]], list[str]]:
    """One EKS cluster's NodePools, and the notes on what it leaves out."""
    docs: list[tuple[dict[str, Any], list[str]]] = []
    notes: list[str] = []
    names = UniqueNames()
    for pool in (p for p in fleet.of_cluster(cluster) if p.gpus > 0):
        if pool.team is None:
            notes.append(f"no team, no NodePool: {pool.gpus} {pool.gpu_model} GPUs (resources without a team)")
            continue
        ids = ", ".join(sorted({i for plan in pool.plans for i in plan.ids})) or "none (today as is)"
        for capacity, gpus in (("spot", pool.spot_gpus), ("on-demand", pool.on_demand_gpus)):
            if gpus <= 0:
                continue
            types, origin = instance_types(pool, capacity, inventory)
            if not types:
                notes.append(
                    f"team {pool.team}: no AWS instance type carries {pool.gpu_model}: no NodePool for "
                    f"its {gpus} {capacity} GPUs"
                )
                continue
            step = types[0][1]
            limit = math.ceil(gpus / step) * step
            comment = [
                f"team {pool.team}: {gpus} {pool.gpu_model} GPU(s) {capacity} (today {pool.current_gpus}, "
                f"{pool.current_spot_gpus} spot); instance types from {origin}; from recommendations: {ids}"
            ]
            if limit != gpus:
                comment.append(f"limit {limit}: {gpus} rounded up to whole {types[0][0]} nodes ({step} GPUs each)")
            name = names(f"gpufinops-{pool.team}-{pool.gpu_model}-{capacity}")
            docs.append((node_pool(cluster, pool, name, capacity, limit, [t for t, _ in types], node_class), comment))
    return docs, notes
