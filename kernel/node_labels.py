"""The Kubernetes node labels that select a provider's GPU nodes, as the provider specs declare them
(kernel/providers.py; docs/architecture.md, *Add a provider*).

Each platform labels its GPU nodes its own way: Karpenter on AWS (``karpenter.sh/capacity-type``,
``karpenter.k8s.aws/instance-gpu-name``), GKE (``cloud.google.com/gke-spot``, ``cloud.google.com/gke-provisioning``,
``cloud.google.com/gke-accelerator``), AKS (``kubernetes.azure.com/scalesetpriority: spot`` on Spot pools; AKS
sets no GPU-model label, so the GPU is NVIDIA GPU Feature Discovery's ``nvidia.com/gpu.product``, which the GPU
Operator adds) and GPU Feature Discovery on private clusters. A model missing from a table falls back to a slug
of its name.
"""

from __future__ import annotations

import re

CAPACITY_TYPE = "karpenter.sh/capacity-type"
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
AKS_SPOT = "kubernetes.azure.com/scalesetpriority"

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
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200": "NVIDIA-H200",
}


def slug(text: str | None, default: str = "unnamed") -> str:
    """A label value: lower-case alphanumerics and '-', at most 63 characters."""
    value = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")[:63].strip("-")
    return value or default


def gpu_memory_mib(gpu_model: str) -> int | None:
    found = re.search(r"(\d+)GB", gpu_model.upper())
    return int(found.group(1)) * 1024 if found else None


def aws_gpu_name(gpu_model: str) -> str:
    """Karpenter's ``instance-gpu-name``: the model's base name in lower case (a100, h100, a10g)."""
    return slug(gpu_model.split("-")[0])


def karpenter_aws_gpu(gpu_model: str) -> dict[str, str]:
    labels = {"karpenter.k8s.aws/instance-gpu-name": aws_gpu_name(gpu_model)}
    memory = gpu_memory_mib(gpu_model)
    if memory:
        labels["karpenter.k8s.aws/instance-gpu-memory"] = str(memory)
    return labels


def gke_gpu(gpu_model: str) -> dict[str, str]:
    return {"cloud.google.com/gke-accelerator": GKE_ACCELERATOR.get(gpu_model, f"nvidia-{slug(gpu_model)}")}


def gfd_gpu(gpu_model: str) -> dict[str, str]:
    return {GFD_PRODUCT_LABEL: GFD_PRODUCT.get(gpu_model, slug(gpu_model))}
