"""Karpenter NodePools (karpenter.sh/v1) for the AWS GPU pools of the plan.

Per team, GPU model and capacity type one NodePool: a ``karpenter.sh/capacity-type`` requirement,
the recommended instance types (``node.kubernetes.io/instance-type``; the GPU name when none is
known), an ``nvidia.com/gpu`` limit carrying the recommended split, and a weight that makes
Karpenter try the team's spot pool first and fall back to on-demand once the spot limit is reached.
Nodes carry ``gpufinops.io/team`` and an ``nvidia.com/gpu`` NoSchedule taint, so only the team's
GPU pods (selecting that label, tolerating the taint) land there. Karpenter provisions AWS here;
other providers' pools are listed in a comment and skipped.
"""

from __future__ import annotations

from typing import Any

from jobs.export.labels import CAPACITY_TYPE, GPU_RESOURCE, aws_gpu_name
from jobs.export.plan import Pool, slug

API_VERSION = "karpenter.sh/v1"
SPOT_WEIGHT, ON_DEMAND_WEIGHT = 60, 30
NODE_CLASS = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def node_pool(pool: Pool, spot: bool, gpus: int, node_class: dict[str, str]) -> dict[str, Any]:
    capacity = "spot" if spot else "on-demand"
    instance_types = (pool.spot_instance_types + [t for t in pool.instance_types if t not in pool.spot_instance_types]
                      if spot else pool.instance_types)
    requirements: list[dict[str, Any]] = [{"key": CAPACITY_TYPE, "operator": "In", "values": [capacity]}]
    if instance_types:
        requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": instance_types})
    else:
        requirements.append({"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In",
                             "values": [aws_gpu_name(pool.gpu_model)]})
    labels = {"gpufinops.io/team": slug(pool.team), "gpufinops.io/gpu-model": slug(pool.gpu_model)}
    return {"apiVersion": API_VERSION, "kind": "NodePool",
            "metadata": {"name": slug(f"gpufinops-{pool.team}-{pool.gpu_model}-{capacity}"),
                         "labels": {"app.kubernetes.io/managed-by": "gpufinops"}},
            "spec": {"weight": SPOT_WEIGHT if spot else ON_DEMAND_WEIGHT,
                     "limits": {GPU_RESOURCE: gpus},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"nodeClassRef": dict(node_class), "requirements": requirements,
                                           "taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]}}}}


def documents(pools: list[Pool], node_class: dict[str, str] | None = None) -> list[tuple[dict[str, Any], list[str]]]:
    node_class = node_class or NODE_CLASS
    docs: list[tuple[dict[str, Any], list[str]]] = []
    skipped = [p for p in pools if p.provider != "aws"]
    for pool in pools:
        if pool.provider != "aws":
            continue
        ids = ", ".join(pool.recommendation_ids) or "none (today as is)"
        for spot, gpus in ((True, pool.spot_gpus), (False, pool.on_demand_gpus)):
            if gpus <= 0:
                continue
            docs.append((node_pool(pool, spot, gpus, node_class),
                         [f"team {pool.team}: {gpus} {pool.gpu_model} GPUs {'spot' if spot else 'on-demand'} "
                          f"(today {pool.current_gpus}, {pool.current_spot_gpus} spot); from recommendations: {ids}"]))
    if skipped and docs:
        first, notes = docs[0]
        docs[0] = (first, [f"not AWS, no NodePool: {', '.join(f'{p.team}/{p.provider}/{p.gpu_model}' for p in skipped)}"] + notes)
    return docs
