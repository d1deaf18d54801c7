"""What one provider is: its spec, ``ProviderSpec``, holding every fact the product knows of it.

The declarations and the registry are in ``kernel/providers.py`` (docs/architecture.md, *Add a provider*);
the spec classes live here, apart from them, so a declaration imports nothing that imports it back. No fact
has a default: a spec missing one does not construct.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufinops.kernel.storage_facts import StorageFacts


@dataclass(frozen=True)
class NodeLabels:
    """The Kubernetes node labels of the provider's GPU nodes, as its schedulers' exports select them."""

    spot: Mapping[str, str]  # the labels a Spot / preemptible node carries
    on_demand: Mapping[str, str]  # the labels an on-demand node carries ({}: its taints keep spot work apart)
    gpu: Callable[[str], dict[str, str]]  # canonical GPU model -> the labels that select nodes of that GPU

    def flavor(self, gpu_model: str, spot: bool) -> dict[str, str]:
        return {**(self.spot if spot else self.on_demand), **self.gpu(gpu_model)}


@dataclass(frozen=True)
class SkyPilot:
    """How SkyPilot names the provider: its ``infra`` cloud (``k8s``: a Kubernetes cluster, where a task's
    GPUs must fit on one node) and the instance families it names by another accelerator than their GPU model
    (instance-type prefix -> SkyPilot accelerator name)."""

    cloud: str
    family_names: Mapping[str, str]


@dataclass(frozen=True)
class Karpenter:
    """How a Karpenter provider for this cloud provisions its nodes: the NodePool requirement that names the
    instance types, and the NodeClass the NodePools reference (its API group, version and kind); ``node_class_spec``
    is the NodeClass written beside the NodePools, None where it is the user's own (an EC2NodeClass needs the
    cluster's IAM role and subnets)."""

    instance_type_key: str
    node_class_group: str
    node_class_version: str
    node_class_kind: str
    node_class_spec: Mapping[str, Any] | None


@dataclass(frozen=True)
class ProviderSpec:
    """Every fact of one provider. No fact has a default: a declaration missing one does not construct."""

    code: str  # the short code the catalogues, recommendations and exports use
    name: str  # what the code names
    label: str  # its name on every surface (AWS, GCP, Azure, on-prem)
    needles: tuple[str, ...]  # lower-case words of a FOCUS ProviderName that mean this provider
    cloud: bool  # a public cloud: on-demand, spot and commitment prices
    price_sources: str | None  # the source types that price it, as a withheld finding names them
    inventory: Path | None  # its shipped GPU inventory (the columns of warehouse/data/gpu_instance_types.csv)
    cluster_tag_keys: tuple[str, ...]  # the tags / labels its bills carry naming a node's Kubernetes cluster
    cluster_kind: str  # what its Kubernetes clusters are called (EKS, GKE, AKS)
    node_labels: NodeLabels
    skypilot: SkyPilot | None  # None: SkyPilot has no catalogue for it
    karpenter: Karpenter | None  # None: no Karpenter provider provisions its nodes
    pue: tuple[float, str] | None  # its published fleet PUE and where it is published; None: lines carry their own
    storage: StorageFacts | None  # its disks', snapshots' and storage classes' bill meters; None: not examined
