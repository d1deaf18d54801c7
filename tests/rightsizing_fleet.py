"""Hand-built warehouses for the rightsizing model tests: hourly line items + hourly GPU rollups.

``build(path, machines, offers)`` writes, through a real migrated DuckDB warehouse, one usage line per
billed hour of each machine and one ``gpu_metrics_hourly`` row per GPU per measured hour, plus the
``instance_types`` catalogue rows given. A machine's GPU ``i`` runs at ``utils[i]`` percent (p95 and
max; mean a little lower) holding ``mem_gib[i]`` GiB.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from gpufinops.warehouse import db

END = datetime(2026, 10, 1, tzinfo=UTC)
MEMORY_MIB = {"A100-80GB": 81920, "A100-40GB": 40960, "L4": 23034, "A10G": 23028, "T4": 15360, "H100-SXM": 81559}


@dataclass
class Machine:
    rid: str
    instance_type: str
    gpu_model: str
    gpu_count: int
    usd_per_hour: str
    utils: list[float]
    mem_gib: list[float]
    provider: str = "AWS"
    region: str = "us-east-1"
    team: str = "ml"
    pricing: str = "Standard"
    tags: dict = field(default_factory=dict)
    days: int = 21
    measured: float = 1.0  # share of billed hours with metrics (the first hours of each day)
    swing: float = 0.0  # utilisation rises by this × hour-of-day / 23 (a diurnal spread)
    shape: Callable[[int, int], float] | None = None  # (hour index, hours) -> utilisation multiplier
    ended_days_ago: int = 0  # last billed this many days before END (terminated mid-window)


def offer(
    instance_type: str, gpu_model: str, gpu_count: int, usd: str, region: str = "us-east-1", provider: str = "aws"
) -> dict:
    return {
        "provider": provider,
        "region": region,
        "instance_type": instance_type,
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "on_demand_usd_per_hour": Decimal(usd),
        "source": "test",
    }


def build(path: Path, machines: list[Machine], offers: list[dict]) -> Path:
    lines, metrics = [], []
    for m in machines:
        hours = m.days * 24
        for h in range(hours):
            start = END - timedelta(hours=hours - h, days=m.ended_days_ago)
            lines.append(
                {
                    "ProviderName": m.provider,
                    "ChargeCategory": "Usage",
                    "ResourceId": m.rid,
                    "ChargePeriodStart": start,
                    "ChargePeriodEnd": start + timedelta(hours=1),
                    "RegionId": m.region,
                    "x_InstanceType": m.instance_type,
                    "x_GpuModel": m.gpu_model,
                    "x_GpuCount": m.gpu_count,
                    "PricingCategory": m.pricing,
                    "x_Team": m.team,
                    "Tags": json.dumps({"team": m.team, **m.tags}),
                    "ConsumedUnit": "Hours",
                    **{
                        column: Decimal(m.usd_per_hour)
                        for column in ("ListUnitPrice", "ListCost", "EffectiveCost", "BilledCost")
                    },
                }
            )
            if (h % 24) >= 24 * m.measured:
                continue
            for g in range(m.gpu_count):
                util = min(100.0, m.utils[g] * (1 + m.swing * (h % 24) / 23) * (m.shape(h, hours) if m.shape else 1.0))
                metrics.append(
                    {
                        "hour": start,
                        "gpu_uuid": f"{m.rid}-gpu{g}",
                        "gpu_model": m.gpu_model,
                        "host": m.rid,
                        "resource_id": m.rid,
                        "team": m.team,
                        "util_mean": util * 0.8,
                        "util_p95": util,
                        "util_max": util,
                        "mem_used_max_mib": m.mem_gib[g] * 1024,
                        "mem_total_mib": float(MEMORY_MIB[m.gpu_model]),
                        "samples": 4,
                        "source": "test",
                    }
                )
    with db.writer(path) as con:
        from gpufinops.warehouse.reference import refresh_gpu_specs

        refresh_gpu_specs(con)
        for table, rows in (("cost_line_items", lines), ("gpu_metrics_hourly", metrics), ("instance_types", offers)):
            if rows:
                con.register("_rows", pa.Table.from_pylist(rows))
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
                con.unregister("_rows")
    return path
