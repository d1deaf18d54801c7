"""Kueue manifests (kueue.x-k8s.io/v1beta2), one configuration per Kubernetes cluster.

Per cluster: a ``ResourceFlavor`` per GPU model and capacity type the plan keeps there, labelled the
way that cluster's nodes are (EKS/Karpenter: ``karpenter.sh/capacity-type`` +
``karpenter.k8s.aws/instance-gpu-name``; GKE: ``cloud.google.com/gke-spot`` / ``gke-provisioning`` +
``gke-accelerator``; on-prem: NVIDIA GPU Feature Discovery's ``nvidia.com/gpu.product``); a
``ClusterQueue`` ``gpufinops-<team>`` per team whose ``nvidia.com/gpu`` ``nominalQuota`` per flavor is
the plan's split (spot flavors first: Kueue admits onto spot until its quota is used), all of a cluster's
queues in one cohort ``gpufinops-<cluster>`` so a team can borrow what another leaves idle; and a
``LocalQueue`` ``gpu`` in each namespace the data names for the team. A cluster's quotas never exceed
its capacity: on-prem its node groups' GPUs, in a cloud what the plan provisions.
"""

from __future__ import annotations

from typing import Any

from gpufinops.jobs.export.clusters import Cluster, ClusterMap
from gpufinops.jobs.export.labels import GPU_RESOURCE, flavor_labels
from gpufinops.jobs.export.names import UniqueNames, slug
from gpufinops.jobs.export.plan import FleetPlan, Pool
from gpufinops.jobs.export.settings import ExportSettings

API_VERSION = "kueue.x-k8s.io/v1beta2"
MANAGED = {"app.kubernetes.io/managed-by": "gpufinops"}
TEAM_LABEL = "gpufinops.io/team"
GPU_MODEL_LABEL = "gpufinops.io/gpu-model"


def _capacity(pool: Pool, spot: bool) -> str:
    return "spot" if spot else ("onprem" if pool.cluster.provider == "onprem" else "on-demand")


def _splits(pool: Pool) -> list[tuple[bool, int]]:
    """(spot?, GPUs) of a pool's non-empty parts, spot first."""
    return [(spot, gpus) for spot, gpus in ((True, pool.spot_gpus), (False, pool.on_demand_gpus)) if gpus > 0]


def _meta(name: str, cluster: Cluster, **extra: str) -> dict[str, Any]:
    return {"name": name, "labels": {**MANAGED, **cluster.labels(), **extra}, "annotations": cluster.annotations()}


def _gpus(n: int) -> str:
    return f"{n} GPU{'' if n == 1 else 's'}"


def _pool_note(pool: Pool) -> str:
    if pool.cluster.provider == "onprem":
        note = f"{pool.gpu_model}: {_gpus(pool.gpus)}; today {pool.current_gpus}"
    else:
        note = (
            f"{pool.gpu_model}: {_gpus(pool.gpus)} ({pool.spot_gpus} spot, {pool.on_demand_gpus} on-demand); "
            f"today {pool.current_gpus} ({pool.current_spot_gpus} spot)"
        )
    if pool.capped_from is not None:
        note += (
            f"; the plan asks {pool.capped_from}, cut to fit the cluster's "
            f"{pool.cluster.capacity(pool.gpu_model)} {pool.gpu_model} GPUs shared by every team"
        )
    return note


def _plans_note(pools: list[Pool]) -> str:
    plans = {p.plan_id: p for pool in pools for p in pool.plans}
    if not plans:
        return "no plan changes these GPUs: today's peak as is"
    return "plans: " + "; ".join(
        f"{', '.join(p.ids)} (${float(p.monthly_savings_usd):,.2f}/month)"
        for p in sorted(plans.values(), key=lambda p: p.plan_id)
    )


