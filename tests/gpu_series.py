"""Known GPU metric series for the DCGM and Prometheus tests, their expositions and expected rollups.

Six GPU series over four hours at one sample a minute: a GPU attributed by its ``instance_id``
label, one by its host (with a one-hour gap), two MIG slices of one GPU on a host found through
``resource_map`` (Kubernetes namespace → team), one through its node's providerID, and one that no
bill claims. Expected hourly figures are computed here with ``statistics`` and ``numpy``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from tests.conftest import DATA

START = datetime(2026, 11, 20, tzinfo=UTC)
HOURS = 4
MINUTES = HOURS * 60


@dataclass(frozen=True)
class Gpu:
    uuid: str
    model: str
    host: str
    total_mib: int
    labels: dict = field(default_factory=dict)
    mig: tuple[str, str] | None = None
    gap_hours: frozenset = frozenset()

    @property
    def mig_instance(self) -> str | None:
        return f"{self.mig[0]}/{self.mig[1]}" if self.mig else None


# the first of two MIG slices of one H100; the second (in GPUS) differs only in its pod and its slice
MIG_TRAIN = Gpu(
    "GPU-3c4d5e6f-0000-1111-2222-333344445555",
    "NVIDIA H100 80GB HBM3",
    "ip-10-0-0-9",
    81559,
    {"namespace": "ml-train", "pod": "trainer-0", "container": "main"},
    mig=("1g.10gb", "9"),
)
GPUS = (
    Gpu(
        "GPU-1a2b3c4d-0000-1111-2222-333344445555",
        "NVIDIA H100 80GB HBM3",
        "node-a",
        81559,
        {"instance_id": "i-0123456789abcdef0"},
    ),
    Gpu("GPU-2b3c4d5e-0000-1111-2222-333344445555", "NVIDIA L40S", "host-b", 46068, gap_hours=frozenset({2})),
    MIG_TRAIN,
    replace(MIG_TRAIN, labels={"namespace": "ml-serve", "pod": "server-1", "container": "main"}, mig=("3g.40gb", "2")),
    Gpu(
        "GPU-4d5e6f70-0000-1111-2222-333344445555",
        "NVIDIA A100-SXM4-80GB",
        "node-d",
        81920,
        {"provider_id": "aws:///us-east-1a/i-0fedcba9876543210"},
    ),
    Gpu("GPU-5e6f7081-0000-1111-2222-333344445555", "NVIDIA L40S", "stray-host", 46068),
)
BILLED = {  # ResourceId -> team on the bill
    "i-0123456789abcdef0": "research",
    "host-b": "nlp",
    "i-0mapped000000000c": "speech",
    "i-0fedcba9876543210": "platform",
}
RESOURCE_MAP = {"ip-10-0-0-9": "i-0mapped000000000c"}
NAMESPACE_TEAMS = {"ml-train": "vision"}
EXPECTED_RESOURCE = [
    "i-0123456789abcdef0",
    "host-b",
    "i-0mapped000000000c",
    "i-0mapped000000000c",
    "i-0fedcba9876543210",
    None,
]
EXPECTED_TEAM = ["research", "nlp", "vision", "speech", "platform", None]


def values(i: int, minute: int) -> dict[str, float]:
    """The metrics of GPU series ``i`` at ``minute`` (0 … MINUTES-1)."""
    util = float((minute * 7 + i * 13) % 101)
    used = float(1000 + (minute * 37 + i * 101) % 9000)
    reserved = 500.0
    return {
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": GPUS[i].total_mib - used - reserved,
        "DCGM_FI_DEV_FB_RESERVED": reserved,
        "DCGM_FI_DEV_POWER_USAGE": round(80 + util * 3.1 + i, 3),
        "DCGM_FI_PROF_SM_ACTIVE": round(util / 100 * 0.9, 6),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(util / 100 * 0.4, 6),
    }


def sample_minutes(i: int) -> list[int]:
    return [m for m in range(MINUTES) if m // 60 not in GPUS[i].gap_hours]


def labels_of(i: int) -> dict[str, str]:
    gpu = GPUS[i]
    labels = {
        "gpu": "0",
        "UUID": gpu.uuid,
        "pci_bus_id": "00000000:0F:00.0",
        "device": "nvidia0",
        "modelName": gpu.model,
        "Hostname": gpu.host,
        "DCGM_FI_DRIVER_VERSION": "590.48.01",
    }
    if gpu.mig:
        labels |= {"GPU_I_PROFILE": gpu.mig[0], "GPU_I_ID": gpu.mig[1]}
    return labels | gpu.labels


def _labels_text(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def samples(start: datetime = START) -> list[tuple[str, str, float, int]]:
    """(metric, label text, value, timestamp ms) of every sample, grouped by metric."""
    out = []
    for metric in values(0, 0):
        for i in range(len(GPUS)):
            for minute in sample_minutes(i):
                ts = int((start + timedelta(minutes=minute)).timestamp() * 1000)
                out.append((metric, _labels_text(labels_of(i)), values(i, minute)[metric], ts))
    return out


def exposition(rows: list[tuple[str, str, float, int]]) -> str:
    """Prometheus text format 0.0.4 as dcgm-exporter serves it, with sample timestamps (ms)."""
    lines, seen = [], set()
    for metric, labels, value, ts in rows:
        if metric not in seen:
            seen.add(metric)
            lines += [f"# HELP {metric} {metric}.", f"# TYPE {metric} gauge"]
        lines.append(f"{metric}{labels} {float(value)!r} {ts}")
    return "\n".join(lines) + "\n"


def openmetrics(rows: list[tuple[str, str, float, int]]) -> str:
    """The same samples as OpenMetrics (timestamps in seconds), for ``promtool tsdb create-blocks-from``."""
    lines, seen = [], set()
    for metric, labels, value, ts in rows:
        if metric not in seen:
            seen.add(metric)
            lines.append(f"# TYPE {metric} gauge")
        lines.append(f"{metric}{labels} {float(value)!r} {ts / 1000:.3f}")
    return "\n".join(lines) + "\n"


def expected(i: int) -> dict[datetime, dict[str, float]]:
    """hour -> expected figures for GPU series ``i`` (hours without samples absent)."""
    out = {}
    for hour in range(HOURS):
        minutes = [m for m in sample_minutes(i) if m // 60 == hour]
        if not minutes:
            continue
        v = [values(i, m) for m in minutes]
        util = [x["DCGM_FI_DEV_GPU_UTIL"] for x in v]
        out[START + timedelta(hours=hour)] = {
            "util_mean": statistics.fmean(util),
            "util_p95": float(np.percentile(util, 95)),
            "util_max": max(util),
            "samples": len(util),
            "mem_used_max_mib": max(x["DCGM_FI_DEV_FB_USED"] for x in v),
            "mem_total_mib": float(GPUS[i].total_mib),
            "power_mean_w": statistics.fmean(x["DCGM_FI_DEV_POWER_USAGE"] for x in v),
            "sm_active_mean": statistics.fmean(x["DCGM_FI_PROF_SM_ACTIVE"] for x in v),
            "tensor_active_mean": statistics.fmean(x["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] for x in v),
        }
    return out


def insert_bills(warehouse) -> None:
    """One GPU usage line per billed resource and hour of the window."""
    from gpufinops.warehouse import db

    with db.writer(warehouse) as con:
        for rid, team in BILLED.items():
            for hour in range(HOURS):
                start = START + timedelta(hours=hour)
                con.execute(
                    'INSERT INTO cost_line_items ("ResourceId", "x_Team", "ChargePeriodStart", '
                    '"ChargePeriodEnd", "ChargeCategory", "ProviderName", "x_GpuCount", "EffectiveCost", '
                    "\"BilledCost\", \"x_Source\") VALUES (?, ?, ?, ?, 'Usage', 'AWS', 1, 2.5, 2.5, 'bills')",
                    [rid, team, start, start + timedelta(hours=1)],
                )


NVIDIA_SMI_EXPORTER = DATA / "nvidia-smi-exporter" / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01__load.metrics"
SMI_METRICS = (
    "nvidia_smi_utilization_gpu_ratio",
    "nvidia_smi_memory_used_bytes",
    "nvidia_smi_memory_total_bytes",
    "nvidia_smi_power_draw_watts",
    "nvidia_smi_gpu_info",
)


def nvidia_smi_series() -> list[tuple[str, str, float, int]]:
    """The real nvidia_gpu_exporter capture's GPU series, repeated every minute of the first hour."""
    from prometheus_client.parser import text_string_to_metric_families

    text = NVIDIA_SMI_EXPORTER.read_text()
    rows = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in SMI_METRICS:
                for minute in range(60):
                    ts = int((START + timedelta(minutes=minute)).timestamp() * 1000)
                    rows.append((s.name, _labels_text({**s.labels, "instance": "smi-host:9835"}), s.value, ts))
    return rows
