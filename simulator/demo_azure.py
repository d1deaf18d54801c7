"""The demo's Azure subscription: an AKS GPU node pool, an idle ND H100 v5 VM and a Spot NC A100 v4 VM.

Subscription ``gpu-prod`` in East US holds (:data:`NODES`):

* nlp's ``nlp-nd-h100-01``, a ``Standard_ND96isr_H100_v5`` (8 × H100) bought for a pre-training run that never
  started: always on, on demand, every GPU idle (planted ``idle_gpu`` / ``always_idle``);
* vision's ``vision-a100-spot``, a Spot ``Standard_NC24ads_A100_v4`` (1 × A100 80GB) training with checkpoints:
  healthy, nothing planted;
* recsys's AKS cluster ``ml-aks``, node pool ``gpupool``: three ``Standard_NC48ads_A100_v4`` (2 × A100 80GB)
  instances of the scale set ``aks-gpupool-31415926-vmss`` serving a ranker. Two nodes carry the traffic;
  the pool's minimum count keeps a third that never gets a pod (the pool is oversized: planted ``idle_gpu`` /
  ``always_idle`` on ``aks-gpupool-31415926-vmss000002``).

The bill is a Cost Management export of the ``FocusCost`` dataset, version 1.0r2, as a copy of its storage
container holds it (:mod:`simulator.azure_export`: a ``manifest.json`` and a CSV partition per month). Rows are
daily, as Cost Management's are: one per VM (and per scale-set instance) per UTC day. Azure bills a scale set's instances under the scale
set's ResourceId, the instance in ``x_SkuDetails``' ``VMName`` (``aks-gpupool-31415926-vmss_2``); its GPU
count is nowhere in the bill (the ``azure_cost_export`` source finds the size in ``x_SkuDetails``'
``ServiceType`` and the inventory gives 8 × H100). Only whole UTC days of the window are billed and measured.

The GPUs' DCGM exporter histories (:func:`write_expositions`, one ``<host>.prom`` each) carry, besides
dcgm-exporter's own labels, what a Prometheus ``kubernetes_sd_configs`` node role adds to an AKS node's series:
its ``provider_id`` (the VMSS instance, ``azure:///subscriptions/…/virtualMachineScaleSets/…/virtualMachines/2``)
and its ``kubernetes.azure.com/*`` labels (``label_kubernetes_azure_com_agentpool`` …). The AKS nodes are
attributed by that providerID, the VMs by the demo config's ``resource_map``.

Prices: pay-as-you-go Linux East US from Azure's Karpenter provider's price table
(``azure_ondemand_linux_prices_gpu_nseries_karpenter.csv``, shared/data/azure); the Spot price is an assumption,
40 % of pay-as-you-go (no recording of a GPU size's Spot price exists). Randomness comes only from
``numpy.random.default_rng((seed, AZURE_STREAM, node))``: the subscription moves none of the rest of the
fleet's draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.simulator.azure_export import REGION, SUBSCRIPTION, bill_row
from gpufinops.simulator.demo_billing import Machine, machine_truth
from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples, gpu_samples
from gpufinops.simulator.demo_smi import gpu_uuid
from gpufinops.simulator.demo_truth import planted_entry
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, GpuHardware, Spec
from gpufinops.simulator.month_files import write_if_changed

AZURE_STREAM = 0x415A52  # "AZR": the subscription's own random stream
CLUSTER, POOL, VMSS = "ml-aks", "gpupool", "aks-gpupool-31415926-vmss"
NODE_RESOURCE_GROUP = f"MC_ml-platform-rg_{CLUSTER}_{REGION}"
PAYG_USD = {  # Linux pay-as-you-go, eastus, $/hour (Azure's Karpenter provider's price table)
    "Standard_ND96isr_H100_v5": Decimal("98.32"),
    "Standard_NC24ads_A100_v4": Decimal("3.673"),
    "Standard_NC48ads_A100_v4": Decimal("7.346"),
}
SPOT_RATIO = Decimal("0.4")  # an assumption (60 % off): no recorded Spot price of these sizes
SIZES = {  # size -> (GPU model, GPUs, vCPUs): Microsoft's size pages (warehouse/data/azure_gpu_sizes.csv)
    "Standard_ND96isr_H100_v5": ("H100-SXM", 8, 96),
    "Standard_NC24ads_A100_v4": ("A100-80GB", 1, 24),
    "Standard_NC48ads_A100_v4": ("A100-80GB", 2, 48),
}
HARDWARE: dict[str, GpuHardware] = {
    "H100-SXM": GPU_HARDWARE["H100-SXM"],
    "A100-80GB": GpuHardware("NVIDIA A100 80GB PCIe", 81920, 300.0, 50.0),  # NC A100 v4: PCIe cards
}


@dataclass(frozen=True)
class Node:
    """One Azure VM of the demo (a standalone VM, or an instance of the AKS pool's scale set)."""

    host: str  # its computer name: the DCGM exporter's Hostname (an AKS node's name)
    size: str
    team: str
    workload: str
    pricing: str  # on_demand | spot
    profile: str  # simulator/demo_profiles.gpu_samples
    resource_group: str
    instance: int | None = None  # the scale-set instance id (AKS nodes); None: a standalone VM
    checkpointing: bool = False
    plant: tuple[str, str] | None = None

    @property
    def vm_name(self) -> str:
        """x_SkuDetails' VMName: a VM's name, a scale-set instance as ``<scale set>_<instance id>``."""
        return self.host if self.instance is None else f"{VMSS}_{self.instance}"

    @property
    def billed_resource(self) -> str:
        """The ResourceId of its rows in the export: the VM, or the scale set for an AKS node (lower-cased, as
        Cost Management writes them)."""
        kind, name = ("virtualmachines", self.host) if self.instance is None else ("virtualmachinescalesets", VMSS)
        group = self.resource_group.lower()
        return f"/subscriptions/{SUBSCRIPTION}/resourcegroups/{group}/providers/microsoft.compute/{kind}/{name}"

    @property
    def resource_id(self) -> str:
        """The resource the ``azure_cost_export`` source gives its lines: the VM, or the scale-set instance."""
        if self.instance is None:
            return self.billed_resource
        return f"{self.billed_resource}/virtualmachines/{self.instance}"

    @property
    def provider_id(self) -> str | None:
        """The Kubernetes node's providerID (AKS nodes), as the cloud provider writes it."""
        if self.instance is None:
            return None
        return (
            f"azure:///subscriptions/{SUBSCRIPTION}/resourceGroups/{self.resource_group}/providers/"
            f"Microsoft.Compute/virtualMachineScaleSets/{VMSS}/virtualMachines/{self.instance}"
        )

    def tags(self) -> dict[str, str]:
        tags = {"team": self.team, "workload": self.workload, "checkpointing": str(self.checkpointing).lower()}
        if self.instance is not None:  # what AKS tags its node pools' scale sets with, and the pool's own tag
            tags.update({"aks-managed-cluster-name": CLUSTER, "aks-managed-poolName": POOL})
        return tags


def _aks(instance: int, profile: str, plant: tuple[str, str] | None = None) -> Node:
    host = f"{VMSS}{np.base_repr(instance, 36).lower():0>6}"  # a scale set's computer name: base-36 instance id
    size = "Standard_NC48ads_A100_v4"
    return Node(
        host, size, "recsys", "online_inference", "on_demand", profile, NODE_RESOURCE_GROUP, instance, plant=plant
    )


NODES = (
    Node(
        "nlp-nd-h100-01",
        "Standard_ND96isr_H100_v5",
        "nlp",
        "training",
        "on_demand",
        "idle",
        "nlp-train-rg",
        plant=("idle_gpu", "always_idle"),
    ),
    Node(
        "vision-a100-spot",
        "Standard_NC24ads_A100_v4",
        "vision",
        "training",
        "spot",
        "training",
        "vision-rg",
        checkpointing=True,
    ),
    _aks(0, "online"),
    _aks(1, "online"),
    _aks(2, "idle", plant=("idle_gpu", "always_idle")),  # the pool's min count keeps a node nothing is scheduled on
)

AKS_HOSTS = frozenset(n.host for n in NODES if n.instance is not None)


@dataclass(frozen=True)
class Subscription:
    nodes: tuple[Node, ...]
    machines: list[Machine]  # the nodes as the fleet's machines (ground truth, resource map)
    rows: list[dict[str, str]]  # the FocusCost export's rows, every column a string
    samples: list[Samples]
    running: np.ndarray  # the hours of the window the subscription is billed and measured (whole UTC days)
    planted: list[dict] = field(default_factory=list)

    @property
    def total(self) -> Decimal:
        return sum((Decimal(r["EffectiveCost"]) for r in self.rows), Decimal(0))


def hourly_price(node: Node) -> Decimal:
    payg = PAYG_USD[node.size]
    return payg * SPOT_RATIO if node.pricing == "spot" else payg


def whole_days(clock: Clock) -> np.ndarray:
    """Per hour of the window: does it lie in a whole UTC day of the window (the days Azure bills here)."""
    first = clock.start if clock.start.hour == 0 else (clock.start + timedelta(days=1)).replace(hour=0)
    last = clock.end.replace(hour=0)
    return np.array([first <= clock.start + timedelta(hours=h) < last for h in range(clock.hours)], dtype=bool)


def hour_shares(daily: Decimal) -> list[Decimal]:
    """A daily line's 24 hourly parts as the ``azure_cost_export`` source spreads it (ingest/azure/focuscost.py):
    a 24th truncated to 15 decimals, the last hour the rest."""
    share = Decimal(int(daily * 10**15) // 24) / 10**15
    return [share] * 23 + [daily - 23 * share]


def machine(node: Node) -> Machine:
    model, count, _ = SIZES[node.size]
    spec = Spec(
        "azure",
        node.size,
        REGION,
        node.team,
        node.workload,
        node.pricing,
        "always",
        node.profile,
        checkpointing=node.checkpointing,
        plant=node.plant,
        name=node.host,
    )
    return Machine(spec, node.host, node.resource_id, model, count, REGION)


def generate(clock: Clock, seed: int) -> Subscription:
    """The subscription's bill, GPU samples and planted ground truth over the window's whole UTC days."""
    running = whole_days(clock)
    days = [clock.start + timedelta(hours=h) for h in np.flatnonzero(running).tolist()[::24]]
    machines, rows, all_samples, planted = [], [], [], []
    for number, node in enumerate(NODES):
        rng = np.random.default_rng((seed, AZURE_STREAM, number))
        m = machine(node)
        samples = gpu_samples(node.profile, HARDWARE[m.gpu_model], m.gpu_count, clock, rng)
        node_rows = [bill_row(node, day, hourly_price(node), PAYG_USD[node.size], SIZES[node.size][2]) for day in days]
        effective: dict[int, Decimal] = {}
        for day_row, first in zip(node_rows, np.flatnonzero(running).tolist()[::24], strict=True):
            for offset, part in enumerate(hour_shares(Decimal(day_row["EffectiveCost"]))):
                effective[first + offset] = part
        if node.plant:
            planted.append(planted_entry(m, clock, running, samples, effective))
        machines.append(m)
        rows += node_rows
        all_samples.append(samples)
    rows.sort(key=lambda r: (r["ChargePeriodStart"], r["ResourceId"], r["x_SkuDetails"]))
    return Subscription(NODES, machines, rows, all_samples, running, planted)


def truth(sub: Subscription) -> list[dict]:
    """The machines' ground_truth.json entries, with what the bill and the exporter name them by."""
    return [
        {
            **machine_truth(m, node.plant[0] if node.plant else None),
            "billed_resource_id": node.billed_resource,
            "vm_name": node.vm_name,
            "provider_id": node.provider_id,
        }
        for node, m in zip(sub.nodes, sub.machines, strict=True)
    ]


# ---- the GPUs' DCGM exporter histories ---------------------------------------------------------------------


def _labels(node: Node, m: Machine, gpu: int, seed: int) -> str:
    hw = HARDWARE[m.gpu_model]
    labels = (
        f'gpu="{gpu}",UUID="{gpu_uuid(seed, node.host, gpu)}",pci_bus_id="0001:00:{gpu:02X}.0",device="nvidia{gpu}",'
        f'modelName="{hw.smi_name}",Hostname="{node.host}"'
    )
    if node.provider_id:  # the node role's labels, relabelled onto the exporter's series
        labels += (
            f',provider_id="{node.provider_id}",node="{node.host}",label_kubernetes_azure_com_agentpool="{POOL}",'
            f'label_kubernetes_azure_com_cluster="{NODE_RESOURCE_GROUP}",'
            f'label_kubernetes_azure_com_accelerator="nvidia",'
            f'label_node_kubernetes_io_instance_type="{node.size}",label_kubernetes_azure_com_mode="user"'
        )
    return labels


def exposition(node: Node, m: Machine, clock: Clock, samples: Samples, running: np.ndarray, seed: int) -> bytes:
    """The node's DCGM exporter ``/metrics`` history over its running hours, scrape by scrape."""
    hw = HARDWARE[m.gpu_model]
    keep = np.flatnonzero(np.repeat(running, SAMPLES_PER_HOUR)).tolist()
    labels = [_labels(node, m, g, seed) for g in range(m.gpu_count)]
    stamps = [int((clock.start + timedelta(minutes=15 * i)).timestamp() * 1000) for i in keep]
    families = (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", samples.util[keep], "{}"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", samples.mem_used[keep], "{}"),
        (
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            hw.memory_total_mib - samples.mem_used[keep],
            "{}",
        ),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", samples.power[keep], "{:.2f}"),
    )
    lines = []
    for name, help_text, values, fmt in families:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for ms, row in zip(stamps, values.tolist(), strict=True):
            lines += [f"{name}{{{labels[g]}}} {fmt.format(row[g])} {ms}" for g in range(m.gpu_count)]
    return ("\n".join(lines) + "\n").encode()


def write_expositions(out_dir: Path, sub: Subscription, clock: Clock, seed: int) -> None:
    """``out_dir/<host>.prom`` for every node (rewritten only when its bytes change); stale files removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = set()
    for node, m, samples in zip(sub.nodes, sub.machines, sub.samples, strict=True):
        path = out_dir / f"{node.host}.prom"
        write_if_changed(path, exposition(node, m, clock, samples, sub.running, seed))
        written.add(path)
    for stale in out_dir.glob("*.prom"):
        if stale not in written:
            stale.unlink()
