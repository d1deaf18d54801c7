"""The second fleet's machines (:data:`FLEET`) and what each one carries through the simulation.

:class:`Box` is a machine as configured (type, team, workload, utilisation profile, schedule, and the
planted finding or look-alike it stands for); :class:`Machine` is a box built for one seed: its
identity, GPUs, and per-hour / per-sample arrays. :mod:`simulator.eval_fleet` builds them,
:mod:`simulator.eval_exports` delivers them, :mod:`simulator.eval_truth` derives their truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from gpufinops.simulator import eval_laws as laws


@dataclass(frozen=True)
class Box:
    """One machine of the fleet. ``profile``: ``serve:<service>``, ``train``, ``batch``, ``idle``,
    ``notebook``, ``workday`` (busy weekdays 9–18, idle otherwise, never stopped), ``partial:<k>`` (k
    GPUs work, the rest are spare), ``shards:<k>`` (k GPUs busy, the rest stall but hold model shards).
    ``schedule``: ``always``, ``workhours``, ``bursts``, ``last:<days>`` (started that many days before the
    end), ``until:<days>`` (stopped that many days before the end)."""

    name: str
    provider: str
    instance_type: str
    team: str
    workload: str
    profile: str
    pricing: str = "on_demand"
    schedule: str = "always"
    precision: str | None = None
    checkpointing: bool = False
    checkpoint_interval_min: int | None = None
    metrics: bool = True
    role: tuple[str, str] | None = None  # (kind, why) of a planted finding, ("not <kind>", why) of a look-alike


def _serve(name, provider, it, service, team, role=None, **kw) -> Box:
    s = laws.SERVICES[service]
    return Box(name, provider, it, team, s.workload, f"serve:{service}", precision=s.precision, role=role, **kw)


FLEET: tuple[Box, ...] = (
    _serve("nlp-l4", "aws", "g6.xlarge", "nlp", "nlp"),
    _serve(
        "nlp-a10g",
        "aws",
        "g5.xlarge",
        "nlp",
        "nlp",
        ("not gpu_type", "25 % busy on A10G: a T4 would need 240 %, an L4 saves 20 %"),
    ),
    _serve(
        "nlp-l40s",
        "aws",
        "g6e.xlarge",
        "nlp",
        "nlp",
        ("not gpu_type", "20 % busy on L40S: an L4 or A10G would need 75 %"),
    ),
    _serve("nlp-h100", "aws", "p5.4xlarge", "nlp", "nlp", ("gpu_type", "H100 at 10 % fits an L40S")),
    _serve("speech-a10g", "aws", "g5.xlarge", "speech", "speech"),
    _serve(
        "speech-l4", "aws", "g6.xlarge", "speech", "speech", ("not gpu_type", "43 % busy on L4: a T4 would need 170 %")
    ),
    _serve("speech-l40s", "aws", "g6e.xlarge", "speech", "speech", ("gpu_type", "L40S at 15 % fits an L4")),
    _serve("vision-t4", "aws", "g4dn.xlarge", "vision", "vision"),
    _serve("vision-l4", "aws", "g6.xlarge", "vision", "vision"),
    # 25 % busy on A10G: a T4 would need 80 %; an L4 fits, but saves ~20 %, near the 25 % bar at moving prices
    _serve("vision-a10g", "aws", "g5.xlarge", "vision", "vision"),
    _serve(
        "ranker-l40s", "aws", "g6e.xlarge", "ranker32", "recsys", ("quantization", "FP32 serving fits an L4 at FP16")
    ),
    Box(
        "det-batch-od",
        "aws",
        "g6.12xlarge",
        "vision",
        "batch_inference",
        "batch",
        schedule="bursts",
        precision="int8",
        checkpointing=True,
        role=("spot_mix", "checkpointed batch on on-demand"),
    ),
    Box(
        "det-batch-spot",
        "aws",
        "g6.12xlarge",
        "vision",
        "batch_inference",
        "batch",
        pricing="spot",
        schedule="bursts",
        precision="int8",
        checkpointing=True,
    ),
    Box(
        "asr-batch",
        "aws",
        "g4dn.12xlarge",
        "speech",
        "batch_inference",
        "batch",
        schedule="bursts",
        precision="fp16",
        role=("not spot_mix", "batch runs of 3–10 h that do not checkpoint"),
    ),
    Box(
        "llm-train",
        "aws",
        "p4de.24xlarge",
        "nlp",
        "training",
        "train",
        precision="bf16",
        checkpointing=True,
        checkpoint_interval_min=30,
        role=("spot_mix", "checkpointed training on on-demand"),
    ),
    Box(
        "pretrain-h100",
        "aws",
        "p5.48xlarge",
        "nlp",
        "training",
        "train",
        precision="bf16",
        role=("not spot_mix", "training on on-demand that does not checkpoint"),
    ),
    Box(
        "pipeline-a100",
        "aws",
        "p4de.24xlarge",
        "research",
        "training",
        "shards:2",
        precision="bf16",
        role=("not gpu_count", "6 GPUs stall at < 10 % but hold model shards"),
    ),
    Box(
        "sweep-l4x8",
        "aws",
        "g6.48xlarge",
        "speech",
        "training",
        "partial:2",
        precision="bf16",
        role=("gpu_count", "2 of 8 GPUs work; a g6.12xlarge holds them"),
    ),
    Box(
        "sweep-a100x8",
        "aws",
        "p4d.24xlarge",
        "vision",
        "training",
        "partial:2",
        precision="bf16",
        role=("not gpu_count", "2 of 8 GPUs work, but AWS has no smaller A100-40GB type"),
    ),
    Box(
        "forgotten-p4d",
        "aws",
        "p4d.24xlarge",
        "research",
        "training",
        "idle",
        role=("idle_gpu", "idle the whole window"),
    ),
    Box(
        "late-g5x4",
        "aws",
        "g5.12xlarge",
        "research",
        "training",
        "idle",
        schedule="last:9",
        role=("idle_gpu", "started 9 days before the end, idle since"),
    ),
    Box(
        "gone-g6ex4",
        "aws",
        "g6e.12xlarge",
        "research",
        "training",
        "idle",
        schedule="until:12",
        role=("not idle_gpu", "idle, but terminated 12 days before the end"),
    ),
    Box(
        "nb-a10g",
        "aws",
        "g5.xlarge",
        "vision",
        "notebook",
        "notebook",
        schedule="workhours",
        role=("not idle_gpu", "a notebook already stopped nights and weekends"),
    ),
    _serve(
        "dark-l4", "aws", "g6.xlarge", "vision", "platform", ("not idle_gpu", "busy, exports no metrics"), metrics=False
    ),
    _serve("nlp-g2", "gcp", "g2-standard-4", "nlp", "nlp", ("commitment", "steady on-demand L4, busy every hour")),
    _serve(
        "nlp-a100",
        "gcp",
        "a2-highgpu-1g",
        "nlp",
        "nlp",
        ("not gpu_type", "23 % busy on A100-40GB: an L4 would need 75 %"),
    ),
    # an A100-40GB cuts ~27 % off an A100-80GB: whether that clears the 25 % bar depends on the seed's prices
    _serve("nlp-a100-80", "gcp", "a2-ultragpu-1g", "nlp", "nlp"),
    _serve("speech-a100", "gcp", "a2-highgpu-1g", "speech", "speech", ("gpu_type", "A100 at 13 % fits an L4")),
    _serve(
        "speech-a100-cud",
        "gcp",
        "a2-highgpu-1g",
        "speech",
        "speech",
        ("not gpu_type", "would fit an L4, but its CUD is paid anyway"),
        pricing="committed",
    ),
    _serve("vision-a100", "gcp", "a2-highgpu-1g", "vision", "vision", ("gpu_type", "A100 at 10 % fits an L4")),
    _serve(
        "vision-g2", "gcp", "g2-standard-4", "vision", "vision", ("commitment", "steady on-demand L4, busy every hour")
    ),
    _serve(
        "vision-g2-old",
        "gcp",
        "g2-standard-4",
        "vision",
        "vision",
        ("not commitment", "steady, but stopped 10 days before the end"),
        schedule="until:10",
    ),
    _serve(
        "ranker-a100", "gcp", "a2-highgpu-1g", "ranker32", "recsys", ("quantization", "FP32 serving fits an L4 at FP16")
    ),
    _serve("ranker-a100-80", "gcp", "a2-ultragpu-1g", "ranker32", "recsys"),
    Box(
        "fp32-train",
        "gcp",
        "a2-highgpu-1g",
        "recsys",
        "training",
        "train",
        precision="fp32",
        role=("not quantization", "FP32, but training"),
    ),
    Box(
        "sweep-a2x8",
        "gcp",
        "a2-highgpu-8g",
        "research",
        "training",
        "partial:2",
        precision="bf16",
        role=("gpu_count", "2 of 8 GPUs work; an a2-highgpu-2g holds them"),
    ),
    Box("tune-a2x2", "gcp", "a2-highgpu-2g", "research", "training", "train", precision="bf16"),
    Box(
        "pretrain-a3",
        "gcp",
        "a3-highgpu-8g",
        "research",
        "training",
        "train",
        precision="bf16",
        checkpointing=True,
        role=("spot_mix", "checkpointed training on on-demand"),
    ),
    Box(
        "vision-train-spot",
        "gcp",
        "a2-highgpu-8g",
        "vision",
        "training",
        "train",
        pricing="spot",
        precision="bf16",
        checkpointing=True,
    ),
    Box(
        "lab-a2x4",
        "gcp",
        "a2-highgpu-4g",
        "research",
        "notebook",
        "workday",
        role=("idle_gpu", "idle nights and weekends, never stopped"),
    ),
)


@dataclass
class Machine:
    box: Box
    host: str
    resource_id: str
    gpu_model: str
    gpu_count: int
    region: str
    # set by simulator.eval_fleet.build (empty until then)
    running: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=bool))  # bool per hour
    work: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=bool))  # bool per hour: works (law)
    util: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # sample × GPU, %
    mem_mib: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    demand: np.ndarray | None = field(repr=False, default=None)  # serve: work per second, per sample
    rates: list[Decimal] = field(repr=False, default_factory=list)  # billed $/h per hour (first delivery)
