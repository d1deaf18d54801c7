"""The providers (aws, gcp, azure, oci, onprem): one declaration each, ``ProviderSpec``, holding every fact
the product knows of a provider, and the one mapping from a bill's ProviderName to their codes.

A FOCUS ``ProviderName`` is a display name ("Amazon Web Services", "AWS", "Google Cloud", "Microsoft",
"Oracle", "onprem"); catalogues, recommendations and exports use the short code. ``provider_code`` maps a
name in Python, ``provider_sql`` in SQL, both from the specs' ``needles`` (the first needle the lower-cased
name contains decides, in registration order; a name none contains is its own code, lower-cased). A source
spec's ``provider`` fact (ingest/core/registry.py) is one of ``PROVIDERS``.

The readers (price hints, the GPU inventory, the carbon PUE, the scheduler exports' node labels, SkyPilot's
cloud, Karpenter's NodePools, the cluster tags, the display labels) iterate ``registered()`` and read a spec's facts; none names a
provider (docs/architecture.md, *Add a provider*). The built-in declarations are
``BUILTIN_PROVIDERS`` (below); ``registered_for_test`` adds one for a test and takes it away after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

from gpufinops.kernel import node_labels as nl
from gpufinops.kernel import storage_facts
from gpufinops.kernel.provider_spec import Karpenter, NodeLabels, ProviderSpec, SkyPilot

DATA = Path(__file__).parents[1] / "warehouse" / "data"  # the vendored files stay with the store's data


BUILTIN_PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        code="aws",
        name="Amazon Web Services",
        label="AWS",
        needles=("amazon", "aws"),
        cloud=True,
        price_sources="the aws_pricing source (on-demand), aws_spot_prices (spot); commitments: the fleet's own RI/SP lines",
        inventory=DATA / "gpu_instance_types.csv",
        # EKS managed node groups tag `eks:cluster-name`, Karpenter's nodes `eks:eks-cluster-name`, split cost
        # allocation data `aws:eks:cluster-name` (CUR 2.0 writes `aws_eks_cluster_name`)
        cluster_tag_keys=("eks:cluster-name", "eks:eks-cluster-name", "aws:eks:cluster-name", "aws_eks_cluster_name"),
        cluster_kind="EKS",
        node_labels=NodeLabels(
            spot={nl.CAPACITY_TYPE: "spot"}, on_demand={nl.CAPACITY_TYPE: "on-demand"}, gpu=nl.karpenter_aws_gpu
        ),
        skypilot=SkyPilot(cloud="aws", family_names={"g5g.": "T4g"}),
        karpenter=Karpenter(
            instance_type_key="node.kubernetes.io/instance-type",
            node_class_group="karpenter.k8s.aws",
            node_class_version="v1",
            node_class_kind="EC2NodeClass",
            node_class_spec=None,  # the cluster's own: its IAM role, subnets and security groups
        ),
        pue=(1.15, "AWS global PUE 2024 (aws.amazon.com/sustainability/data-centers)"),
        storage=storage_facts.AWS,
    ),
    ProviderSpec(
        code="gcp",
        name="Google Cloud",
        label="GCP",
        needles=("google", "gcp"),
        cloud=True,
        price_sources="the gcp_catalog source (on-demand, Spot, CUD) or gcp_price_history",
        inventory=DATA / "gpu_instance_types.csv",
        cluster_tag_keys=("goog-k8s-cluster-name",),  # GKE labels its node VMs with it
        cluster_kind="GKE",
        node_labels=NodeLabels(
            spot={"cloud.google.com/gke-spot": "true"},
            on_demand={"cloud.google.com/gke-provisioning": "standard"},
            gpu=nl.gke_gpu,
        ),
        skypilot=SkyPilot(cloud="gcp", family_names={"a3-megagpu-": "H100-MEGA", "g4-standard-": "RTXPRO6000"}),
        karpenter=None,
        pue=(1.09, "Google fleet trailing-twelve-month PUE 2024 (google.com/about/datacenters/efficiency)"),
        storage=storage_facts.GCP,
    ),
    ProviderSpec(
        code="azure",
        name="Microsoft Azure",
        label="Azure",
        needles=("microsoft", "azure"),
        cloud=True,
        price_sources="the azure_prices source (on-demand, Spot, Reservation, savings plan)",
        inventory=DATA / "azure_gpu_sizes.csv",
        cluster_tag_keys=("aks-managed-cluster-name",),  # AKS tags the node pools' scale sets with it
        cluster_kind="AKS",
        # AKS Spot pools carry the label (and the taint) kubernetes.azure.com/scalesetpriority=spot; regular
        # pools carry none, and the taint keeps the on-demand flavor's pods off Spot nodes
        node_labels=NodeLabels(spot={nl.AKS_SPOT: "spot"}, on_demand={}, gpu=nl.gfd_gpu),
        skypilot=SkyPilot(cloud="azure", family_names={}),
        # AKS node auto-provisioning (Azure/karpenter-provider-azure): a NodePool selects VM sizes by
        # karpenter.azure.com/sku-name and references an AKSNodeClass (karpenter.azure.com/v1beta1, every field
        # defaulted; the image family written is the CRD's default, so applying it over NAP's own changes nothing)
        karpenter=Karpenter(
            instance_type_key="karpenter.azure.com/sku-name",
            node_class_group="karpenter.azure.com",
            node_class_version="v1beta1",
            node_class_kind="AKSNodeClass",
            node_class_spec={"imageFamily": "Ubuntu"},
        ),
        pue=(1.18, "Microsoft worldwide operating PUE (datacenters.microsoft.com/sustainability/efficiency)"),
        storage=storage_facts.AZURE,
    ),
    ProviderSpec(
        code="oci",
        name="Oracle Cloud Infrastructure",
        label="OCI",
        needles=("oracle", "oci"),
        cloud=True,
        price_sources=None,
        inventory=None,
        cluster_tag_keys=(),
        cluster_kind="OKE",
        node_labels=NodeLabels(spot={nl.CAPACITY_TYPE: "spot"}, on_demand={}, gpu=nl.gfd_gpu),
        skypilot=None,
        karpenter=None,
        pue=None,
        storage=None,
    ),
    ProviderSpec(
        code="onprem",
        name="a private GPU cluster (the onprem source)",
        label="on-prem",
        needles=("onprem", "on-prem"),
        cloud=False,
        price_sources="the onprem source's node_groups prices",
        inventory=None,
        cluster_tag_keys=(),  # the onprem source names its cluster
        cluster_kind="on-prem Kubernetes",
        node_labels=NodeLabels(spot={nl.CAPACITY_TYPE: "spot"}, on_demand={}, gpu=nl.gfd_gpu),
        skypilot=SkyPilot(cloud="k8s", family_names={}),
        karpenter=None,
        pue=None,  # each onprem line carries its own
        storage=None,
    ),
)

_REGISTRY: dict[str, ProviderSpec] = {}
PROVIDERS: dict[str, str] = {}  # code -> what it names, kept in step with the registry


def register(spec: ProviderSpec) -> ProviderSpec:
    """Add a provider (a code already registered is refused: one declaration each)."""
    problem = spec_problem(spec)
    if problem:
        raise ValueError(f"provider spec {spec.code!r}: {problem}")
    _REGISTRY[spec.code] = spec
    PROVIDERS[spec.code] = spec.name
    return spec


def unregister(code: str) -> None:
    _REGISTRY.pop(code, None)
    PROVIDERS.pop(code, None)


@contextmanager
def registered_for_test(spec: ProviderSpec) -> Iterator[ProviderSpec]:
    """Register ``spec`` for the block, and take it away after (no state leaks between tests)."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.code)


