"""onprem_vs_cloud: should this work run on the private cluster or in the cloud?

For each on-prem node group (the cluster level) and each team/workload on it, from the ``onprem``
source's line items: the cost of an on-prem GPU-hour at the measured utilisation ``u`` (the busy
share of the hour), and of a *used* GPU-hour (cost / (GPU-hours × u)), against the cheapest cloud
option for the same work on a GPU that fits it (at least the on-prem GPU's memory and FP16
throughput; AWS and GCP catalogues, and the prices the bills show):

* pay-per-use options cost ``price per GPU-hour × u`` per on-prem GPU-hour: on-demand, and spot
  ``× (1 + interruption overhead)`` for work that tolerates interruption;
* 1- and 3-year commitments cost their price every hour, used or not, like the cluster.

An on-prem GPU-hour costs ``c(u) = F + V·u``: ``F`` is the amortised hardware, facility and
operations and the idle and host draw; ``V`` the extra energy of a busy GPU (TDP model). The
**break-even utilisation** against the cheapest pay-per-use price ``p`` is where ``F + V·u = p·u``:
``u* = F / (p − V)``. Below it the cloud is cheaper (advice: shrink the underused cluster and send
that work to the cloud); above it the cluster is cheaper (keep it; when it is saturated in peaks,
burst the peaks to cloud spot instead of buying nodes). A cloud GPU resource billed nearly every
hour at a utilisation above the break-even of an on-prem GPU that fits its work is steady load:
repatriate it.

The cloud's prices of that work are ``models.cloud_options``; one group's verdict and its evidence are
``models.onprem_verdict``; the repatriations that fit the groups' free capacity are ``models.repatriation``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from gpufinops.models import repatriation, run_reads
from gpufinops.models.cloud_options import PAY_PER_USE, fitting_offers, price_options
from gpufinops.models.onprem_cost import OnpremSettings, OnpremVsCloudParams, used_gpu_hours
from gpufinops.models.onprem_verdict import onprem_finding
from gpufinops.models.recommendation import Findings, Recommendation, Withheld
from gpufinops.warehouse import queries

# read through this module by its users (the label table's test, the on-prem tests)
__all__ = [
    "PAY_PER_USE",
    "OnpremInputs",
    "analyse",
    "analyse_warehouse",
    "findings",
    "fitting_offers",
    "gpu_specs",
    "load",
    "price_options",
    "recommend_from_warehouse",
    "used_gpu_hours",
]


def _group_rows(usage: pl.DataFrame) -> list[dict[str, Any]]:
    """The cluster level: every team/workload of a node group summed."""
    if usage.is_empty():
        return []
    grouped = (
        usage.group_by("cluster", "node_group")
        .agg(
            pl.col("region", "gpu_model", "tdp_w", "idle_w", "host_w_per_gpu", "pue", "usd_per_kwh").first(),
            pl.col(
                "gpu_hours",
                "measured_gpu_hours",
                "util_pct_sum",
                "cost_usd",
                "hardware_usd",
                "energy_usd",
                "facility_usd",
                "unmeasured_power_gpu_hours",
            ).sum(),
            pl.col("gpus").sum(),
            pl.col("nodes").sum(),
            pl.col("first_hour").min(),
            pl.col("last_hour").max(),
            pl.col("hourly_util_p95").max(),
            pl.col("saturated_hour_share").max(),
            pl.col("power_bases"),  # a list per group: joined below
        )
        .sort("cluster", "node_group")
    )
    return [
        {
            **r,
            "power_bases": ",".join(sorted({b for text in r["power_bases"] if text for b in text.split(",")})),
            "team": None,
            "workload": None,
            "checkpointing": None,
        }
        for r in grouped.iter_rows(named=True)
    ]


def analyse(
    usage: pl.DataFrame,
    offers: pl.DataFrame,
    specs: dict[str, dict],
    resource_hours: pl.DataFrame,
    params: OnpremVsCloudParams = OnpremVsCloudParams(),
    now: datetime | None = None,
) -> tuple[list[Recommendation], list[Withheld], list[Recommendation]]:
    """(recommendations, withheld, comparison) for every on-prem node group and cloud GPU resource.

    The comparison holds every node group's (and workload's) verdict — keep, shrink, burst — with its
    cost per used GPU-hour and break-even: facts for the on-prem comparison page and report section. Only
    verdicts that save money are recommendations; repatriations must fit the groups' free capacity.
    """
    groups = _group_rows(usage)
    shared = {(c, g) for c, g, n in usage.group_by("cluster", "node_group").len().iter_rows() if n > 1}
    found = [
        onprem_finding(row, offers, specs, params, now, summary=(row["cluster"], row["node_group"]) in shared)
        for row in groups
    ]
    if shared:  # more than one team/workload on a group: one finding each, besides the cluster's
        found += [
            onprem_finding(row, offers, specs, params, now)
            for row in usage.iter_rows(named=True)
            if (row["cluster"], row["node_group"]) in shared
        ]
    comparison = sorted((r for r in found if r is not None), key=lambda r: (r.resource_id, r.team or "", r.id))
    recs = [r for r in comparison if r.monthly_savings_usd > 0]
    moves, withheld = repatriation.allocate(resource_hours, groups, specs, params, now)
    return sorted(recs + moves, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld, comparison


def gpu_specs(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    rows = con.execute("SELECT gpu_model, memory_gib, fp16_tflops FROM gpu_specs").fetchall()
    return {m: {"memory_gib": mem, "fp16_tflops": fp16} for m, mem, fp16 in rows}


def analyse_warehouse(
    con: duckdb.DuckDBPyConnection, settings: dict | OnpremVsCloudParams | None = None
) -> tuple[list[Recommendation], list[Withheld], list[Recommendation]]:
    params = settings if isinstance(settings, OnpremVsCloudParams) else OnpremVsCloudParams.from_config(settings)
    found = _findings(load(con), params)
    return found.recommendations, found.withheld, found.comparison


@dataclass(frozen=True)
class OnpremInputs:
    """What onprem_vs_cloud reads: the on-prem groups' usage and cost figures, the cloud GPU offers, the
    GPU specs and every GPU resource-hour (the repatriation candidates); all empty without on-prem usage."""

    usage: pl.DataFrame
    offers: pl.DataFrame
    specs: dict[str, dict]
    resource_hours: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: OnpremSettings | None = None) -> OnpremInputs:
    usage = queries.onprem_gpu_usage(con)
    if usage.is_empty():
        return OnpremInputs(usage, pl.DataFrame(), {}, pl.DataFrame())
    return OnpremInputs(usage, queries.cloud_gpu_offers(con), gpu_specs(con), run_reads.resource_hours(con))


def findings(inputs: OnpremInputs, settings: OnpremSettings) -> Findings:
    """The recommend step: verdicts, the ones that save money, and the repatriations that fit; no connection."""
    return _findings(inputs, OnpremVsCloudParams(onprem_target_utilisation=settings.onprem_target_utilisation))


def _findings(inputs: OnpremInputs, params: OnpremVsCloudParams) -> Findings:
    if inputs.usage.is_empty():
        return Findings()
    recs, withheld, comparison = analyse(inputs.usage, inputs.offers, inputs.specs, inputs.resource_hours, params)
    return Findings(recs, withheld, comparison)


def recommend_from_warehouse(con: duckdb.DuckDBPyConnection, settings: dict | None = None) -> list[Recommendation]:
    return analyse_warehouse(con, settings)[0]
