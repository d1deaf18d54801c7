"""The five-pod node of the busy-waste tests: a FOCUS bill for one 8-GPU A100 instance and a loopback DCGM
exporter serving its pods' minutes (simulator/busy_phases.py), loaded by the real ingestors."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.simulator.busy_phases import Pod, exposition_rows
from tests.allocation_fleet import START, Line, write_focus_csv
from tests.gpu_series import exposition

HOURS = 24
RATE = Decimal("32.7726")  # $/h of the 8-GPU instance on the bill (a p4de.24xlarge's on-demand rate)
GPUS = 8
NOTEBOOK_ACTIVE = (0, 6, 12, 18)


def _uuid(i: int) -> str:
    return f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}"


def five_pods() -> list[Pod]:
    healthy = tuple(
        "warmup" if h == 0 else "eval_pass" if h == 12 else "checkpoint_pause" if h % 6 == 3 else "train_bf16"
        for h in range(HOURS)
    )
    return [
        Pod(
            "research",
            "notebook-alice",
            (_uuid(1),),
            tuple("notebook_active" if h in NOTEBOOK_ACTIVE else "notebook_idle" for h in range(HOURS)),
            30.0,
        ),
        Pod("train", "llm-finetune-7", (_uuid(2), _uuid(3)), (None,) * 8 + ("train_bf16",) * 10 + ("stalled",) * 6, 70),
        Pod("vision", "resnet-trainer", (_uuid(4),), ("input_bound",) * HOURS, 40.0),
        Pod("research", "bert-fp32", (_uuid(5),), ("train_fp32",) * HOURS, 50.0),
        Pod("train", "llm-bf16", (_uuid(6), _uuid(7)), healthy, 72.0),
    ]


def registry() -> Registry:
    r = Registry()
    r.register(FocusFiles)
    r.register(DcgmExporter)
    return r


def load(warehouse: Path, folder: Path, url: str) -> None:
    """The bill and one scrape of the exporter at ``url``, through the ingestors."""
    (folder / "bills").mkdir(exist_ok=True)
    lines = [Line("i-0busy", h, RATE, team="ml", gpu_count=GPUS, gpu_model="A100-80GB") for h in range(HOURS)]
    write_focus_csv(folder / "bills" / "focus.csv", lines)
    for name, kind, options in (
        ("bills", "focus_files", {"path": str(folder / "bills" / "*.csv")}),
        ("dcgm", "dcgm_exporter", {"targets": [url], "resource_map": {"node-a": "i-0busy"}, "timeout_s": 30}),
    ):
        result = run_source(registry(), warehouse, name, kind, options, team_tag_keys=("team",))
        assert result.status == "succeeded", result.error


def body(seed: int = 7) -> str:
    return exposition(exposition_rows(five_pods(), int(START.timestamp() * 1000), seed))
