"""Azure through the exports and carbon, from its provider spec alone: SkyPilot ``infra: azure/<region>`` with a
shape Azure's inventory offers, Kueue flavors with AKS's Spot label, the AKS cluster tag, Microsoft's PUE."""

from __future__ import annotations

from gpufinops.derived import carbon_data
from gpufinops.jobs.export import clusters, inventory, labels, settings, skypilot
from gpufinops.jobs.export.placement import Placement


def _fleet() -> inventory.Inventory:
    from gpufinops.warehouse.reference import load_gpu_instance_types

    return inventory.Inventory.from_rows(
        [r for r in load_gpu_instance_types().to_pylist() if r["accelerator"] == "gpu"]
    )


def _placement(gpus: int, instance_type: str, model: str = "H100-SXM", spot: float = 0.0) -> Placement:
    cluster = clusters.Cluster(provider="azure", name="aks-gpu", region="eastus", label="aks-gpu")
    return Placement("vm", "research", cluster, model, gpus, spot_share=spot, instance_type=instance_type)


def test_skypilot_asks_azure_for_a_shape_its_sizes_offer():
    fleet = _fleet()
    # ND96isr_H100_v5 (8 SXM), and NCads H100 v5 (1, 2 NVL, which gpu_specs.csv folds into H100-PCIe)
    assert fleet.skypilot_shapes("azure")["H100"] == {1, 2, 8}
    doc, notes = skypilot.task(
        type("Plan", (), {"after": _placement(8, "Standard_ND96isr_H100_v5", spot=0.5)})(),
        fleet,
    )
    assert doc is not None and doc["resources"]["infra"] == "azure/eastus"
    assert (
        doc["resources"]["accelerators"] == "H100:8" and doc["resources"]["instance_type"] == "Standard_ND96isr_H100_v5"
    )
    assert doc["resources"]["use_spot"] is True
    shape, _, notes = skypilot.accelerators(_placement(3, "Standard_NC96ads_A100_v4", "A100-80GB"), fleet)
    assert shape == "A100-80GB:4" and "smallest that holds it" in notes[0]  # Azure sells 1, 2 or 4 A100 80GB
    assert fleet.get("azure", "Standard_NV6ads_A10_v5") is None  # a sixth of an A10 is no nvidia.com/gpu
    assert fleet.get("azure", "Standard_ND96isr_MI300X_v5") is None  # AMD: amd.com/gpu


def test_kueue_flavors_select_aks_spot_and_the_gpu_product():
    assert labels.flavor_labels("azure", "H100-SXM", spot=True) == {
        "kubernetes.azure.com/scalesetpriority": "spot",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    assert labels.flavor_labels("azure", "A100-80GB", spot=False) == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def test_aks_clusters_are_named_by_their_tag_and_carbon_uses_microsoft_s_pue():
    assert "aks-managed-cluster-name" in settings.DEFAULT_CLUSTER_TAG_KEYS
    assert _placement(8, "x").cluster.kind == "AKS"
    assert carbon_data.pue("azure", {}) == (
        1.18,
        "Microsoft worldwide operating PUE (datacenters.microsoft.com/sustainability/efficiency)",
    )
