"""The busy-waste evaluation's fleets: per seed, pods whose day is a sequence of job phases
(simulator/busy_phases.py), each planted with the kind it should get (or none), and the healthy
look-alikes placed to be mistaken for them: notebooks in steady use, jobs paused for less than the
stall limit, warm-ups, checkpoint pauses, evaluation passes, tensor-core jobs in FP32-heavy optimizer
steps. The sizes of each case are drawn per seed (``random.Random(seed)``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpufinops.simulator.busy_phases import Pod

HOURS = 24
MODELS = ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4")


@dataclass(frozen=True)
class Planted:
    pod: Pod
    kind: str | None  # the kind it should get; None: healthy
    case: str  # what the generator made of it


def _healthy_training(rng: random.Random) -> list[str]:
    hours = ["train_bf16"] * HOURS
    hours[0] = "warmup"
    for h in rng.sample(range(1, HOURS), rng.randint(2, 5)):
        hours[h] = rng.choice(("checkpoint_pause", "eval_pass", "optimizer_step"))
    return hours


def _cases(rng: random.Random) -> list[tuple[str | None, str, list[str | None], float]]:
    """(kind, case, phases, memory GiB) of one seed's pods."""
    cases: list[tuple[str | None, str, list[str | None], float]] = []
    for _ in range(rng.randint(6, 9)):  # notebooks holding memory, idle most of the day
        active = set(rng.sample(range(HOURS), rng.randint(1, 9)))
        cases.append(
            (
                "idle_held",
                "idle notebook",
                ["notebook_active" if h in active else "notebook_idle" for h in range(HOURS)],
                rng.uniform(8, 40),
            )
        )
    for _ in range(rng.randint(5, 8)):  # notebooks in use most of the day
        idle = set(rng.sample(range(HOURS), rng.randint(0, 10)))
        cases.append(
            (
                None,
                "notebook in use",
                ["notebook_idle" if h in idle else "notebook_active" for h in range(HOURS)],
                rng.uniform(8, 40),
            )
        )
    for _ in range(rng.randint(3, 6)):  # low-traffic model servers: low utilisation, but answering requests
        cases.append((None, "light-traffic server", ["light_serving"] * HOURS, rng.uniform(10, 40)))
    for _ in range(rng.randint(2, 4)):  # pods between jobs that released the GPU's memory (no context held)
        cases.append((None, "idle, memory released", ["notebook_idle"] * HOURS, rng.uniform(0.2, 0.6)))
    return cases + _job_cases(rng)


def _job_cases(rng: random.Random) -> list[tuple[str | None, str, list[str | None], float]]:
    """(kind, case, phases, memory GiB) of one seed's jobs and servers."""
    cases: list[tuple[str | None, str, list[str | None], float]] = []
    phases: list[str | None]
    for _ in range(rng.randint(5, 8)):  # jobs that stalled after steady work
        start, busy, stall = rng.randint(0, 6), rng.randint(2, 12), rng.randint(4, 10)
        phases = [None] * start + ["warmup"] + ["train_bf16"] * busy + ["stalled"] * stall
        cases.append(("stalled_job", "stalled job", (phases + [None] * HOURS)[:HOURS], rng.uniform(20, 75)))
    for _ in range(rng.randint(4, 7)):  # jobs paused under the limit, then on again
        busy, pause = rng.randint(3, 8), rng.randint(1, 3)
        phases = [*(["warmup"] + ["train_bf16"] * busy + ["stalled"] * pause + ["train_bf16"] * HOURS)]
        cases.append((None, "short pause", phases[:HOURS], rng.uniform(20, 75)))
    for _ in range(rng.randint(5, 8)):  # trainers waiting for their data loaders
        phases = [*(["warmup"] + ["input_bound"] * (HOURS - 1))]
        for h in rng.sample(range(1, HOURS), rng.randint(0, 4)):
            phases[h] = "checkpoint_pause"
        cases.append(("input_bound", "input-bound trainer", list(phases), rng.uniform(20, 60)))
    for _ in range(rng.randint(5, 8)):  # FP32 training on tensor-core GPUs
        phases = [*(["train_fp32"] * HOURS)]
        for h in rng.sample(range(HOURS), rng.randint(0, 3)):
            phases[h] = "fp32_checkpoint_pause"
        cases.append(("no_tensor_cores", "FP32 trainer", list(phases), rng.uniform(20, 60)))
    for _ in range(rng.randint(4, 7)):  # servers reading weights faster than they compute
        cases.append(
            ("memory_bound_inference", "memory-bound server", ["serving_memory_bound"] * HOURS, rng.uniform(30, 70))
        )
    for _ in range(rng.randint(8, 12)):  # healthy tensor-core training with every look-alike phase
        cases.append((None, "healthy BF16 trainer", list(_healthy_training(rng)), rng.uniform(30, 75)))
    return cases


def fleet(seed: int) -> list[Planted]:
    rng = random.Random(seed)
    out = []
    for n, (kind, case, phases, mem) in enumerate(_cases(rng)):
        uuid = f"GPU-{seed:04d}{n:04d}-0000-0000-0000-000000000000"
        pod = Pod(f"ns-{n % 5}", f"pod-{n}", (uuid,), tuple(phases), mem, rng.choice(MODELS), f"node-{n // 8}")
        out.append(Planted(pod, kind, case))
    return out
