"""The demo fleet's inference servers: recorded ``/metrics`` histories of vLLM and Triton (TensorRT-LLM) pods.

Three of the fleet's online-inference machines serve language models: nlp's ``nlp-llm7b-serve`` (one
A100-SXM4-80GB) runs vLLM with Mistral 7B, nlp's AWS ``g6.xlarge`` (one L4) runs Triton with the TensorRT-LLM
backend and Llama 3.1 8B at FP16, nlp's ``nlp-mig-serve`` (an A100-SXM4-40GB in MIG mode) runs vLLM with Llama
3.2 3B on one slice. Each writes what its server's ``/metrics`` served every 15 minutes, as a
recorded history (every sample timestamped) that the demo's ``serving_exporter`` source reads, with the pod's
Kubernetes labels and the node's ``instance`` (so the pod is placed on the machine whose GPU metrics carry
that host). The Mistral pod restarts once (its counters start again from zero).

Output rates follow a working-day curve (a night floor, a weekday peak) and stay well under TensorRT-LLM's
published maximum-load throughput for these GPUs (its performance overview, tests/data/gpu-throughput-
benchmarks): Llama 3.1 8B at FP16 on an A100-SXM4-80GB serves 3,634 output tokens/s at 1000/1000 input/output
tokens; the vLLM pod peaks at 1,400 (a 7B model, ~39 % of that); an L4 has 300 GB/s of memory bandwidth to
the A100's 2,039, so decode-bound throughput scales to ~535 tokens/s, and the Triton pod peaks at 260. A third
pod, vLLM with Llama 3.2 3B, serves from a MIG slice (3g.20gb) of nlp's ``nlp-mig-serve`` A100-40GB
(:mod:`simulator.demo_mig`): the slice has 3 of the GPU's 7 compute slices and 4 of its 8 memory slices (~780 GB/s
of 1,555), so scaled by bandwidth and model size (3B against 8B) decode-bound throughput would be ~3,700 tokens/s;
the pod peaks at 900 (~25 % of that). Each pod's samples come from its own random stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

STEP = timedelta(minutes=15)


@dataclass(frozen=True)
class Server:
    machine: str  # the fleet machine's GCP VM name, or "aws:<instance_type>:<team>"
    server: str  # vllm | triton
    model: str
    namespace: str
    pod: str
    peak_output_tps: float
    input_per_request: float
    output_per_request: float
    restart_day: float | None = None  # days into the window the pod restarts (counters from zero)


SERVERS = (
    Server(
        "nlp-llm7b-serve",
        "vllm",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "llm",
        "vllm-mistral-7b-0",
        1400.0,
        900.0,
        250.0,
        restart_day=5.5,
    ),
    # (Triton serves the TensorRT-LLM engine under the model name its repository gives it)
    Server("aws:g6.xlarge:nlp", "triton", "llama-3.1-8b-trtllm", "llm", "triton-llama-8b-0", 260.0, 600.0, 180.0),
    # on the 3g.20gb MIG slice of nlp-mig-serve's A100-40GB (simulator/demo_mig.py)
    Server(
        "nlp-mig-serve",
        "vllm",
        "meta-llama/Llama-3.2-3B-Instruct",
        "llm",
        "vllm-llama-3b-mig-0",
        900.0,
        700.0,
        200.0,
    ),
)


def load_curve(moment: datetime) -> float:
    """The share of the peak served at ``moment``: 0.15 at night, up to 1.0 in a weekday afternoon."""
    hour = moment.hour + moment.minute / 60
    day = 1.0 if moment.weekday() < 5 else 0.45
    return 0.15 + 0.85 * day * max(0.0, math.sin(math.pi * (hour - 6) / 16)) if 6 <= hour <= 22 else 0.15


def host_of(server: Server, machines: list) -> str | None:
    for m in machines:
        if server.machine == m.spec.name or server.machine == f"{m.spec.provider}:{m.spec.instance_type}:{m.spec.team}":
            return m.host
    return None


def exposition(server: Server, host: str, start: datetime, end: datetime, seed: int) -> str:
    """The server's recorded ``/metrics`` history over [start, end)."""
    rng = np.random.default_rng((seed, len(server.pod)))
    pod = f'namespace="{server.namespace}",pod="{server.pod}",instance="{host}:8000"'
    steps = int((end - start) / STEP)
    totals = {"in": 0.0, "out": 0.0, "req": 0.0, "pre": 0.0, "dec": 0.0}
    restart = int(server.restart_day * 96) if server.restart_day is not None else -1
    series: dict[str, list[str]] = {k: [] for k in totals}
    for i in range(steps):
        moment = start + STEP * i
        if i == restart:
            totals = dict.fromkeys(totals, 0.0)
        out = server.peak_output_tps * load_curve(moment) * float(rng.uniform(0.85, 1.1)) * STEP.total_seconds()
        requests = round(out / server.output_per_request)
        out = requests * server.output_per_request
        totals["out"] += out
        totals["req"] += requests
        totals["in"] += requests * server.input_per_request
        totals["pre"] += requests * server.input_per_request / 12000.0  # prefill at ~12k tokens/s per request
        totals["dec"] += requests * server.output_per_request / 45.0  # a stream decodes ~45 tokens/s
        ms = int(moment.timestamp() * 1000)
        for key in totals:
            series[key].append(f"{totals[key]:.1f} {ms}")
    if server.server == "vllm":
        model = f'model_name="{server.model}",{pod}'
        names = {
            "in": ("vllm:prompt_tokens_total", "counter", model),
            "out": ("vllm:generation_tokens_total", "counter", model),
            "req": ("vllm:request_success_total", "counter", f'finished_reason="stop",{model}'),
            "pre": ("vllm:request_prefill_time_seconds_sum", "histogram", model),
            "dec": ("vllm:request_decode_time_seconds_sum", "histogram", model),
        }
    else:
        model = f'model="{server.model}",version="1",{pod}'
        names = {
            "in": ("nv_llm_input_token_len_sum", "histogram", f'{model},response_metric_type="total_input_tokens"'),
            "out": ("nv_llm_output_token_len_sum", "histogram", f'{model},response_metric_type="total_output_tokens"'),
            "req": ("nv_inference_request_success", "counter", model),
        }
    lines = []
    for key, (name, kind, labels) in names.items():
        family = name.removesuffix("_sum") if kind == "histogram" else name
        lines.append(f"# TYPE {family} {kind}")
        lines += [f"{name}{{{labels}}} {value}" for value in series[key]]
    return "\n".join(lines) + "\n"


def write_serving_exports(out_dir: Path, machines: list, start: datetime, end: datetime, seed: int) -> list[Path]:
    """Each serving pod's recorded history as ``out_dir/<pod>.prom``; returns the files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for server in SERVERS:
        host = host_of(server, machines)
        if host is None:
            continue
        path = out_dir / f"{server.pod}.prom"
        text = exposition(server, host, start, end, seed)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written
