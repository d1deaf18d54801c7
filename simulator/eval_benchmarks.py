"""Published per-GPU throughput of the same workload on different GPU models: the independent law of
"how busy would this workload be on GPU B".

Read from ``tests/data/gpu-throughput-benchmarks/`` (MLPerf Inference v0.5–v4.1 and Training v1.0–v3.0
closed-division NVIDIA results, NVIDIA TensorRT-LLM's published tokens/s; see that folder's SOURCE.md).
A *measurement* is the median per-accelerator throughput of one GPU model in one table cell group —
(suite, round, benchmark, scenario, unit) — over every submission without MIG/vGPU/MaxQ flags. Within
one group, a workload that keeps GPU A ``u`` % busy needs ``u × T_A / T_B`` % of GPU B.

Two uses, kept apart so that nothing is scored on what built it:

* :func:`fleet_law` gives :mod:`simulator.eval_fleet` the throughput of one benchmark on every GPU model
  the fleet runs (base round, gaps filled from the nearest round through the GPUs both share) and
  names the groups it used;
* :func:`real_pairs` lists every measured GPU pair of the groups the fleet law did **not** use: the
  truth on which :mod:`jobs.evaluate` scores the throughput predictors against real ratios.
"""

from __future__ import annotations

import csv
import functools
import gzip
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "gpu-throughput-benchmarks"
INFERENCE_FILES = (
    "mlperf_inference_closed_nvidia_v0.5-v1.1_subset.csv.gz",
    "mlperf_inference_closed_nvidia_v2.0-v4.1_subset.csv.gz",
)
TRAINING_FILE = "mlperf_training_closed_nvidia_v1.0-v3.0_subset.csv.gz"
TRTLLM_FILE = "trtllm_perf_overview.csv.gz"
TRAINING_GPUS_PER_SYSTEM = "8"  # time-to-train scales sub-linearly: compare 8-GPU systems only

# the tables' gpu_family -> the gpu_specs model it is (only models gpu_specs describes)
GPU_OF_FAMILY = {
    "T4": "T4",
    "L4": "L4",
    "A10": "A10",
    "L40S": "L40S",
    "A40": "A40",
    "A100-SXM-40GB": "A100-40GB",
    "A100-SXM-80GB": "A100-80GB",
    "H100-SXM-80GB": "H100-SXM",
    "H100-PCIe-80GB": "H100-PCIe",
    "H200-SXM-141GB": "H200",
}
# The precision NVIDIA's closed submissions ran each benchmark at (their systems' documentation): the
# spec-ratio baseline reads that column of gpu_specs. FP8 is read as gpu_specs' int8 column.
PRECISION = {
    "resnet50": "int8",
    "resnet": "int8",
    "retinanet": "int8",
    "ssd-resnet34": "int8",
    "ssd-large": "int8",
    "ssd-mobilenet": "int8",
    "ssd-small": "int8",
    "mobilenet": "int8",
    "3d-unet-99": "int8",
    "3d-unet-99.9": "int8",
    "bert-99": "int8",
    "bert-99.9": "fp16",
    "dlrm-99": "int8",
    "dlrm-99.9": "int8",
    "dlrm-v2-99": "int8",
    "dlrm-v2-99.9": "int8",
    "rnnt": "fp16",
    "gnmt": "fp16",
    "gptj-99": "fp8",
    "gptj-99.9": "fp8",
    "llama2-70b-99": "fp8",
    "llama2-70b-99.9": "fp8",
    "mixtral-8x7b": "fp8",
    "stable-diffusion-xl": "fp16",
}


@dataclass(frozen=True)
class Group:
    """One comparable set of results: the same work, software generation and metric."""

    suite: str  # mlperf_inference | mlperf_training | trtllm
    round: str  # MLPerf round, or the TensorRT-LLM doc version
    benchmark: str
    scenario: str
    unit: str
    precision: str

    def label(self) -> str:
        return f"{self.suite} {self.round} {self.benchmark} {self.scenario}"


