"""``[export]``: how the scheduler exports map the fleet onto clusters and namespaces.

```toml
[export]
namespaces = {vision = "vision-prod", nlp = ["nlp-train", "nlp-serve"]}   # team -> namespace(s)
cluster_tag_keys = ["eks:cluster-name", "goog-k8s-cluster-name"]          # first tag that names a cluster
node_class = "gpu"                                                        # Karpenter EC2NodeClass
```

Every key is optional. ``namespaces`` is used for a team whose namespace the metrics do not name
(``namespace_teams`` of a metrics source); ``cluster_tag_keys`` replaces the default list below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpufinops.jobs.config_checks import ConfigError

# Tags (AWS) / labels (Google Cloud) that name the Kubernetes cluster a node belongs to, as the bills
# carry them: EKS managed node groups tag their instances `eks:cluster-name`, Karpenter's nodes
# `eks:eks-cluster-name`, AWS's split cost allocation data `aws:eks:cluster-name` (CUR 2.0 writes
# `aws_eks_cluster_name`); GKE labels its node VMs `goog-k8s-cluster-name`; `cluster` is a user's own.
DEFAULT_CLUSTER_TAG_KEYS = (
    "eks:cluster-name",
    "eks:eks-cluster-name",
    "aws:eks:cluster-name",
    "aws_eks_cluster_name",
    "goog-k8s-cluster-name",
    "cluster",
    "user:cluster",
    "user_cluster",
)
KEYS = ("namespaces", "cluster_tag_keys", "node_class")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class ExportSettings:
    namespaces: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_tag_keys: tuple[str, ...] = DEFAULT_CLUSTER_TAG_KEYS
    node_class: str = "default"


def _namespaces(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError('export.namespaces: must be a table of team = "namespace" (or a list of namespaces)')
    out = {}
    for team, names in value.items():
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not names:
            raise ConfigError(f"export.namespaces.{team}: must be a namespace or a non-empty list of namespaces")
        for name in names:
            if not isinstance(name, str) or len(name) > 63 or not DNS_LABEL.match(name):
                raise ConfigError(
                    f"export.namespaces.{team}: {name!r} is not a Kubernetes namespace name "
                    "(lower-case alphanumerics and '-', at most 63 characters)"
                )
        out[str(team)] = tuple(dict.fromkeys(names))
    return out


def parse(table: dict[str, Any] | None) -> ExportSettings:
    """The validated ``[export]`` table; raises ConfigError naming the key at fault."""
    table = table or {}
    if not isinstance(table, dict):
        raise ConfigError("export: must be a table")
    for key in table:
        if key not in KEYS:
            raise ConfigError(f"export.{key}: unknown key (allowed: {', '.join(KEYS)})")
    keys = table.get("cluster_tag_keys", list(DEFAULT_CLUSTER_TAG_KEYS))
    if not isinstance(keys, list) or not all(isinstance(k, str) and k and '"' not in k and "\\" not in k for k in keys):
        raise ConfigError("export.cluster_tag_keys: must be a list of tag keys (non-empty, without quotes)")
    node_class = table.get("node_class", "default")
    if not isinstance(node_class, str) or not DNS_LABEL.match(node_class):
        raise ConfigError(f"export.node_class: {node_class!r} is not an EC2NodeClass name")
    return ExportSettings(
        namespaces=_namespaces(table.get("namespaces", {})), cluster_tag_keys=tuple(keys), node_class=node_class
    )
