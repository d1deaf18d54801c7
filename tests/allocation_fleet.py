"""Small shared-GPU fleets for the allocation tests: bills, GPU-hours and workloads as the tables hold them.

``Fleet`` collects rows and writes them either straight into a warehouse (the allocation's own
tests) or as real inputs — a FOCUS 1.2 CSV bill for ``focus_files`` and a DCGM exporter exposition
with pod labels for ``dcgm_exporter`` — so the order tests go through the ingestors and their loads.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from gpufinops.warehouse import schema

START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
QUANTUM = Decimal("0.000000000000001")


def hourly_lines(day_cost: Decimal, hours: int = 24) -> list[Decimal]:
    """``hours`` hourly amounts at the ledger's scale that add up to ``day_cost`` exactly."""
    each = (day_cost / hours).quantize(QUANTUM)
    return [each] * (hours - 1) + [day_cost - each * (hours - 1)]


@dataclass
class Line:
    resource_id: str
    hour: int  # hours after START
    cost: Decimal
    team: str | None = None
    gpu_count: int | None = 1
    gpu_model: str | None = "A100-40GB"
    provider: str = "AWS"
    resource_name: str | None = None
    tags: str | None = None


@dataclass
class GpuHour:
    resource_id: str | None
    hour: int
    gpu_uuid: str
    mig_instance: str | None = None
    samples: int = 60
    host: str = "node-a"
    gpu_model: str = "A100-40GB"
    source: str = "dcgm"
    util_max: float = 50.0


@dataclass
class Work:
    hour: int
    gpu_uuid: str
    namespace: str | None
    pod: str | None = None
    mig_instance: str | None = None
    samples: int = 60
    occupied: int | None = None  # default: the unit's workloads one after another (their samples added)
    sharing: str | None = None
    sm_active: float | None = None
    util: float | None = None
    process: str | None = None
    pid: int | None = None
    host: str = "node-a"
    source: str = "dcgm"
    mem_mib: float | None = None


@dataclass
class Fleet:
    lines: list[Line] = field(default_factory=list)
    gpu_hours: list[GpuHour] = field(default_factory=list)
    work: list[Work] = field(default_factory=list)

    def insert(self, con) -> None:
        """Bulk-insert the rows (through Arrow: one statement per table)."""

        def hour(h: int) -> datetime:
            return START + timedelta(hours=h)

        lines = [
            {
                "ResourceId": ln.resource_id,
                "ResourceName": ln.resource_name,
                "x_Team": ln.team,
                "ChargePeriodStart": hour(ln.hour),
                "ChargePeriodEnd": hour(ln.hour + 1),
                "ChargeCategory": "Usage",
                "ProviderName": ln.provider,
                "x_GpuCount": ln.gpu_count,
                "x_GpuModel": ln.gpu_model,
                "EffectiveCost": ln.cost,
                "BilledCost": ln.cost,
                "Tags": ln.tags,
                "x_Source": "bills",
            }
            for ln in self.lines
        ]
        gpu_hours = [
            {
                "hour": hour(g.hour),
                "gpu_uuid": g.gpu_uuid,
                "gpu_model": g.gpu_model,
                "mig_instance": g.mig_instance,
                "host": g.host,
                "resource_id": g.resource_id,
                "samples": g.samples,
                "util_max": g.util_max,
                "util_mean": g.util_max,
                "util_p95": g.util_max,
                "source": g.source,
            }
            for g in self.gpu_hours
        ]
        sequential: dict[tuple, int] = {}
        for w in self.work:
            key = (w.hour, w.gpu_uuid, w.mig_instance, w.source)
            sequential[key] = sequential.get(key, 0) + w.samples
        work = [
            {
                "hour": hour(w.hour),
                "gpu_uuid": w.gpu_uuid,
                "mig_instance": w.mig_instance,
                "host": w.host,
                "namespace": w.namespace,
                "pod": w.pod,
                "pid": w.pid,
                "process": w.process,
                "samples": w.samples,
                "occupied_samples": w.occupied
                if w.occupied is not None
                else sequential[(w.hour, w.gpu_uuid, w.mig_instance, w.source)],
                "sharing": w.sharing,
                "util_mean": w.util,
                "sm_active_mean": w.sm_active,
                "mem_used_max_mib": w.mem_mib,
                "source": w.source,
            }
            for w in self.work
        ]
        for table, rows in (
            ("cost_line_items", lines),
            ("gpu_metrics_hourly", gpu_hours),
            ("gpu_workloads_hourly", work),
        ):
            if not rows:
                continue
            target = schema.TABLES[table].schema
            arrow = pa.Table.from_pylist(rows, schema=pa.schema([target.field(name) for name in rows[0]]))
            con.register("_fleet_rows", arrow)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _fleet_rows")
            con.unregister("_fleet_rows")


