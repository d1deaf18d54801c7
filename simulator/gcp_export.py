"""The demo fleet's Google Cloud bill as a BigQuery billing export extract: nested JSONL per invoice month.

The simulator (:mod:`simulator.demo_fleet`) builds every cost line as a dict of FOCUS values; here the GCP
lines become rows of the detailed usage cost export (``gcp_billing_export_resource_v1_*``) as
BigQuery's ``NEWLINE_DELIMITED_JSON`` extract writes them to Cloud Storage: nested ``service``,
``sku``, ``project``, ``location``, ``resource``, ``usage`` and ``invoice`` records, ``labels`` and
``system_labels`` as ``{key, value}`` lists (the machine type in ``compute.googleapis.com/machine_spec``),
an empty ``credits`` list, ``cost`` and ``cost_at_list`` as FLOAT64, timestamps as ``… UTC``.
``gpufinops`` reads them back with ``gcp_billing_export`` (``path``). Money goes in as the shortest
float text of decimals of at most 15 significant digits, so it reads back exactly.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from gpufinops.simulator.month_files import write_months

EXPORT_TABLE = "gcp_billing_export_resource_v1_01A2B3_C4D5E6_F7A8B9"
SERVICE_IDS = {"Compute Engine": "6F81-5844-456A", "Networking": "E505-1604-58F8"}
COUNTRIES = {"us": "US", "europe": "NL"}
EXPORT_DELAY = timedelta(hours=5)  # a row is exported a few hours after its usage hour ends
MACHINE_SPEC = "compute.googleapis.com/machine_spec"
# FOCUS ConsumedUnit -> (usage.unit, usage.pricing_unit, usage units per pricing unit)
UNITS = {
    "Hours": ("seconds", "hour", Decimal(3600)),
    "GB-Mo": ("byte-seconds", "gibibyte month", Decimal(2**30 * 730 * 3600)),
    "GB": ("bytes", "gibibyte", Decimal(2**30)),
}


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _project_number(project_id: str) -> str:
    return str(int(hashlib.sha256(project_id.encode()).hexdigest()[:10], 16))


def export_row(row: dict) -> dict:
    """One FOCUS-like demo line as a detailed-export row."""
    unit, pricing_unit, per = UNITS.get(row.get("ConsumedUnit") or row.get("PricingUnit") or "", ("", "", Decimal(1)))
    quantity = row.get("ConsumedQuantity")
    tags = json.loads(row["Tags"]) if row.get("Tags") else {}
    system = [{"key": MACHINE_SPEC, "value": row["x_InstanceType"]}] if row.get("x_InstanceType") else []
    region = row["RegionId"]
    return {
        "billing_account_id": row["BillingAccountId"],
        "service": {"id": SERVICE_IDS.get(row["ServiceName"], "6F81-5844-456A"), "description": row["ServiceName"]},
        "sku": {"id": row.get("SkuId"), "description": row["ChargeDescription"]},
        "usage_start_time": _time(row["ChargePeriodStart"]),
        "usage_end_time": _time(row["ChargePeriodEnd"]),
        "project": {
            "id": row["SubAccountId"],
            "number": _project_number(row["SubAccountId"]),
            "name": row["SubAccountName"],
            "labels": [],
            "ancestry_numbers": f"/{_project_number('acme')}/",
        },
        "labels": [{"key": k, "value": v} for k, v in sorted(tags.items())],
        "system_labels": system,
        "location": {
            "location": region,
            "country": COUNTRIES.get(region.split("-")[0], "US"),
            "region": region,
            "zone": row.get("AvailabilityZone"),
        },
        "resource": {"name": row.get("ResourceId"), "global_name": row.get("ResourceId")},
        "export_time": _time(row["ChargePeriodEnd"] + EXPORT_DELAY),
        "cost": _float(row["BilledCost"]),
        "currency": row["BillingCurrency"],
        "currency_conversion_rate": 1.0,
        "usage": {
            "amount": _float(quantity * per) if quantity is not None else None,
            "unit": unit,
            "amount_in_pricing_units": _float(quantity),
            "pricing_unit": pricing_unit,
        },
        "credits": [],
        "invoice": {"month": row["BillingPeriodStart"].strftime("%Y%m")},
        "cost_type": "regular",
        "cost_at_list": _float(row.get("ListCost")),
    }


def write_billing_export(folder: Path, rows: list[dict]) -> Path:
    """One ``<table>-YYYYMM-000000000000.json`` per invoice month under ``folder``; returns folder."""
    by_month: dict[str, list[str]] = {}
    for row in rows:
        line = json.dumps(export_row(row), sort_keys=True, separators=(",", ":"))
        by_month.setdefault(row["BillingPeriodStart"].strftime("%Y%m"), []).append(line)
    files = {
        f"{EXPORT_TABLE}-{month}-000000000000.json": ("\n".join(lines) + "\n").encode()
        for month, lines in by_month.items()
    }
    return write_months(folder, f"{EXPORT_TABLE}-*.json", files)
