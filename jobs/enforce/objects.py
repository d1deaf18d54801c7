"""The budget quotas as objects a scheduler applies, in the formats `gpufinops export` already writes.

* **kueue**: per team and cluster a ``ResourceFlavor`` per flavor (named as ``export kueue`` names them, so
  the two merge) and the ``ClusterQueue`` ``gpufinops-<team>``: ``nominalQuota`` per flavor, spot first,
  ``borrowingLimit: 0`` (borrowing would spend money the budget does not have) and ``stopPolicy`` under
  ``hold`` / ``drain`` once the money is gone.
* **karpenter**: per team, GPU model and capacity on an EKS or AKS cluster the NodePool ``export karpenter``
  writes (on AKS after the ``AKSNodeClass`` it references), its ``spec.limits`` ``nvidia.com/gpu`` the quota rounded *down* to whole nodes of the smallest
  instance type (a limit rounded up would buy GPUs the money does not cover; the comment says so).
* **resourcequota**: a ``ResourceQuota`` ``gpufinops-budget`` (``requests.nvidia.com/gpu``) in each of the
  team's namespaces on the cluster, for clusters without Kueue (several namespaces share the quota).
* **skypilot**: per team a task override: ``resources.autostop`` (down when idle) and the budget's
  hourly money as ``envs.GPUFINOPS_MAX_HOURLY_COST`` (SkyPilot has no budget key of its own: an admin
  policy or a launch wrapper reads it).

Every object carries the budget's reason in the annotation ``gpufinops.io/budget-reason`` and its comments.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpufinops.jobs.export import karpenter
from gpufinops.jobs.export.clusters import Cluster, ClusterMap
from gpufinops.jobs.export.inventory import Inventory
from gpufinops.jobs.export.kueue import API_VERSION as KUEUE_API
from gpufinops.jobs.export.kueue import GPU_MODEL_LABEL, MANAGED, TEAM_LABEL
from gpufinops.jobs.export.labels import CAPACITY_TYPE, GPU_RESOURCE, flavor_labels
from gpufinops.jobs.export.names import slug
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.models.budget_quota import ClusterQuota, TeamQuota

FORMATS = ("kueue", "karpenter", "resourcequota", "skypilot")
REASON = "gpufinops.io/budget-reason"
BUDGET_LABEL = "gpufinops.io/budget"
AUTOSTOP_IDLE_MINUTES = 10

Doc = tuple[dict[str, Any], list[str]]


@dataclass(frozen=True)
class Enforced:
    """One team's quotas under one budget, with the clusters they are for."""

    quota: TeamQuota
    clusters: dict[str, Cluster]  # cluster name -> cluster


def flavor_name(cluster: Cluster, gpu_model: str, capacity: str) -> str:
    """The ResourceFlavor name ``export kueue`` gives (provider-model[-capacity])."""
    return slug(f"{cluster.provider}-{gpu_model}" + ("" if capacity == "onprem" else f"-{capacity}"))


def _meta(name: str, cluster: Cluster, team: str, budget: str, reason: str, **extra: str) -> dict[str, Any]:
    labels = {**MANAGED, **cluster.labels(), TEAM_LABEL: slug(team), BUDGET_LABEL: slug(budget), **extra}
    return {"name": name, "labels": labels, "annotations": {**cluster.annotations(), REASON: reason}}


def kueue_documents(e: Enforced, cq: ClusterQuota, cluster: Cluster) -> list[Doc]:
    i = e.quota.inputs
    docs: list[Doc] = []
    flavors = []
    for fq in cq.flavors:
        f = fq.flavor
        name = flavor_name(cluster, f.gpu_model, f.capacity)
        labels = {"nodeLabels": flavor_labels(cluster.provider, f.gpu_model, f.capacity == "spot")}
        meta = _meta(name, cluster, i.team, i.budget_name, cq.reason, **{GPU_MODEL_LABEL: slug(f.gpu_model)})
        meta["labels"].pop(TEAM_LABEL)  # a flavor is the cluster's, shared by every team
        meta["labels"].pop(BUDGET_LABEL)
        meta["annotations"].pop(REASON)
        docs.append(({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": meta, "spec": labels}, []))
        flavors.append(
            {"name": name, "resources": [{"name": GPU_RESOURCE, "nominalQuota": fq.gpus, "borrowingLimit": 0}]}
        )
    spec: dict[str, Any] = {
        "cohortName": slug(f"gpufinops-{cluster.label}"),
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [GPU_RESOURCE], "flavors": flavors}],
    }
    if cq.stop_policy:
        spec["stopPolicy"] = cq.stop_policy
    queue = {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": _meta(slug(f"gpufinops-{i.team}"), cluster, i.team, i.budget_name, cq.reason),
        "spec": spec,
    }
    comments = [f"team {i.team}, {cq.reason}"] + [
        f"{fq.flavor.gpu_model} {fq.flavor.capacity}: {fq.gpus} GPU(s): {fq.reason}" for fq in cq.flavors
    ]
    return docs + [(queue, comments)]


def karpenter_documents(e: Enforced, cq: ClusterQuota, cluster: Cluster, inv: Inventory, node_class: str) -> list[Doc]:
    i = e.quota.inputs
    docs: list[Doc] = []
    provisioner = karpenter.provisioner(cluster.provider)
    if provisioner is None:
        return docs
    for fq in cq.flavors:
        f = fq.flavor
        types = inv.of_model(cluster.provider, f.gpu_model)
        if f.capacity not in ("spot", "on-demand") or not types:
            continue
        step = types[0].gpus
        limit = (fq.gpus // step) * step
        name = slug(f"gpufinops-{i.team}-{f.gpu_model}-{f.capacity}")
        labels = {TEAM_LABEL: slug(i.team), GPU_MODEL_LABEL: slug(f.gpu_model)}
        pool = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": _meta(name, cluster, i.team, i.budget_name, cq.reason),
            "spec": {
                "weight": 60 if f.capacity == "spot" else 30,
                "limits": {GPU_RESOURCE: limit},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeClassRef": {
                            "group": provisioner.node_class_group,
                            "kind": provisioner.node_class_kind,
                            "name": node_class,
                        },
                        "requirements": [
                            {"key": CAPACITY_TYPE, "operator": "In", "values": [f.capacity]},
                            {
                                "key": provisioner.instance_type_key,
                                "operator": "In",
                                "values": [t.name for t in types],
                            },
                        ],
                        "taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}],
                    },
                },
            },
        }
        comments = [f"team {i.team}, {f.gpu_model} {f.capacity}: quota {fq.gpus} GPU(s): {fq.reason}"]
        if limit != fq.gpus:
            comments.append(f"limit {limit}: {fq.gpus} rounded down to whole {types[0].name} nodes ({step} GPUs each)")
        docs.append((pool, comments))
    node_class_doc = karpenter.node_class_document(cluster, provisioner, node_class) if docs else None
    if node_class_doc is not None:
        docs.insert(0, (node_class_doc, [f"the {node_class_doc['kind']} the NodePools below reference"]))
    return docs


