"""A private cluster's FOCUS line items, per GPU and hour: hardware, energy and facility lines priced by
``onprem_cost.hourly_gpu_cost`` from the hour's measured power or utilisation, tagged with how (the
semantics are ``onprem.py``'s docstring; the window and the days to cost are decided there).
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa

from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.onprem.onprem_cost import (
    UTIL_STEP,
    WATT_STEP,
    Cluster,
    GpuHourCost,
    NodeGroup,
    hourly_gpu_cost,
    quantity,
)
from gpufinops.warehouse import cost_schema


@functools.lru_cache(maxsize=1 << 16)
def _cost(group: NodeGroup, util_pct: Decimal | None, power_w: Decimal | None) -> GpuHourCost:
    return hourly_gpu_cost(group, util_pct, power_w)


def _month_bounds(hour: datetime) -> tuple[datetime, datetime]:
    start = hour.replace(day=1, hour=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


class _Lines:
    """Column lists of the line items being built (only the columns that vary; the rest are constant)."""

    VARYING = (
        "ChargePeriodStart",
        "ChargePeriodEnd",
        "BillingPeriodStart",
        "BillingPeriodEnd",
        "ResourceId",
        "ResourceName",
        "SkuId",
        "SkuPriceId",
        "ChargeDescription",
        "BilledCost",
        "EffectiveCost",
        "InvoiceId",
        "x_InstanceType",
        "x_GpuModel",
        "x_Team",
        "Tags",
    )

    def __init__(self) -> None:
        self.cols: dict[str, list] = {name: [] for name in self.VARYING}

    def add(self, **values: Any) -> None:
        for name in self.VARYING:
            self.cols[name].append(values[name])

    def __len__(self) -> int:
        return len(self.cols["SkuId"])

    def table(self, cluster: Cluster, run_id: str) -> pa.Table:
        n = len(self)
        effective = self.cols["EffectiveCost"]
        constant = {
            "BillingAccountId": cluster.billing_account_id,
            "BillingAccountName": cluster.billing_account_name,
            "BillingCurrency": "USD",
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "InvoiceIssuerName": "onprem",
            "ProviderName": "onprem",
            "PublisherName": "onprem",
            "PricingCategory": "Committed",
            "PricingUnit": "Hours",
            "ConsumedUnit": "Hours",
            "PricingCurrency": "USD",
            "RegionId": cluster.region,
            "RegionName": cluster.region,
            "ResourceType": "GPU",
            "ServiceCategory": "Compute",
            "ServiceName": cluster.service_name,
            "ServiceSubcategory": "Other (Compute)",
            "SubAccountId": cluster.name,
            "SubAccountName": cluster.name,
            "x_Source": cluster.source,
            "x_IngestRunId": run_id,
        }
        arrays = []
        for f in cost_schema.COST_LINE_ITEMS:
            if f.name in self.cols:
                arrays.append(pa.array(self.cols[f.name], type=f.type))
            elif f.name in constant:
                arrays.append(pa.array([constant[f.name]] * n, type=f.type))
            elif f.name in (
                "ListCost",
                "ContractedCost",
                "ListUnitPrice",
                "ContractedUnitPrice",
                "PricingCurrencyEffectiveCost",
            ):
                arrays.append(pa.array(effective, type=f.type))
            elif f.name in ("ConsumedQuantity", "PricingQuantity"):
                arrays.append(pa.array([Decimal(1)] * n, type=f.type))
            elif f.name == "x_GpuCount":
                arrays.append(pa.array([1] * n, type=f.type))
            else:
                arrays.append(pa.nulls(n, f.type))
        return pa.Table.from_arrays(arrays, schema=cost_schema.COST_LINE_ITEMS)


def _hours(days: list[str], first: datetime, last: datetime) -> list[datetime]:
    hours = []
    for day in days:
        start = datetime.combine(date.fromisoformat(day), datetime.min.time(), UTC)
        hours += [h for h in (start + timedelta(hours=i) for i in range(24)) if first <= h <= last]
    return hours


def build_lines(
    cluster: Cluster,
    days: list[str],
    first: datetime,
    last: datetime,
    metrics: dict[tuple[str, datetime], list],
    run_id: str,
) -> pa.Table:
    """Every GPU's line items for the window's hours in ``days``."""
    lines = _Lines()
    teams, node_tags = dict(cluster.node_teams), dict(cluster.node_tags)
    hours = _hours(days, first, last)
    for group in cluster.groups:
        months = _plain(group.amortisation_months)
        n = group.gpus_per_node
        descriptions = {
            "hardware": f"{group.gpu_model} GPU hardware amortised over {months} months "
            f"(GPU + 1/{n} of the node's server, network and storage)",
            "energy": f"{group.gpu_model} GPU energy (GPU draw + 1/{n} of the host draw) x PUE {_plain(group.pue)} "
            f"at {_plain(group.usd_per_kwh)} USD/kWh",
            "facility": f"Facility and operations, 1/{n} of a node-month",
        }
        model_tags = {
            "tdp_w": _plain(group.tdp_w),
            "idle_w": _plain(group.idle_w),
            "host_w_per_gpu": _plain(group.host_w / n),
            "pue": _plain(group.pue),
            "usd_per_kwh": _plain(group.usd_per_kwh),
            "gpu_price_source": group.gpu_price_source,
        }
        for node in group.nodes:
            static_tags = {
                "cluster": cluster.name,
                "node_group": group.name,
                **dict(group.tags),
                **dict(node_tags.get(node, ())),
            }
            config_team = teams.get(node, group.team)
            for hour in hours:
                gpus = metrics.get((node, hour), [])
                if len(gpus) > n:
                    raise IngestError(
                        f"{cluster.source}: config key sources.{cluster.source}.node_groups "
                        f"({group.name}).gpus_per_node is {n} but node {node} reported {len(gpus)} GPUs at "
                        f"{hour:%Y-%m-%d %H:00} UTC (two metric sources for one node? set metrics_source)"
                    )
                bp_start, bp_end = _month_bounds(hour)
                for slot in range(n):
                    uuid, util, power, metric_team = gpus[slot] if slot < len(gpus) else (None, None, None, None)
                    util_pct, power_w = quantity(util, UTIL_STEP), quantity(power, WATT_STEP)
                    cost = _cost(group, util_pct, power_w)
                    team = metric_team or config_team
                    tags = {**static_tags, "gpu_slot": str(slot), "gpu_uuid": uuid, "team": team}
                    common = dict(
                        ChargePeriodStart=hour,
                        ChargePeriodEnd=hour + timedelta(hours=1),
                        BillingPeriodStart=bp_start,
                        BillingPeriodEnd=bp_end,
                        ResourceId=node,
                        InvoiceId=f"{cluster.name}-{bp_start:%Y-%m}",
                        ResourceName=f"{node}/gpu{slot}",
                        x_InstanceType=group.name,
                        x_GpuModel=group.gpu_model,
                        x_Team=team,
                    )
                    energy_tags = {
                        **tags,
                        "cost_component": "energy",
                        "power_basis": cost.power_basis,
                        "power_w": _plain(cost.power_w),
                        "util_pct": None if util_pct is None else _plain(util_pct),
                        **model_tags,
                    }
                    parts = [
                        ("hardware", cost.hardware, Decimal(0), {**tags, "cost_component": "hardware"}),
                        ("energy", cost.energy, cost.energy, energy_tags),
                    ]
                    if cost.facility:
                        parts.append(("facility", cost.facility, cost.facility, {**tags, "cost_component": "facility"}))
                    for component, effective, billed, line_tags in parts:
                        sku = f"{cluster.name}/{group.name}/{component}"
                        lines.add(
                            **common,
                            SkuId=sku,
                            SkuPriceId=sku,
                            ChargeDescription=descriptions[component],
                            BilledCost=billed,
                            EffectiveCost=effective,
                            Tags=json.dumps({k: v for k, v in line_tags.items() if v is not None}, sort_keys=True),
                        )
    return lines.table(cluster, run_id)