def write_focus_csv(path: Path, lines: list[Line], start: datetime = START) -> None:
    """The lines as a FOCUS 1.2 CSV (every mandatory column) that ``focus_files`` loads; hours after ``start``."""
    first = start
    columns = [name for name, _, _ in schema.FOCUS_12_COLUMNS] + ["x_GpuCount", "x_GpuModel", "x_Team"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for ln in lines:
            start = first + timedelta(hours=ln.hour)
            period = start.replace(day=1, hour=0)
            writer.writerow(
                {
                    "BilledCost": ln.cost,
                    "EffectiveCost": ln.cost,
                    "ListCost": ln.cost,
                    "ContractedCost": ln.cost,
                    "BillingAccountId": "123456789012",
                    "BillingAccountName": "acme",
                    "BillingCurrency": "USD",
                    "BillingPeriodStart": period.isoformat(),
                    "BillingPeriodEnd": (period + timedelta(days=32)).replace(day=1).isoformat(),
                    "ChargeCategory": "Usage",
                    "ChargeClass": "",
                    "ChargeDescription": "GPU instance hour",
                    "ChargePeriodStart": start.isoformat(),
                    "ChargePeriodEnd": (start + timedelta(hours=1)).isoformat(),
                    "InvoiceIssuerName": "AWS",
                    "PricingQuantity": "1",
                    "PricingUnit": "Hours",
                    "ProviderName": "AWS",
                    "PublisherName": "AWS",
                    "ServiceCategory": "Compute",
                    "ServiceName": "Amazon Elastic Compute Cloud",
                    "ResourceId": ln.resource_id,
                    "PricingCategory": "Standard",
                    "ConsumedQuantity": "1",
                    "ConsumedUnit": "Hours",
                    "x_GpuCount": ln.gpu_count,
                    "x_GpuModel": ln.gpu_model,
                    "x_Team": ln.team or "",
                }
            )


def exposition(samples: list[dict]) -> str:
    """DCGM exporter text exposition: one GPU_UTIL / FB_USED / SM_ACTIVE line each per sample dict
    (keys: ts (datetime), uuid, host, util, mem, sm, and optional namespace, pod, container, mig, vgpu)."""
    lines = [
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        "# TYPE DCGM_FI_PROF_SM_ACTIVE gauge",
    ]
    for s in samples:
        labels = {
            "gpu": s.get("index", "0"),
            "UUID": s["uuid"],
            "modelName": s.get("model", "NVIDIA A100-SXM4-40GB"),
            "Hostname": s["host"],
        }
        if s.get("mig"):
            profile, instance = s["mig"].split("/")
            labels |= {"GPU_I_PROFILE": profile, "GPU_I_ID": instance}
        for key in ("namespace", "pod", "container", "vgpu"):
            if s.get(key):
                labels[key] = s[key]
        text = ",".join(f'{k}="{v}"' for k, v in labels.items())
        ms = int(s["ts"].timestamp() * 1000)
        for metric, value in (
            ("DCGM_FI_DEV_GPU_UTIL", s["util"]),
            ("DCGM_FI_DEV_FB_USED", s["mem"]),
            ("DCGM_FI_PROF_SM_ACTIVE", s["sm"]),
        ):
            lines.append(f"{metric}{{{text}}} {value} {ms}")
    return "\n".join(lines) + "\n"