def resourcequota_documents(e: Enforced, cq: ClusterQuota, namespaces: list[str]) -> list[Doc]:
    i = e.quota.inputs
    docs: list[Doc] = []
    share, extra = divmod(cq.gpus, max(len(namespaces), 1))
    for n, namespace in enumerate(namespaces):
        gpus = share + (1 if n < extra else 0)
        meta = {
            "name": "gpufinops-budget",
            "namespace": namespace,
            "labels": {**MANAGED, TEAM_LABEL: slug(i.team), BUDGET_LABEL: slug(i.budget_name)},
            "annotations": {REASON: cq.reason},
        }
        doc = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": meta,
            "spec": {"hard": {f"requests.{GPU_RESOURCE}": str(gpus)}},
        }
        note = f"team {i.team} in {namespace}: {gpus} of its {cq.gpus} GPU(s) on this cluster"
        docs.append((doc, [note] + ([] if len(namespaces) == 1 else [f"{len(namespaces)} namespaces share it"])))
    return docs


def max_hourly_cost(e: Enforced) -> Decimal:
    """The money left per hour to the period's end (0 once it is gone)."""
    i = e.quota.inputs
    if i.hours_left <= 0:
        return Decimal(0)
    return max((i.amount - i.spent) / i.hours_left, Decimal(0)).quantize(Decimal("0.01"))


def skypilot_document(e: Enforced) -> Doc:
    i = e.quota.inputs
    hourly = max_hourly_cost(e)
    doc = {
        "name": slug(f"gpufinops-budget-{i.team}"),
        "resources": {"autostop": {"idle_minutes": AUTOSTOP_IDLE_MINUTES, "down": True}},
        "envs": {"GPUFINOPS_MAX_HOURLY_COST": f"{hourly}", "GPUFINOPS_BUDGET": i.budget_name},
    }
    comments = [
        f"team {i.team}: at most ${hourly}/hour to the period's end ({e.quota.clusters[0].reason if e.quota.clusters else ''})",
        "SkyPilot has no budget key: an admin policy or launch wrapper compares a launch's price with "
        "GPUFINOPS_MAX_HOURLY_COST; autostop tears idle clusters down",
    ]
    return doc, comments


def documents(
    fmt: str, e: Enforced, cmap: ClusterMap, inv: Inventory, settings: ExportSettings, only: str | None
) -> list[tuple[str, list[Doc], list[str]]]:
    """(cluster name, its documents, notes) for one enforced team in ``fmt``."""
    out = []
    for cq in e.quota.clusters:
        cluster = e.clusters[cq.cluster]
        if only is not None and not cluster.matches(only):
            continue
        notes: list[str] = []
        if fmt == "kueue":
            docs = kueue_documents(e, cq, cluster)
        elif fmt == "karpenter":
            docs = karpenter_documents(e, cq, cluster, inv, settings.node_class)
            if karpenter.provisioner(cluster.provider) is None:
                notes.append(f"{cluster.name} ({cluster.kind}): no NodePools, Karpenter provisions EKS and AKS only")
        elif fmt == "resourcequota":
            namespaces, _origin = cmap.team_namespaces(cluster, e.quota.inputs.team, settings.namespaces)
            docs = resourcequota_documents(e, cq, namespaces)
            if not namespaces:
                notes.append(
                    f"no namespace known for team {e.quota.inputs.team} on {cluster.name}: set [export] namespaces"
                )
        else:
            raise ValueError(f"unknown budget format {fmt!r} (known: {', '.join(FORMATS)})")
        out.append((cluster.name, docs, notes))
    return out
