"""Cloud Billing Catalog SKUs → catalogue rows and machine-type prices (pure functions, no client).

A SKU has ``pricingInfo[]`` (each effective from its ``effectiveTime``) whose ``tieredRates[]`` hold a
``unitPrice`` as ``units`` (int64) + ``nanos`` (10⁻⁹): read as an exact Decimal, never a float. The
price stays in the currency the API answered in; a unit or currency this module does not know is
kept and flagged. GPU SKUs and the a2/a3/g2 vCPU and RAM SKUs are composed into machine-type prices
per region and pricing (on_demand, spot, commit_1y, commit_3y): see :mod:`ingest.gcp.gcp_machines`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from gpufinops.ingest.gcp.gcp_export_mapping import GPU_SKU_MODELS, GPU_SKU_PATTERN
from gpufinops.ingest.gcp.gcp_machines import SHAPES

COMPUTE_SERVICE = "services/6F81-5844-456A"
USAGE_PRICING = {"OnDemand": "on_demand", "Preemptible": "spot", "Commit1Yr": "commit_1y", "Commit3Yr": "commit_3y"}
# the unit each kept resource group is priced in (the Catalog's usageUnit)
EXPECTED_UNITS = {"GPU": "h", "CPU": "h", "RAM": "GiBy.h"}
KNOWN_UNITS = {"h", "GiBy.h", "GiBy.mo", "GiBy", "By", "mo", "d", "s", "count", "TiBy.mo", "GiBy.d"}
FAMILY_SKU = re.compile(r"(?i)^(?:commitment v1: |spot preemptible )?(a2|a3|g2) (?:instance )?(core|cpu|ram)\b")
EXCLUDED = re.compile(r"(?i)sole tenancy|custom|extended|premium|reserved|dws|flex|calendar")
GPU_SKU = re.compile("(?i)" + GPU_SKU_PATTERN)
MODELS = dict(GPU_SKU_MODELS)
CURRENCY_CODE = re.compile(r"^[A-Z]{3}$")


@dataclass(frozen=True)
class Price:
    component: str  # GPU SKU key ("a100", "h100 80gb", "l4") or "<family> core" / "<family> ram"
    pricing: str  # on_demand | spot | commit_1y | commit_3y
    region: str
    price: Decimal
    currency: str
    effective: datetime


def money(units: Any, nanos: Any) -> Decimal:
    """units + nanos × 10⁻⁹, exactly."""
    return Decimal(int(units or 0)) + Decimal(int(nanos or 0)).scaleb(-9)


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    # proto-plus DatetimeWithNanoseconds is a datetime subclass: keep microseconds, drop the subclass
    value = datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo or UTC,
    )
    return value.astimezone(UTC)


def component(description: str, group: str) -> str | None:
    """The machine-pricing component a SKU prices, or None for SKUs of other machines."""
    if EXCLUDED.search(description):
        return None
    if group == "GPU":
        m = GPU_SKU.search(description)
        return m.group(1).lower() if m else None
    m = FAMILY_SKU.search(description)
    if m and group in ("CPU", "RAM"):
        return f"{m.group(1).lower()} {'ram' if m.group(2).lower() == 'ram' else 'core'}"
    return None


def wanted(sku: Any) -> bool:
    """GPU SKUs, and the vCPU/RAM SKUs of the GPU machine families."""
    group = sku.category.resource_group
    if group == "GPU":
        return True
    return group in ("CPU", "RAM") and FAMILY_SKU.search(sku.description) is not None


def _flag(unit: str, group: str, currency: str, requested: str | None) -> str | None:
    problems = []
    if unit not in KNOWN_UNITS:
        problems.append(f"unknown unit {unit!r}")
    elif group in EXPECTED_UNITS and unit != EXPECTED_UNITS[group]:
        problems.append(f"unit {unit!r} where {EXPECTED_UNITS[group]!r} was expected")
    if not CURRENCY_CODE.match(currency or ""):
        problems.append(f"unknown currency {currency!r}")
    elif requested and currency != requested:
        problems.append(f"currency {currency} where {requested} was requested")
    return "; ".join(problems) or None


def catalog_rows(skus: list[Any], requested_currency: str | None, source: str, run_id: str) -> list[dict]:
    """One price_catalog row per SKU × service region × pricing info × tier."""
    rows = []
    for sku in skus:
        category = sku.category
        m = GPU_SKU.search(sku.description) if category.resource_group == "GPU" else None
        gpu_model = MODELS.get(m.group(1).lower()) if m else None
        for info in sku.pricing_info:
            expression = info.pricing_expression
            effective = _utc(info.effective_time)
            for tier in expression.tiered_rates:
                currency = tier.unit_price.currency_code
                base = {
                    "provider": "gcp",
                    "service_id": COMPUTE_SERVICE.split("/")[1],
                    "sku_id": sku.sku_id,
                    "description": sku.description,
                    "resource_family": category.resource_family,
                    "resource_group": category.resource_group,
                    "usage_type": category.usage_type,
                    "gpu_model": gpu_model,
                    "usage_unit": expression.usage_unit,
                    "currency": currency,
                    "start_usage_amount": Decimal(repr(float(tier.start_usage_amount))),
                    "unit_price": money(tier.unit_price.units, tier.unit_price.nanos),
                    "effective_time": effective,
                    "flag": _flag(expression.usage_unit, category.resource_group, currency, requested_currency),
                    "source": source,
                    "ingest_run_id": run_id,
                }
                rows += [{**base, "region": region} for region in (sku.service_regions or ["global"])]
    return rows


def component_prices(rows: list[dict]) -> dict[tuple[str, str, str], Price]:
    """(region, pricing, component) -> the newest first-tier, unflagged price."""
    prices: dict[tuple[str, str, str], Price] = {}
    for r in rows:
        pricing = USAGE_PRICING.get(r["usage_type"])
        part = component(r["description"], r["resource_group"])
        if pricing is None or part is None or r["flag"] or r["start_usage_amount"] != 0:
            continue
        key = (r["region"], pricing, part)
        price = Price(part, pricing, r["region"], r["unit_price"], r["currency"], r["effective_time"])
        if key not in prices or price.effective > prices[key].effective:
            prices[key] = price
    return prices


def machine_prices(prices: dict[tuple[str, str, str], Price]) -> list[dict]:
    """Every machine type whose GPU, core and RAM prices exist in a region, per pricing (one currency)."""
    out = []
    regions = sorted({k[0] for k in prices})
    for region in regions:
        for pricing in USAGE_PRICING.values():
            for name, shape in SHAPES.items():
                found = [
                    prices.get((region, pricing, shape.gpu_sku)),
                    prices.get((region, pricing, f"{shape.family} core")),
                    prices.get((region, pricing, f"{shape.family} ram")),
                ]
                parts = [p for p in found if p is not None]
                if len(parts) < len(found) or len({p.currency for p in parts}) != 1:
                    continue
                gpu, core, ram = parts
                total = gpu.price * shape.gpu_count + core.price * shape.vcpus + ram.price * shape.memory_gib
                out.append(
                    {
                        "region": region,
                        "instance_type": name,
                        "pricing": pricing,
                        "price": total,
                        "currency": gpu.currency,
                        "effective_from": max(p.effective for p in parts),
                        "shape": shape,
                    }
                )
    return out
