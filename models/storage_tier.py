"""storage_tier: a provisioned-IOPS volume of GPU work whose measured operations stayed under gp3's baseline.

An io1/io2 volume attached now or last to a GPU resource, measured (CloudWatch ``AWS/EBS`` operations) over
at least ``storage_min_measured_days`` days, whose busiest hour averaged fewer IOPS than gp3's 3,000
baseline: change it to gp3 with the IOPS and throughput that busiest hour needed (×
``storage_headroom``, never under gp3's baseline 3,000 IOPS / 125 MiB/s). A PD-SSD disk moves to
pd-balanced by the same rule against pd-balanced's performance at its size. An Azure Premium SSD (``Premium_LRS``) or
Ultra Disk (``UltraSSD_LRS``) whose busiest hour fits Premium SSD v2's included 3,000 IOPS and 125 MB/s moves to
``PremiumV2_LRS`` at its size. Both sides priced at the
bill's own rates (models/storage_common.py). No measurements: withheld, naming the metrics to enable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpufinops.models import features
from gpufinops.models.recommendation import Findings, Withheld, money
from gpufinops.models.storage_common import (
    GP3_BASELINE_IOPS,
    GP3_BASELINE_MIBPS,
    StorageInputs,
    finding,
    gpu_resource,
    load,
    volume_monthly_cost,
    volume_team,
)

KIND = "storage_tier"
AZURE_TIERED = ("Premium_LRS", "UltraSSD_LRS")  # Azure managed disks Premium SSD v2 can replace
MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class StorageSettings:
    """The ``[models]`` keys of the storage models."""

    storage_min_measured_days: float = features.setting(7.0, doc="fewer measured days of operations: withheld")
    storage_headroom: float = features.setting(
        1.2, doc="the busiest hour's IOPS / throughput × this is what the new volume gets"
    )
    storage_orphan_days: int = features.setting(
        14, doc="unattached this long (last attached to a GPU resource): an orphan"
    )
    storage_snapshot_retention_days: int = features.setting(90, doc="a snapshot older than this whose volume is gone")
    lifecycle_transition_days: int = features.setting(30, doc="checkpoints older than this go to Glacier IR / Coldline")
    lifecycle_expire_days: int = features.setting(90, doc="and are deleted after this many days …")
    lifecycle_keep_last: int = features.setting(3, doc="… except each run's newest checkpoints")
    storage_min_monthly_savings_usd: float = features.setting(1.0, doc="a change must save at least this, USD a month")

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> StorageSettings:
        settings = cls(**features.parse_settings(cls, section))
        if settings.lifecycle_expire_days <= settings.lifecycle_transition_days:
            raise ValueError(
                f"[models] lifecycle_expire_days: {settings.lifecycle_expire_days} must be more than "
                f"lifecycle_transition_days ({settings.lifecycle_transition_days})"
            )
        return settings


def peaks(hours: list[dict[str, Any]]) -> tuple[float, float, float]:
    """(busiest hour's mean IOPS, busiest hour's mean MiB/s, measured days) of a volume's hourly rows."""
    if not hours:
        return 0.0, 0.0, 0.0
    iops = max(((h["read_ops"] or 0) + (h["write_ops"] or 0)) / 3600.0 for h in hours)
    mibps = max(((h["read_bytes"] or 0) + (h["write_bytes"] or 0)) / 3600.0 / MIB for h in hours)
    return iops, mibps, len({h["hour"] for h in hours}) / 24.0


def _balanced_limits(size_gib: float) -> tuple[float, float]:
    """pd-balanced's IOPS and MiB/s at a size (3,000 + 6 per GiB; 140 + 0.28 per GiB)."""
    return 3000.0 + 6.0 * size_gib, 140.0 + 0.28 * size_gib


