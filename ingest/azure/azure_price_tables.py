"""The tables the models price from, filled from ``azure_prices``' catalogue rows, as ``gcp_catalog`` fills them
from Google's: what spot_mix, commitment, gpu_count and gpu_type read (warehouse/queries/purchasing.py,
warehouse/queries/rightsizing.py), so an Azure resource is priced from Azure's own prices.

* ``instance_types``: each GPU size's Linux pay-as-you-go price per hour with its GPUs, vCPUs and memory from
  the Azure GPU inventory (warehouse/data/azure_gpu_sizes.csv); a size with a fraction of a GPU (NVadsA10 v5)
  is left out: the rightsizing models offer whole GPUs;
* ``price_history``: every price as a price point from its ``effectiveStartDate``, per hour: ``on_demand``,
  ``spot``, ``commit_1y`` / ``commit_3y`` (a Reservation, its whole-term price already over the term's hours),
  ``savings_plan_1y`` / ``savings_plan_3y`` (the savings-plan hourly rate).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

SOURCE = "azure:retail-prices"
HISTORY_PRICE = Decimal("1E-8")  # price_history.price and instance_types' price are DECIMAL(18, 8)
# the catalogue's usage_type -> price_history's pricing (the commitment model reads commit_1y / commit_3y)
PRICING = {
    "on_demand": "on_demand",
    "spot": "spot",
    "reservation_1y": "commit_1y",
    "reservation_3y": "commit_3y",
    "savings_plan_1y": "savings_plan_1y",
    "savings_plan_3y": "savings_plan_3y",
}


def instance_rows(catalog: list[dict[str, Any]], sizes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``instance_types`` row per GPU size and region priced on demand in USD."""
    out = []
    for row in catalog:
        size = sizes.get(row["sku_id"])
        if row["usage_type"] != "on_demand" or row["currency"] != "USD" or size is None:
            continue
        if (size["gpu_fraction"] or 1) < 1:
            continue
        out.append(
            {
                "provider": "azure",
                "region": row["region"],
                "instance_type": row["sku_id"],
                "gpu_model": size["gpu_model"],
                "gpu_count": size["gpu_count"],
                "gpu_memory_gib": size["gpu_memory_gib"],
                "vcpus": size["vcpus"],
                "memory_gib": size["memory_gib"],
                "on_demand_usd_per_hour": row["unit_price"].quantize(HISTORY_PRICE),
                "source": SOURCE,
                "updated_at": row["effective_time"],
            }
        )
    return out


def history_rows(catalog: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """One ``price_history`` point per size, region and pricing, per hour in the answer's currency."""
    return [
        {
            "provider": "azure",
            "region": row["region"],
            "instance_type": row["sku_id"],
            "pricing": PRICING[row["usage_type"]],
            "effective_from": row["effective_time"],
            "price": row["unit_price"].quantize(HISTORY_PRICE),
            "currency": row["currency"],
            "source": SOURCE,
            "ingest_run_id": run_id,
        }
        for row in catalog
        if row["usage_type"] in PRICING
    ]
