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
from dataclasses import dataclass
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, ConfigSection
from gpufinops.kernel import providers
from gpufinops.kernel.options import Section, option

# Tags / labels that name the Kubernetes cluster a node belongs to, as the bills carry them: each provider
# spec's `cluster_tag_keys` (kernel/providers.py: EKS's, GKE's, AKS's), then a user's own `cluster` tag.
USER_CLUSTER_TAG_KEYS = ("cluster", "user:cluster", "user_cluster")


def default_cluster_tag_keys() -> tuple[str, ...]:
    """The registered providers' cluster tag keys, in registration order, then the user's own."""
    keys = [key for spec in providers.registered() for key in spec.cluster_tag_keys]
    return tuple(dict.fromkeys([*keys, *USER_CLUSTER_TAG_KEYS]))


DEFAULT_CLUSTER_TAG_KEYS = default_cluster_tag_keys()  # the built-in providers' (the docs' default)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _namespaces(value: Any, key: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(f'{key}: must be a table of team = "namespace" (or a list of namespaces)')
    out = {}
    for team, names in value.items():
        names = [names] if isinstance(names, str) else names
        if not isinstance(names, list) or not names:
            raise ConfigError(f"{key}.{team}: must be a namespace or a non-empty list of namespaces")
        for name in names:
            if not isinstance(name, str) or len(name) > 63 or not DNS_LABEL.match(name):
                raise ConfigError(
                    f"{key}.{team}: {name!r} is not a Kubernetes namespace name "
                    "(lower-case alphanumerics and '-', at most 63 characters)"
                )
        out[str(team)] = tuple(dict.fromkeys(names))
    return out


def _tag_keys(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(k, str) and k and '"' not in k and "\\" not in k for k in value
    ):
        raise ConfigError(f"{key}: must be a list of tag keys (non-empty, without quotes)")
    return tuple(value)


def _node_class(value: Any, key: str) -> str:
    if not isinstance(value, str) or not DNS_LABEL.match(value):
        raise ConfigError(f"{key}: {value!r} is not a NodeClass name")
    return value


@dataclass(frozen=True)
class ExportSettings(ConfigSection):
    """``[export]``: how the scheduler exports map the fleet onto clusters and namespaces."""

    namespaces: dict[str, tuple[str, ...]] = option(
        {}, "team = namespace (or a list of them), where the metrics name none", check=_namespaces
    )
    cluster_tag_keys: tuple[str, ...] = option(
        DEFAULT_CLUSTER_TAG_KEYS, "the tags that name a node's cluster, the first found wins", check=_tag_keys
    )
    node_class: str = option(
        "default", "the Karpenter NodeClass of the NodePools (EKS: EC2NodeClass; AKS: AKSNodeClass)", check=_node_class
    )


def parse(table: dict[str, Any] | None) -> ExportSettings:
    """The validated ``[export]`` table; raises ConfigError naming the key at fault."""
    return ExportSettings.parse(table or {}, "export")


SECTION = Section("export", parse, (ExportSettings,))