def cluster_documents(
    cluster: Cluster, fleet: FleetPlan, clusters: ClusterMap, settings: ExportSettings
) -> tuple[list[tuple[dict[str, Any], list[str]]], list[str]]:
    """One cluster's manifests, and the notes on what it leaves out (for the cluster's header)."""
    pools = [p for p in fleet.of_cluster(cluster) if p.gpus > 0]
    notes = [
        f"no team, in no ClusterQueue: {_gpus(p.gpus)} {p.gpu_model} (resources without a team)"
        for p in pools
        if p.team is None
    ]
    pools = [p for p in pools if p.team is not None]
    names = UniqueNames()
    flavors: dict[tuple[str, bool], str] = {}
    docs: list[tuple[dict[str, Any], list[str]]] = []
    for pool in pools:
        for spot, _gpus_in_part in _splits(pool):
            key = (pool.gpu_model, spot)
            if key in flavors:
                continue
            capacity = _capacity(pool, spot)
            flavors[key] = names(
                f"{cluster.provider}-{pool.gpu_model}" + ("" if capacity == "onprem" else f"-{capacity}")
            )
            flavor_spec = {"nodeLabels": flavor_labels(cluster.provider, pool.gpu_model, spot)}
            meta = _meta(flavors[key], cluster, **{GPU_MODEL_LABEL: slug(pool.gpu_model)})
            docs.append(
                (
                    {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": meta, "spec": flavor_spec},
                    [f"{pool.gpu_model} GPUs on {cluster.name}, {capacity}"],
                )
            )
    cohort = slug(f"gpufinops-{cluster.label}")
    local_names: set[tuple[str, str]] = set()
    locals_: list[tuple[dict[str, Any], list[str]]] = []
    for team in sorted({p.team for p in pools if p.team is not None}):  # the None team left above
        mine = [p for p in pools if p.team == team]
        queue = names(f"gpufinops-{team}")
        quotas = [(flavors[(p.gpu_model, spot)], gpus) for p in mine for spot, gpus in _splits(p)]
        quotas.sort(key=lambda q: not q[0].endswith("-spot"))  # stable: spot flavors first
        namespaces, origin = clusters.team_namespaces(cluster, team, settings.namespaces)
        spec: dict[str, Any] = {
            "cohortName": cohort,
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": [GPU_RESOURCE],
                    "flavors": [
                        {"name": f, "resources": [{"name": GPU_RESOURCE, "nominalQuota": q}]} for f, q in quotas
                    ],
                }
            ],
        }
        comments = [f"team {team}: " + _pool_note(p) for p in mine] + [_plans_note(mine)]
        if namespaces:
            spec["namespaceSelector"] = {
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]
            }
        else:
            comments.append(
                f"no LocalQueue and no namespace admitted: the data names no namespace for team {team} "
                f"(set namespace_teams on its metrics source, or [export] namespaces.{team})"
            )
        docs.append(
            (
                {
                    "apiVersion": API_VERSION,
                    "kind": "ClusterQueue",
                    "metadata": _meta(queue, cluster, **{TEAM_LABEL: slug(team)}),
                    "spec": spec,
                },
                comments,
            )
        )
        for namespace in namespaces:
            name = "gpu" if (namespace, "gpu") not in local_names else slug(f"gpu-{team}")
            local_names.add((namespace, name))
            meta = {**_meta(name, cluster, **{TEAM_LABEL: slug(team)}), "namespace": namespace}
            locals_.append(
                (
                    {
                        "apiVersion": API_VERSION,
                        "kind": "LocalQueue",
                        "metadata": meta,
                        "spec": {"clusterQueue": queue},
                    },
                    [f"team {team} in namespace {namespace} ({origin})"],
                )
            )
    return docs + locals_, notes


def capacity_notes(cluster: Cluster) -> list[str]:
    if cluster.provider != "onprem":
        return [f"capacity: what the plan provisions ({cluster.kind}, cluster named by {cluster.named_by})"]
    groups = ", ".join(f"{g.name} {g.nodes}×{g.gpus_per_node} {g.gpu_model} = {g.gpus}" for g in cluster.node_groups)
    return [f"capacity: {groups or 'no node groups in the cost lines'} (node groups of the onprem source)"]
