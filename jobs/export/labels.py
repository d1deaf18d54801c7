"""Node labels per provider for the GPU models the warehouse knows: each provider spec's ``node_labels``
(kernel/providers.py; the label tables in kernel/node_labels.py).

Each scheduler selects GPU nodes by the labels its platform sets: Karpenter on AWS
(``karpenter.sh/capacity-type``, ``karpenter.k8s.aws/instance-gpu-name``), GKE
(``cloud.google.com/gke-spot``, ``cloud.google.com/gke-provisioning``, ``cloud.google.com/gke-accelerator``),
AKS (``kubernetes.azure.com/scalesetpriority``; the GPU by GPU Feature Discovery's ``nvidia.com/gpu.product``)
and NVIDIA GPU Feature Discovery on private clusters (``nvidia.com/gpu.product``). A model missing from a
table falls back to a slug of its name.
"""

from __future__ import annotations

from gpufinops.kernel import providers
from gpufinops.kernel.node_labels import (  # re-exported: the exports' names for them
    CAPACITY_TYPE,
    GFD_PRODUCT,
    GKE_ACCELERATOR,
    aws_gpu_name,
    gpu_memory_mib,
)

GPU_RESOURCE = "nvidia.com/gpu"
__all__ = ["CAPACITY_TYPE", "GFD_PRODUCT", "GKE_ACCELERATOR", "GPU_RESOURCE", "aws_gpu_name", "gpu_memory_mib"]

# a provider no spec declares: GPU Feature Discovery's product label, and Karpenter's capacity type on spot
_UNDECLARED = providers.NodeLabels(spot={CAPACITY_TYPE: "spot"}, on_demand={}, gpu=providers.nl.gfd_gpu)


def flavor_labels(provider: str, gpu_model: str, spot: bool) -> dict[str, str]:
    """The nodeLabels that select this provider's GPU nodes of one model and capacity type."""
    spec = providers.spec(provider)
    return (spec.node_labels if spec is not None else _UNDECLARED).flavor(gpu_model, spot)
