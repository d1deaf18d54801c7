"""A dummy provider declared in this one module: ``tests/test_provider_specs.py`` registers it and shows every
reader of a provider's facts (prices, inventory, exports, carbon, labels) taking it from its spec alone."""

from __future__ import annotations

from pathlib import Path

from gpufinops.kernel.provider_spec import Karpenter, NodeLabels, ProviderSpec, SkyPilot

ZETA = ProviderSpec(
    code="zeta",
    name="Zeta Cloud (a test's provider)",
    label="Zeta",
    needles=("zeta",),
    cloud=True,
    price_sources="the zeta_prices source (a test's)",
    inventory=Path(__file__).parent / "data" / "dummy_provider" / "inventory.csv",
    cluster_tag_keys=("zeta:cluster",),
    cluster_kind="ZKS",
    node_labels=NodeLabels(
        spot={"zeta.example/capacity": "spot"},
        on_demand={"zeta.example/capacity": "standard"},
        gpu=lambda model: {"zeta.example/gpu": model.lower()},
    ),
    skypilot=SkyPilot(cloud="zeta", family_names={"z1.h100x2": "H100-Z"}),
    karpenter=Karpenter(
        instance_type_key="zeta.example/instance-type",
        node_class_group="zeta.example",
        node_class_version="v1",
        node_class_kind="ZetaNodeClass",
        node_class_spec={"image": "gpu"},
    ),
    pue=(1.23, "Zeta's published PUE (a test's)"),
    storage=None,
)
