"""Which Kubernetes cluster each billed GPU resource belongs to, and what each cluster holds.

One Kueue serves one cluster, a Karpenter runs in one EKS cluster: the exports are built per cluster.

* **On-prem**: the cluster is the ``onprem`` source's ``cluster`` (the cost lines' ``SubAccountId``);
  its node groups (``x_InstanceType``), their GPU model, nodes and GPUs (distinct ``ResourceName`` slots,
  one per configured GPU) are its capacity.
* **Cloud**: the cluster a resource's tags name (the first of ``[export] cluster_tag_keys`` it carries:
  ``eks:cluster-name``, ``goog-k8s-cluster-name``…), else one cluster per provider, region and account
  (``aws/us-east-1/<account id>``, ``gcp/<region>/<project>``): a region's GPUs of one account are the
  capacity one scheduler can place work on. A tag's name that two regions or accounts share is made
  unique by appending where it runs.
* A repatriation moves a resource's work to the on-prem cluster it names (``proposed.cluster``).

Every exported Kubernetes object carries the label ``gpufinops.io/cluster`` (the cluster's name as a
label value), ``gpufinops.io/provider`` and the annotation ``gpufinops.io/cluster-name`` (the name as
written), so that a multi-cluster file can be split (``kubectl apply -l gpufinops.io/cluster=…``)
and checked mechanically.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from gpufinops.jobs.export.names import slug
from gpufinops.kernel import providers
from gpufinops.models.recommendation import provider_code

CLUSTER_LABEL = "gpufinops.io/cluster"
PROVIDER_LABEL = "gpufinops.io/provider"
CLUSTER_NAME_ANNOTATION = "gpufinops.io/cluster-name"


@dataclass(frozen=True)
class NodeGroup:
    name: str
    gpu_model: str
    nodes: int
    gpus: int
    gpus_per_node: int


@dataclass
class Cluster:
    provider: str  # aws | gcp | onprem | another provider code
    name: str  # as the comments and --cluster say it
    region: str | None = None
    account: str | None = None
    named_by: str = "default"  # "tag <key>" | "default" | "onprem source"
    label: str = ""  # the name as a Kubernetes label value (unique in the export)
    node_groups: list[NodeGroup] = field(default_factory=list)

    @property
    def kind(self) -> str:
        spec = providers.spec(self.provider)  # its spec's cluster_kind (EKS, GKE, AKS)
        return spec.cluster_kind if spec is not None else self.provider

    def capacity(self, gpu_model: str) -> int | None:
        """On-prem: the GPUs of the node groups of ``gpu_model``; clouds: None (what the plan provisions)."""
        if self.provider != "onprem":
            return None
        return sum(g.gpus for g in self.node_groups if g.gpu_model == gpu_model)

    def max_gpus_per_node(self, gpu_model: str) -> int:
        return max((g.gpus_per_node for g in self.node_groups if g.gpu_model == gpu_model), default=0)

    def labels(self) -> dict[str, str]:
        return {CLUSTER_LABEL: self.label, PROVIDER_LABEL: self.provider}

    def annotations(self) -> dict[str, str]:
        return {CLUSTER_NAME_ANNOTATION: self.name}

    def matches(self, wanted: str) -> bool:
        return wanted in (self.name, self.label)


def _label(name: str, taken: set[str]) -> str:
    value = slug(name, "cluster")
    if value in taken:
        value = slug(f"{value[:54]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}")
    taken.add(value)
    return value


class ClusterMap:
    """Resources → clusters, on-prem capacity, and the namespaces each team's GPU work runs in."""

    def __init__(self, resources: list[dict], node_groups: list[dict], namespaces: list[dict]) -> None:
        self.clusters: dict[tuple, Cluster] = {}
        self.of_resource: dict[str, Cluster] = {}
        identities: dict[str, tuple] = {}
        for row in resources:
            identities[row["resource_id"]] = self._identity(row)
        for group in node_groups:
            cluster = self._cluster(
                ("onprem", group["cluster"]), "onprem", group["cluster"], None, group["cluster"], "onprem source"
            )
            cluster.node_groups.append(
                NodeGroup(
                    group["node_group"],
                    group["gpu_model"],
                    int(group["nodes"]),
                    int(group["gpus"]),
                    int(group["gpus_per_node"]),
                )
            )
        by_name: dict[str, set[tuple]] = defaultdict(set)
        for key, _provider, name, *_rest in identities.values():
            by_name[name].add(key)
        for resource_id, (key, provider, name, region, account, named_by) in identities.items():
            if len(by_name[name]) > 1 and provider != "onprem":
                name = f"{name} ({provider}/{region}/{account})"
            self.of_resource[resource_id] = self._cluster(key, provider, name, region, account, named_by)
        taken: set[str] = set()
        for cluster in sorted(self.clusters.values(), key=lambda c: c.name):
            cluster.label = _label(cluster.name, taken)
        self.namespaces: dict[tuple[str, str], set[str]] = defaultdict(set)
        for row in namespaces:
            owner = self.of_resource.get(row["resource_id"])
            if owner is not None and row["team"] and row["namespace"]:
                self.namespaces[(owner.label, row["team"])].add(row["namespace"])

    @staticmethod
    def _identity(row: dict) -> tuple:
        provider = provider_code(row["provider_name"]) or str(row["provider_name"] or "unknown").lower()
        region, account = row.get("region"), row.get("account")
        if provider == "onprem":
            return ("onprem", account), provider, account or "onprem", region, account, "onprem source"
        if row.get("cluster_tag"):
            name = row["cluster_tag"]
            return (provider, region, account, name), provider, name, region, account, "tag"
        name = f"{provider}/{region or 'unknown-region'}/{account or 'unknown-account'}"
        return (provider, region, account, None), provider, name, region, account, "default"

    def _cluster(
        self, key: tuple, provider: str, name: str, region: str | None, account: str | None, named_by: str
    ) -> Cluster:
        if key not in self.clusters:
            self.clusters[key] = Cluster(provider, name, region, account, named_by)
        return self.clusters[key]

    def onprem(self, name: str | None) -> Cluster | None:
        return self.clusters.get(("onprem", name)) if name else None

    def all(self) -> list[Cluster]:
        return sorted(self.clusters.values(), key=lambda c: (c.provider, c.name))

    def team_namespaces(
        self, cluster: Cluster, team: str, configured: dict[str, tuple[str, ...]]
    ) -> tuple[list[str], str]:
        """The namespaces a team's LocalQueues go in on ``cluster`` and where they come from."""
        seen = sorted(self.namespaces.get((cluster.label, team), ()))
        if seen:
            return seen, "namespace_teams of the metrics"
        if team in configured:
            return list(configured[team]), "[export] namespaces"
        return [], ""
