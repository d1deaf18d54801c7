"""The simulated demo fleet: its machines and their GPU hardware.

Used by :mod:`simulator.demo_fleet`, which prices the fleet and writes its exports. :data:`FLEET` lists
every machine with its workload and, for the machines with planted waste, what was planted; the run
schedules and utilisation profiles the specs name are in :mod:`simulator.demo_profiles`, the nvidia-smi
logs the samples become in :mod:`simulator.demo_smi`.
"""

from __future__ import annotations

from dataclasses import dataclass

INSTANCE_GPUS = {  # instance / machine type -> (canonical GPU model, GPU count)
    "p4d.24xlarge": ("A100-40GB", 8),
    "p4de.24xlarge": ("A100-80GB", 8),
    "p5.48xlarge": ("H100-SXM", 8),
    "g5.xlarge": ("A10G", 1),
    "g5.12xlarge": ("A10G", 4),
    "g5.48xlarge": ("A10G", 8),
    "g6.xlarge": ("L4", 1),
    "g6.12xlarge": ("L4", 4),
    "g4dn.xlarge": ("T4", 1),
    "g4dn.12xlarge": ("T4", 4),
    "a2-highgpu-1g": ("A100-40GB", 1),
    "a2-highgpu-4g": ("A100-40GB", 4),
    "a2-highgpu-8g": ("A100-40GB", 8),
    "a2-ultragpu-1g": ("A100-80GB", 1),
    "a3-highgpu-8g": ("H100-SXM", 8),
    "g2-standard-4": ("L4", 1),
    "g2-standard-48": ("L4", 4),
    "onprem-a40x4": ("A40", 4),
    "onprem-a100x8": ("A100-80GB", 8),
}


@dataclass(frozen=True)
class Spec:
    provider: str
    instance_type: str
    zone: str
    team: str
    workload: str  # training | batch_inference | online_inference | notebook
    pricing: str  # on_demand | spot | committed
    schedule: str  # see demo_profiles.running_hours
    profile: str  # see demo_profiles.gpu_samples
    checkpointing: bool = False
    precision: str | None = None
    plant: tuple[str, str] | None = None  # (kind, variant)
    name: str | None = None  # GCP VM name
    team_label: bool = True  # False: the bill carries no team label (as real accounts do)


