"""Node labels and accelerator names per provider for the GPU models the warehouse knows.

Each scheduler selects GPU nodes by the labels its platform sets: Karpenter on AWS
(``karpenter.sh/capacity-type``, ``karpenter.k8s.aws/instance-gpu-name``), GKE
(``cloud.google.com/gke-spot``, ``cloud.google.com/gke-provisioning``,
``cloud.google.com/gke-accelerator``) and NVIDIA GPU Feature Discovery on private clusters
(``nvidia.com/gpu.product``). A model missing from a table falls back to a slug of its name.
"""

from __future__ import annotations

import re

from gpufinops.jobs.export.names import slug

CAPACITY_TYPE = "karpenter.sh/capacity-type"
GPU_RESOURCE = "nvidia.com/gpu"

GKE_ACCELERATOR = {
    "T4": "nvidia-tesla-t4",
    "L4": "nvidia-l4",
    "P100": "nvidia-tesla-p100",
    "K80": "nvidia-tesla-k80",
    "V100-16GB": "nvidia-tesla-v100",
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100-SXM": "nvidia-h100-80gb",
    "H200": "nvidia-h200-141gb",
}
GFD_PRODUCT = {
    "T4": "Tesla-T4",
    "L4": "NVIDIA-L4",
    "A10": "NVIDIA-A10",
    "A10G": "NVIDIA-A10G",
    "A40": "NVIDIA-A40",
    "L40S": "NVIDIA-L40S",
    "V100-16GB": "Tesla-V100-SXM2-16GB",
    "V100-32GB": "Tesla-V100-SXM2-32GB",
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100-SXM": "NVIDIA-H100-80GB-HBM3",
    "H100-PCIe": "NVIDIA-H100-PCIe",
    "H200": "NVIDIA-H200",
}


def aws_gpu_name(gpu_model: str) -> str:
    """Karpenter's ``instance-gpu-name``: the model's base name in lower case (a100, h100, a10g)."""
    return slug(gpu_model.split("-")[0])


def gpu_memory_mib(gpu_model: str) -> int | None:
    found = re.search(r"(\d+)GB", gpu_model.upper())
    return int(found.group(1)) * 1024 if found else None


def flavor_labels(provider: str, gpu_model: str, spot: bool) -> dict[str, str]:
    """The nodeLabels that select this provider's GPU nodes of one model and capacity type."""
    if provider == "aws":
        labels = {
            CAPACITY_TYPE: "spot" if spot else "on-demand",
            "karpenter.k8s.aws/instance-gpu-name": aws_gpu_name(gpu_model),
        }
        memory = gpu_memory_mib(gpu_model)
        if memory:
            labels["karpenter.k8s.aws/instance-gpu-memory"] = str(memory)
        return labels
    if provider == "gcp":
        accelerator = GKE_ACCELERATOR.get(gpu_model, f"nvidia-{slug(gpu_model)}")
        capacity = {"cloud.google.com/gke-spot": "true"} if spot else {"cloud.google.com/gke-provisioning": "standard"}
        return {**capacity, "cloud.google.com/gke-accelerator": accelerator}
    labels = {"nvidia.com/gpu.product": GFD_PRODUCT.get(gpu_model, slug(gpu_model))}
    if spot:
        labels[CAPACITY_TYPE] = "spot"
    return labels
