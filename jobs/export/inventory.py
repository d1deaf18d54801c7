"""What each cloud offers: instance types with their GPUs, and the accelerator shapes SkyPilot knows.

Read from the shipped inventory (table ``gpu_instance_reference``, loaded from every provider spec's inventory
file, kernel/providers.py; the files themselves when the table is empty). Only whole-GPU types
count (``gpu_fraction`` 1), and only NVIDIA ones: a fractional g6f/g4 slice is no ``nvidia.com/gpu`` device a NodePool limit or
a SkyPilot ``accelerators`` count can be built on.

SkyPilot names accelerators per cloud as its catalogue fetchers do (``sky/catalog/data_fetchers``): the
cloud's own GPU name (AWS ``GpuInfo.Name``, GCP's accelerator type without ``nvidia-``/``tesla-``), with
its exceptions (p3dn ``V100-32GB``, p4de ``A100-80GB``, g5g ``T4g``, GCP a3-mega ``H100-MEGA``); a cloud's
valid ``NAME:COUNT`` pairs are those of its whole-GPU types. On Kubernetes SkyPilot canonicalises the
node's GPU label to the same names, and a pod's count must fit on one node.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpufinops.kernel import providers

# gpufinops' canonical GPU model -> SkyPilot's accelerator name (the rest keep their name)
SKYPILOT_NAME = {"V100-16GB": "V100", "A100-40GB": "A100", "H100-SXM": "H100", "H100-PCIe": "H100"}
NON_NVIDIA_PREFIXES = ("Radeon", "MI")  # AMD GPUs are amd.com/gpu, not nvidia.com/gpu


def skypilot_name(gpu_model: str, provider: str | None = None, instance_type: str | None = None) -> str:
    """SkyPilot's accelerator name for a GPU model (on ``instance_type`` of ``provider`` when known)."""
    spec = providers.spec(provider)
    if spec is not None and spec.skypilot is not None and instance_type:
        # the instance families SkyPilot names differently from the GPU model they carry
        for prefix, name in spec.skypilot.family_names.items():
            if instance_type.startswith(prefix):
                return name
    return SKYPILOT_NAME.get(gpu_model, gpu_model)


@dataclass(frozen=True)
class InstanceType:
    provider: str
    name: str
    gpu_model: str
    gpus: int

    @property
    def skypilot(self) -> str:
        return skypilot_name(self.gpu_model, self.provider, self.name)

    @property
    def attached(self) -> bool:
        """A GCP N1 host with attached GPUs (``n1+…``): SkyPilot takes the accelerators, not this name."""
        return "+" in self.name


@dataclass
class Inventory:
    types: dict[tuple[str, str], InstanceType] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: list[dict]) -> Inventory:
        inv = cls()
        for row in rows:
            if (
                (row.get("gpu_fraction") or 1) < 1
                or not row.get("gpu_count")
                or not row.get("gpu_model")
                or str(row["gpu_model"]).startswith(NON_NVIDIA_PREFIXES)
            ):
                continue
            it = InstanceType(row["provider"], row["instance_type"], row["gpu_model"], int(row["gpu_count"]))
            inv.types[(it.provider, it.name)] = it
        return inv

    def get(self, provider: str, instance_type: str | None) -> InstanceType | None:
        return self.types.get((provider, instance_type or ""))

    def of_model(self, provider: str, gpu_model: str) -> list[InstanceType]:
        """The provider's whole-GPU types of one model, fewest GPUs first."""
        return sorted(
            (t for t in self.types.values() if t.provider == provider and t.gpu_model == gpu_model),
            key=lambda t: (t.gpus, t.name),
        )

    def skypilot_shapes(self, provider: str) -> dict[str, set[int]]:
        """SkyPilot accelerator name -> the GPU counts the provider's catalogue offers for it."""
        shapes: dict[str, set[int]] = defaultdict(set)
        for t in self.types.values():
            if t.provider == provider:
                shapes[t.skypilot].add(t.gpus)
        return dict(shapes)


def load(con) -> Inventory:
    """The inventory from the warehouse, else (a warehouse that never loaded it) from the shipped CSV."""
    from gpufinops.warehouse import queries

    rows = queries.gpu_instance_inventory(con).to_dicts()
    if not rows:
        from gpufinops.warehouse.reference import load_gpu_instance_types

        rows = [r for r in load_gpu_instance_types().to_pylist() if r.get("accelerator") == "gpu"]
    return Inventory.from_rows(rows)