FLEET: tuple[Spec, ...] = (
    Spec(
        "aws",
        "p4d.24xlarge",
        "us-east-1a",
        "research",
        "training",
        "on_demand",
        "always",
        "idle",
        plant=("idle_gpu", "always_idle"),
    ),
    Spec(
        "aws",
        "p4d.24xlarge",
        "us-east-1b",
        "nlp",
        "training",
        "on_demand",
        "always",
        "training",
        checkpointing=True,
        plant=("spot_mix", "checkpointed_on_demand"),
    ),
    Spec("aws", "p5.48xlarge", "us-east-1c", "nlp", "training", "committed", "always", "training"),
    Spec(
        "aws",
        "g5.xlarge",
        "us-east-1a",
        "vision",
        "notebook",
        "on_demand",
        "always",
        "notebook",
        plant=("idle_gpu", "idle_off_hours"),
    ),
    Spec("aws", "g5.xlarge", "us-east-1a", "vision", "notebook", "on_demand", "workhours", "notebook"),
    Spec(
        "aws",
        "g5.12xlarge",
        "us-west-2b",
        "recsys",
        "online_inference",
        "on_demand",
        "always",
        "online",
        precision="fp16",
    ),
    Spec("aws", "g5.12xlarge", "us-west-2a", "vision", "training", "spot", "spot", "training", checkpointing=True),
    Spec(
        "aws",
        "g5.48xlarge",
        "us-east-1b",
        "speech",
        "training",
        "on_demand",
        "always",
        "two_of_eight",
        plant=("gpu_count", "two_of_eight_busy"),
    ),
    Spec(
        "aws",
        "g6.xlarge",
        "us-east-1c",
        "speech",
        "online_inference",
        "on_demand",
        "always",
        "online",
        precision="int8",
    ),
    Spec(
        "aws", "g6.xlarge", "us-west-2b", "nlp", "online_inference", "on_demand", "always", "online", precision="fp16"
    ),
    Spec("aws", "g6.12xlarge", "us-west-2a", "recsys", "batch_inference", "spot", "bursts", "batch", precision="fp16"),
    Spec(
        "aws",
        "g4dn.xlarge",
        "us-east-1a",
        "platform",
        "online_inference",
        "committed",
        "always",
        "online",
        precision="fp16",
    ),
    Spec(
        "aws",
        "g4dn.12xlarge",
        "us-east-1b",
        "speech",
        "batch_inference",
        "on_demand",
        "nightly",
        "batch",
        precision="int8",
    ),
    Spec(
        "gcp",
        "a2-highgpu-4g",
        "us-central1-a",
        "research",
        "training",
        "on_demand",
        "always",
        "idle",
        plant=("idle_gpu", "always_idle"),
        name="research-a2-sweep",
    ),
    Spec(
        "gcp",
        "a2-highgpu-8g",
        "us-central1-b",
        "vision",
        "training",
        "spot",
        "spot",
        "training",
        checkpointing=True,
        name="vision-train-a2",
    ),
    Spec(
        "gcp",
        "a2-ultragpu-1g",
        "us-central1-c",
        "nlp",
        "online_inference",
        "on_demand",
        "always",
        "small_model",
        precision="fp16",
        plant=("gpu_type", "7b_model_on_a100_80gb"),
        name="nlp-llm7b-serve",
    ),
    Spec(
        "gcp",
        "a2-highgpu-1g",
        "us-central1-a",
        "recsys",
        "online_inference",
        "on_demand",
        "always",
        "fp32_serving",
        precision="fp32",
        plant=("quantization", "fp32_serving"),
        name="recsys-ranker-serve",
    ),
    Spec(
        "gcp",
        "a3-highgpu-8g",
        "us-central1-a",
        "nlp",
        "training",
        "on_demand",
        "window:0.15:0.8",
        "training",
        name="nlp-pretrain-a3",
    ),
    Spec(
        "gcp",
        "g2-standard-4",
        "europe-west4-a",
        "research",
        "notebook",
        "on_demand",
        "always",
        "notebook",
        plant=("idle_gpu", "idle_off_hours"),
        name="research-nb-l4",
    ),
    Spec(
        "gcp",
        "g2-standard-48",
        "europe-west4-b",
        "speech",
        "online_inference",
        "committed",
        "always",
        "online",
        precision="fp16",
        name="speech-asr-serve",
    ),
    Spec(
        "gcp",
        "g2-standard-4",
        "us-central1-b",
        "platform",
        "online_inference",
        "on_demand",
        "always",
        "online",
        precision="int8",
        name="platform-embed-serve",
    ),
    Spec(
        "gcp",
        "a2-highgpu-1g",
        "us-central1-c",
        "vision",
        "batch_inference",
        "spot",
        "bursts",
        "batch",
        precision="fp16",
        name="vision-batch-a2",
        team_label=False,
    ),
    Spec(
        "gcp",
        "g2-standard-4",
        "us-central1-a",
        "vision",
        "notebook",
        "on_demand",
        "workhours",
        "notebook",
        name="vision-nb-l4",
    ),
    Spec("onprem", "onprem-a40x4", "dc1", "vision", "training", "on_demand", "always", "training", checkpointing=True),
    Spec(
        "onprem", "onprem-a40x4", "dc1", "speech", "batch_inference", "on_demand", "always", "batch", precision="fp16"
    ),
    Spec("onprem", "onprem-a100x8", "dc1", "nlp", "training", "on_demand", "always", "training", checkpointing=True),
    Spec("onprem", "onprem-a100x8", "dc1", "research", "training", "on_demand", "always", "training"),
)


@dataclass(frozen=True)
class GpuHardware:
    smi_name: str  # nvidia-smi's "name" field
    memory_total_mib: int  # nvidia-smi's "memory.total"
    tdp_w: float
    idle_w: float


# memory.total as nvidia-smi reports it (H100: the real capture in shared/data/nvidia-smi-captures).
GPU_HARDWARE: dict[str, GpuHardware] = {
    "A100-40GB": GpuHardware("NVIDIA A100-SXM4-40GB", 40960, 400.0, 52.0),
    "A100-80GB": GpuHardware("NVIDIA A100-SXM4-80GB", 81920, 400.0, 60.0),
    "H100-SXM": GpuHardware("NVIDIA H100 80GB HBM3", 81559, 700.0, 70.0),
    "A10G": GpuHardware("NVIDIA A10G", 23028, 300.0, 24.0),
    "L4": GpuHardware("NVIDIA L4", 23034, 72.0, 16.0),
    "T4": GpuHardware("Tesla T4", 15360, 70.0, 10.0),
    "A40": GpuHardware("NVIDIA A40", 46068, 300.0, 30.0),
}
