"""The cloud's side of the on-prem comparison: the cloud offers whose GPU fits an on-prem GPU's work,
and what each costs for one on-prem GPU-hour's work at the measured utilisation (pay-per-use options
are paid for the busy share only; commitments every hour, like the cluster)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import polars as pl

from gpufinops.kernel import labels
from gpufinops.models.onprem_cost import as_decimal as _d

PAY_PER_USE = ("on_demand", "spot")
NOT_INTERRUPTIBLE = {"online_inference", "notebook", "interactive"}


def interruptible(row: dict[str, Any]) -> bool:
    """Whether spot fits the work: batch jobs retry, checkpointed training resumes; serving does not."""
    if row.get("workload") in NOT_INTERRUPTIBLE:
        return False
    return row.get("workload") == "batch_inference" or (row.get("checkpointing") or "").lower() != "false"


def fitting_offers(offers: pl.DataFrame, memory_gib: float | None, fp16_tflops: float | None) -> list[dict]:
    """Cloud offers whose GPU has at least this memory and FP16 throughput, priced per GPU-hour."""
    out = []
    for o in offers.iter_rows(named=True):
        if o["memory_gib"] is None or (memory_gib and o["memory_gib"] < memory_gib):
            continue
        if fp16_tflops and (o["fp16_tflops"] or 0) < fp16_tflops:
            continue
        out.append({**o, "usd_per_gpu_hour": _d(o["usd_per_hour"]) / o["gpu_count"]})
    return out


def price_options(offers: list[dict], util: Decimal, interruptible: bool, overhead: Decimal) -> list[dict]:
    """Each offer's cost of one on-prem GPU-hour's work at utilisation ``util``, cheapest first."""
    options = []
    for o in offers:
        if o["pricing"] == "spot" and not interruptible:
            continue
        per_used = o["usd_per_gpu_hour"] * (1 + overhead if o["pricing"] == "spot" else 1)
        per_onprem_hour = per_used * util if o["pricing"] in PAY_PER_USE else o["usd_per_gpu_hour"]
        options.append(
            {
                "provider": o["provider"],
                "region": o["region"],
                "instance_type": o["instance_type"],
                "gpu_model": o["gpu_model"],
                "gpu_count": o["gpu_count"],
                "pricing": o["pricing"],
                "origin": o["origin"],
                "usd_per_gpu_hour": o["usd_per_gpu_hour"],
                "usd_per_used_gpu_hour": per_used
                if o["pricing"] in PAY_PER_USE
                else (o["usd_per_gpu_hour"] / util if util else None),
                "usd_per_onprem_gpu_hour": per_onprem_hour,
            }
        )
    return sorted(
        options,
        key=lambda o: (o["usd_per_onprem_gpu_hour"], o["provider"], o["region"], o["instance_type"], o["pricing"]),
    )


def label(option: dict) -> str:
    """An offer as a person reads it: "Google Cloud a2-ultragpu-1g spot (us-central1)", never a provider or
    pricing code ("gcp", "on_demand")."""
    provider = labels.label(option["provider"], "provider")
    pricing = labels.label(option["pricing"], "pricing").lower()
    return f"{provider} {option['instance_type']} {pricing} ({option['region']})"