def _target(volume: dict[str, Any], iops: float, mibps: float, headroom: float) -> dict[str, Any] | None:
    if volume["volume_type"] in AZURE_TIERED:
        # Premium SSD v2 includes 3,000 IOPS and 125 MB/s at any size: a disk whose busiest hour fits them moves to
        # it at its size, billed per GiB-hour (learn.microsoft.com/azure/virtual-machines/disks-types)
        if iops * headroom > GP3_BASELINE_IOPS or mibps * headroom > GP3_BASELINE_MIBPS:
            return None
        return {"volume_type": "PremiumV2_LRS", "iops": None, "throughput_mibps": None}
    if volume["provider"] == "gcp":
        if volume["volume_type"] != "pd-ssd":
            return None
        limit_iops, limit_mibps = _balanced_limits(float(volume["size_gib"] or 0))
        if iops * headroom > limit_iops or mibps * headroom > limit_mibps:
            return None
        return {"volume_type": "pd-balanced", "iops": None, "throughput_mibps": None}
    if volume["volume_type"] not in ("io1", "io2") or iops >= GP3_BASELINE_IOPS:
        return None
    need_iops = max(GP3_BASELINE_IOPS, float(math.ceil(iops * headroom)))
    need_mibps = max(GP3_BASELINE_MIBPS, float(math.ceil(mibps * headroom)))
    return {"volume_type": "gp3", "iops": need_iops, "throughput_mibps": need_mibps}


def findings(inputs: StorageInputs, settings: StorageSettings) -> Findings:
    out = Findings()
    candidates = [
        v
        for v in inputs.volumes
        if v["volume_type"] in ("io1", "io2", "pd-ssd", *AZURE_TIERED) and v.get("attached_instance_id")
    ]
    for v in candidates:
        gpu, gpu_type = gpu_resource(inputs, v)
        if gpu is None:
            continue  # not GPU work: out of scope
        row = {"resource_id": v["volume_id"], "team": volume_team(inputs, v), "provider_code": v["provider"]}
        hours = inputs.ops.get(v["volume_id"], [])
        iops, mibps, days = peaks(hours)
        if days < settings.storage_min_measured_days:
            out.withheld.append(
                Withheld.of(
                    KIND,
                    row,
                    "no_iops_measurements",
                    f"{days:.1f} measured days of operations on {v['volume_id']} (at least "
                    f"{settings.storage_min_measured_days:g} needed)",
                )
            )
            continue
        target = _target(v, iops, mibps, settings.storage_headroom)
        if target is None:
            continue  # the measurements need what it has
        now_cost, lacking = volume_monthly_cost(inputs, v)
        new_cost, lacking_new = volume_monthly_cost(
            inputs, v, target["volume_type"], target["iops"] or 0.0, target["throughput_mibps"] or 0.0
        )
        if now_cost is None or new_cost is None:
            out.withheld.append(
                Withheld.of(
                    KIND, row, "unpriced_storage", f"the bill carries no {lacking or lacking_new} rate in {v['region']}"
                )
            )
            continue
        saving = money(now_cost - new_cost)
        if saving < Decimal(str(settings.storage_min_monthly_savings_usd)):
            continue
        action = f"change {v['volume_id']} from {v['volume_type']} to {target['volume_type']}"
        if target["iops"]:
            action += f" at {target['iops']:.0f} IOPS and {target['throughput_mibps']:.0f} MiB/s"
        action += f" (volume of GPU resource {gpu}, {gpu_type})"
        out.recommendations.append(
            finding(
                KIND,
                v["provider"],
                v["volume_id"],
                row["team"],
                current={
                    "volume_type": v["volume_type"],
                    "size_gib": v["size_gib"],
                    "iops": v["iops"],
                    "throughput_mibps": v["throughput_mibps"],
                    "monthly_cost_usd": money(now_cost),
                    "gpu_resource": gpu,
                },
                proposed={"action": action, **target, "monthly_cost_usd": money(new_cost)},
                monthly_savings_usd=saving,
                confidence=round(min(1.0, days / 14.0), 2),
                risk="low",
                evidence={
                    "gpu_resource_id": gpu,
                    "gpu_resource_type": gpu_type,
                    "peak_iops": round(iops, 1),
                    "peak_mibps": round(mibps, 2),
                    "measured_days": round(days, 1),
                    "region": v["region"],
                    "rate_source": "the bill's own rates (last 30 days)",
                },
            )
        )
    return out


__all__ = ["KIND", "StorageSettings", "findings", "load"]
