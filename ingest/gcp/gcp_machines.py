"""Compute Engine GPU machine types (a2, a3, g2 families): GPUs, vCPUs and memory per shape.

A GPU machine type is billed as three SKUs: its GPUs (``Nvidia Tesla A100 GPU running in …``), its
vCPUs (``A2 Instance Core running in …``) and its memory (``A2 Instance Ram running in …``), each per
hour, and the same three as Spot (``Preemptible``) and 1-/3-year commitments. A machine type's price
is ``gpus × GPU + vcpus × core + memory_gib × ram`` (Compute Engine's accelerator-optimized machine
docs list the shapes; Cyclenerd's pricing.yml prices them the same way).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    family: str  # the CPU/RAM SKU family: a2 | a3 | g2
    gpu_sku: str  # the GPU SKU's model words, lower case (gcp_export_mapping.GPU_SKU_MODELS keys)
    gpu_model: str  # canonical model (warehouse/gpu_models.py)
    gpu_count: int
    vcpus: int
    memory_gib: int
    gpu_memory_gib: int


def _shapes() -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for n, vcpus, mem in ((1, 12, 85), (2, 24, 170), (4, 48, 340), (8, 96, 680)):
        shapes[f"a2-highgpu-{n}g"] = Shape("a2", "a100", "A100-40GB", n, vcpus, mem, 40)
    shapes["a2-megagpu-16g"] = Shape("a2", "a100", "A100-40GB", 16, 96, 1360, 40)
    for n, vcpus, mem in ((1, 12, 170), (2, 24, 340), (4, 48, 680), (8, 96, 1360)):
        shapes[f"a2-ultragpu-{n}g"] = Shape("a2", "a100 80gb", "A100-80GB", n, vcpus, mem, 80)
    for n, vcpus, mem in ((1, 26, 234), (2, 52, 468), (4, 104, 936), (8, 208, 1872)):
        shapes[f"a3-highgpu-{n}g"] = Shape("a3", "h100 80gb", "H100-SXM", n, vcpus, mem, 80)
    for vcpus, gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8)):
        shapes[f"g2-standard-{vcpus}"] = Shape("g2", "l4", "L4", gpus, vcpus, vcpus * 4, 24)
    return shapes


SHAPES: dict[str, Shape] = _shapes()
# Machine types billed in the export under these names whose price the catalogue does not compose
# (their own "Mega"/"Ultra" SKUs), still known for their GPUs.
EXTRA_GPU_MACHINES: dict[str, tuple[str, int]] = {
    "a3-megagpu-8g": ("H100-SXM", 8),
    "a3-edgegpu-8g": ("H100-SXM", 8),
    "a3-ultragpu-8g": ("H200", 8),
}
GPU_MACHINE_TYPES: dict[str, tuple[str, int]] = {
    **{name: (s.gpu_model, s.gpu_count) for name, s in SHAPES.items()},
    **EXTRA_GPU_MACHINES,
}
