"""Karpenter NodePools (karpenter.sh/v1) for the GPU pools of each cluster a Karpenter provider provisions: EKS
(Karpenter's AWS provider) and AKS (node auto-provisioning, Karpenter's Azure provider), from the provider spec's
``karpenter`` fact (kernel/providers.py): the requirement naming the instance types
(``node.kubernetes.io/instance-type`` on EKS, ``karpenter.azure.com/sku-name`` on AKS) and the NodeClass the
NodePools reference (an ``EC2NodeClass`` of the user's; an ``AKSNodeClass`` written first, every field defaulted).

Per team, GPU model and capacity type one NodePool: a ``karpenter.sh/capacity-type`` requirement,
the plan's instance types (``node.kubernetes.io/instance-type``: every type the team's resources of that
GPU model run on once the plan is applied, known to the shipped inventory; its whole-GPU types of the
model when none is), an ``nvidia.com/gpu`` limit carrying the plan's split, and a weight that makes
Karpenter try the team's spot pool first and fall back to on-demand once the spot limit is reached.

A limit Karpenter can never reach is no limit: Karpenter only launches a node whose GPUs fit in what is
left of it, so every limit is a whole number of the smallest listed type's GPUs (the plan's GPUs rounded
up, and the comment says so). Nodes carry ``gpufinops.io/team`` and an ``nvidia.com/gpu`` NoSchedule
taint, so only the team's GPU pods (selecting that label, tolerating the taint) land there. GKE and
on-prem clusters get no NodePool: no Karpenter provider provisions their nodes.
"""

from __future__ import annotations

import math
from typing import Any

from gpufinops.jobs.export.clusters import Cluster
from gpufinops.jobs.export.inventory import Inventory
from gpufinops.jobs.export.labels import CAPACITY_TYPE, GPU_RESOURCE
from gpufinops.jobs.export.names import UniqueNames, slug
from gpufinops.jobs.export.plan import FleetPlan, Pool
from gpufinops.kernel import providers
from gpufinops.kernel.provider_spec import Karpenter

API_VERSION = "karpenter.sh/v1"
SPOT_WEIGHT, ON_DEMAND_WEIGHT = 60, 30


def provisioner(provider: str | None) -> Karpenter | None:
    """How Karpenter provisions a provider's nodes (its spec's ``karpenter`` fact), or None."""
    spec = providers.spec(provider)
    return spec.karpenter if spec is not None else None


def instance_types(
    pool: Pool, capacity: str, inventory: Inventory, provider: str = "aws"
) -> tuple[list[tuple[str, int]], str]:
    """(type, GPUs) the NodePool may launch, fewest GPUs first, and where the list comes from."""

    def known(names: list[str]) -> list[tuple[str, int]]:
        found = [
            (n, t.gpus)
            for n in names
            if (t := inventory.get(provider, n)) is not None and t.gpu_model == pool.gpu_model
        ]
        return sorted(found, key=lambda nt: (nt[1], nt[0]))

    for names, origin in ((pool.types_for(capacity), "the plan"), (list(pool.instance_types), "the plan")):
        if found := known(names):
            return found, origin
    fallback = [(t.name, t.gpus) for t in inventory.of_model(provider, pool.gpu_model)]
    return fallback, "the inventory (the plan names no known type)"


def node_class_document(cluster: Cluster, karpenter: Karpenter, name: str) -> dict[str, Any] | None:
    """The NodeClass the cluster's NodePools reference, where the provider's is written (AKS), else None."""
    if karpenter.node_class_spec is None:
        return None
    return {
        "apiVersion": f"{karpenter.node_class_group}/{karpenter.node_class_version}",
        "kind": karpenter.node_class_kind,
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "gpufinops", **cluster.labels()},
            "annotations": cluster.annotations(),
        },
        "spec": dict(karpenter.node_class_spec),
    }


def node_pool(
    cluster: Cluster, pool: Pool, name: str, capacity: str, limit: int, types: list[str], node_class: str
) -> dict[str, Any]:
    karpenter = provisioner(cluster.provider) or provisioner("aws")
    assert karpenter is not None  # the AWS provider declares one
    labels = {"gpufinops.io/team": slug(pool.team), "gpufinops.io/gpu-model": slug(pool.gpu_model)}
    requirements = [
        {"key": CAPACITY_TYPE, "operator": "In", "values": [capacity]},
        {"key": karpenter.instance_type_key, "operator": "In", "values": types},
    ]
    node_class_ref = {"group": karpenter.node_class_group, "kind": karpenter.node_class_kind, "name": node_class}
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
                    "nodeClassRef": node_class_ref,
                    "requirements": requirements,
                    "taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}],
                },
            },
        },
    }


def cluster_documents(
    cluster: Cluster, fleet: FleetPlan, inventory: Inventory, node_class: str
) -> tuple[list[tuple[dict[str, Any], list[str]]], list[str]]:
    """One EKS or AKS cluster's NodePools (after the NodeClass they reference, where it is written), and the notes
    on what it leaves out."""
    docs: list[tuple[dict[str, Any], list[str]]] = []
    notes: list[str] = []
    names = UniqueNames()
    karpenter = provisioner(cluster.provider)
    kind = providers.spec(cluster.provider)
    label = kind.label if kind is not None else cluster.provider
    for pool in (p for p in fleet.of_cluster(cluster) if p.gpus > 0):
        if pool.team is None:
            notes.append(f"no team, no NodePool: {pool.gpus} {pool.gpu_model} GPUs (resources without a team)")
            continue
        ids = ", ".join(sorted({i for plan in pool.plans for i in plan.ids})) or "none (today as is)"
        for capacity, gpus in (("spot", pool.spot_gpus), ("on-demand", pool.on_demand_gpus)):
            if gpus <= 0:
                continue
            types, origin = instance_types(pool, capacity, inventory, cluster.provider)
            if not types:
                notes.append(
                    f"team {pool.team}: no {label} instance type carries {pool.gpu_model}: no NodePool for "
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
    node_class_doc = node_class_document(cluster, karpenter, node_class) if karpenter and docs else None
    if node_class_doc is not None:
        note = [f"the {node_class_doc['kind']} the NodePools below reference (every field the CRD's default)"]
        docs.insert(0, (node_class_doc, note))
    return docs, notes