def spec_problem(spec: ProviderSpec) -> str | None:
    """The first rule a declaration breaks, or None."""
    if spec.code in _REGISTRY:
        return "already registered"
    if not spec.code or spec.code != spec.code.lower() or not spec.code.isidentifier():
        return "its code is not a lower-case identifier"
    if not spec.needles or any(n != n.lower() or not n for n in spec.needles):
        return "its needles are not lower-case words"
    if spec.pue is not None and not 1.0 <= spec.pue[0] <= 3.0:
        return f"PUE {spec.pue[0]} is not in [1, 3]"
    if spec.inventory is not None and not spec.inventory.is_file():
        return f"inventory {spec.inventory} is not a file"
    return None


def registered() -> tuple[ProviderSpec, ...]:
    """The providers, in registration order."""
    return tuple(_REGISTRY.values())


def spec(code: str | None) -> ProviderSpec | None:
    """The spec of a provider code, or None for a code no provider declares."""
    return _REGISTRY.get(code or "")


def cloud_codes() -> tuple[str, ...]:
    """The public clouds' codes (priced on-demand, spot and committed)."""
    return tuple(s.code for s in registered() if s.cloud)


def fact_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(ProviderSpec))


def provider_code(provider_name: str | None) -> str | None:
    """FOCUS ProviderName → its provider code (a registered code | the name, lower-cased); None for no name."""
    if not provider_name:
        return None
    name = provider_name.lower()
    return next((code for needle, code in needles() if needle in name), name)


def needles() -> tuple[tuple[str, str], ...]:
    """(needle in the lower-cased ProviderName, code), in the order they are tried."""
    return tuple((needle, s.code) for s in registered() for needle in s.needles)


def provider_sql(lowered: str) -> str:
    """``provider_code`` as SQL, over a lower-cased ProviderName expression (an empty name stays empty)."""
    cases = " ".join(f"WHEN contains({lowered}, '{needle}') THEN '{code}'" for needle, code in needles())
    return f"CASE {cases} ELSE {lowered} END"


for _declared in BUILTIN_PROVIDERS:
    register(_declared)
CLOUD_PROVIDERS = cloud_codes()  # the built-in clouds at import (readers call cloud_codes(), which sees every one)