def _rows(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", newline="") as f:
        return list(csv.DictReader(f))


@functools.lru_cache(maxsize=1)
def measurements() -> dict[Group, dict[str, float]]:
    """group -> {gpu_specs model: median per-GPU throughput}; only groups measuring two GPU models or more."""
    cells: dict[Group, dict[str, list[float]]] = {}

    def add(group: Group, family: str, value: float) -> None:
        model = GPU_OF_FAMILY.get(family)
        if model and value > 0 and math.isfinite(value):
            cells.setdefault(group, {}).setdefault(model, []).append(value)

    for name in INFERENCE_FILES:
        for r in _rows(name):
            if r["gpu_flags"] or r["inferred"] == "1" or r["scenario"] not in ("Offline", "Server"):
                continue
            add(
                Group(
                    "mlperf_inference",
                    r["round"],
                    r["benchmark"],
                    r["scenario"],
                    r["unit"],
                    PRECISION.get(r["benchmark"], "fp16"),
                ),
                r["gpu_family"],
                float(r["throughput_per_accelerator"]),
            )
    for r in _rows(TRAINING_FILE):
        if r["gpu_flags"] or r["accelerators_count"] != TRAINING_GPUS_PER_SYSTEM:
            continue  # throughput per GPU = the work of one training run / accelerator-minutes
        add(
            Group("mlperf_training", r["round"], r["benchmark"], "time_to_train", "runs per GPU-minute", "bf16"),
            r["gpu_family"],
            1 / float(r["accelerator_minutes"]),
        )
    for r in _rows(TRTLLM_FILE):
        add(
            Group(
                "trtllm",
                r["trtllm_doc_version"],
                f"{r['model']} ISL{r['isl']}/OSL{r['osl']} TP{r['tp_size']}",
                "max throughput",
                "tokens/s",
                r["precision"].lower(),
            ),
            r["gpu_family"],
            float(r["throughput_per_gpu_tokens_per_s"]),
        )
    return {
        g: {m: statistics.median(v) for m, v in sorted(models.items())}
        for g, models in sorted(cells.items(), key=lambda kv: kv[0].label())
        if len(models) >= 2
    }


def _groups(suite: str, benchmark: str, scenario: str) -> list[Group]:
    return [g for g in measurements() if (g.suite, g.benchmark, g.scenario) == (suite, benchmark, scenario)]


def fleet_law(
    benchmark: str, scenario: str, base_round: str, gpus: dict[str, str], suite: str = "mlperf_inference"
) -> tuple[dict[str, float], set[Group], dict[str, str]]:
    """Throughput of ``benchmark`` on each fleet GPU (``gpus``: fleet model -> the model measured for it,
    e.g. A10G -> A10), in ``base_round``'s units.

    A GPU the base round did not measure is taken from the newest other round that did, scaled by the
    geometric mean of base/other over the GPUs both measured. Returns (throughput per fleet model,
    groups used, fleet model -> where its figure came from). Raises KeyError when a GPU is in no round.
    """
    groups = {g.round: g for g in _groups(suite, benchmark, scenario)}
    base = groups[base_round]
    table, used, origin = {}, {base}, {}
    for fleet_model, measured in gpus.items():
        if measured in measurements()[base]:
            table[fleet_model], origin[fleet_model] = measurements()[base][measured], f"{base.label()} (measured)"
            continue
        for other in sorted((g for r, g in groups.items() if r != base_round), key=lambda g: g.round, reverse=True):
            cells, base_cells = measurements()[other], measurements()[base]
            shared = [m for m in cells if m in base_cells]
            if measured in cells and shared and other.unit == base.unit:
                factor = math.exp(statistics.fmean(math.log(base_cells[m] / cells[m]) for m in shared))
                table[fleet_model] = cells[measured] * factor
                origin[fleet_model] = f"{other.label()} × {factor:.3f} (through {', '.join(shared)})"
                used.add(other)
                break
        else:
            raise KeyError(f"no {suite} {benchmark} {scenario} result for {measured}")
    return table, used, origin


def real_pairs(exclude: set[Group]) -> list[dict]:
    """Every ordered pair of GPU models measured in one group, over the groups not in ``exclude``."""
    out = []
    for group, cells in measurements().items():
        if group in exclude:
            continue
        for a, t_a in cells.items():
            for b, t_b in cells.items():
                if a != b:
                    out.append({"group": group, "gpu_a": a, "gpu_b": b, "t_a": t_a, "t_b": t_b})
    return out
