"""The demo fleet's AWS bill as a real CUR 2.0 Data Export: Parquet + manifest per billing month.

The simulator (:mod:`simulator.demo_fleet`) builds every cost line as a dict of FOCUS values; here the AWS
lines become CUR 2.0 line items (``line_item_*``, ``pricing_*``, the ``product`` and ``resource_tags``
maps, Reserved Instance ``DiscountedUsage`` + ``RIFee``) written in the bucket layout AWS delivers
(``<export>/data|metadata/BILLING_PERIOD=YYYY-MM/``), which ``gpufinops`` reads back with ``aws_cur``
in local-directory mode. Money goes into the CUR's ``double`` columns from decimals of at most 15
significant digits, so it reads back exactly.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.ingest.aws.aws_cur2_format import conform, write_delivery

EXPORT = "gpufinops-demo"
USAGE_TYPE_REGION = {"us-east-1": "USE1", "us-west-2": "USW2"}
PRODUCT_FAMILY = {"Compute": "Compute Instance", "Storage": "Storage", "Networking": "Data Transfer"}
PRODUCT_CODE = {"AWS Data Transfer": "AWSDataTransfer"}
UNITS = {"Hours": "Hrs"}


def _ri_arn(line: dict) -> str:
    return f"arn:aws:ec2:{line['RegionId']}:{line['SubAccountId']}:reserved-instances/{line['CommitmentDiscountId']}"


def aws_reserved_instance(m, clock, running: np.ndarray, compute: list[dict]) -> list[dict]:
    """Turn a reserved machine's hours into DiscountedUsage lines; return the RIFee line of each month.

    The RI is billed for every hour of the window (``RIFee``); hours the machine did not run are its
    unused part, which is the fee line's effective cost.
    """
    if not compute:
        return []
    rate = compute[0]["EffectiveCost"]
    for line in compute:
        line.update(
            _LineItemType="DiscountedUsage",
            BilledCost=Decimal(0),
            _ReservationArn=_ri_arn(line),
            ChargeDescription=f"Linux/UNIX (Amazon VPC), {m.spec.instance_type} reserved instance applied",
        )
    fees = []
    hours = np.arange(clock.hours)
    stamps = [clock.start + timedelta(hours=int(h)) for h in hours]
    months = sorted({(t.year, t.month) for t in stamps})
    for year, month in months:
        in_month = np.array([(t.year, t.month) == (year, month) for t in stamps])
        window_hours, used_hours = int(in_month.sum()), int((in_month & running.astype(bool)).sum())
        first = (
            next(
                line
                for line in compute
                if (line["ChargePeriodStart"].year, line["ChargePeriodStart"].month) == (year, month)
            )
            if used_hours
            else compute[0]
        )
        start = stamps[int(np.flatnonzero(in_month)[0])]
        fee, unused = rate * window_hours, rate * (window_hours - used_hours)
        fees.append(
            {
                **first,
                "_LineItemType": "RIFee",
                "ChargeCategory": "Purchase",
                "ChargeFrequency": "Recurring",
                "ChargePeriodStart": start,
                "ChargePeriodEnd": start + timedelta(hours=window_hours),
                "ChargeDescription": f"USD {format(rate.normalize(), 'f')} hourly fee per Linux/UNIX (Amazon VPC), "
                f"{m.spec.instance_type} instance",
                "ResourceId": first["_ReservationArn"],
                "PricingCategory": None,
                "x_GpuCount": None,
                "x_GpuModel": None,
                "x_InstanceType": None,
                "BilledCost": fee,
                "EffectiveCost": unused,
                "ListCost": fee,
                "ContractedCost": fee,
                "ConsumedQuantity": Decimal(window_hours),
                "PricingQuantity": Decimal(window_hours),
                "_UnusedFee": unused,
            }
        )
    return fees


def _money(value) -> float | None:
    return None if value is None else float(value)


def _line_item(row: dict) -> dict:
    kind = row.get("_LineItemType", "Usage")
    region, category = row["RegionId"], row.get("ServiceCategory")
    instance_type = row.get("x_InstanceType")
    prefix = USAGE_TYPE_REGION.get(region, region)
    if row.get("_UsageType"):
        usage_type = row["_UsageType"]
    elif kind == "RIFee":
        usage_type = f"{prefix}-HeavyUsage:{row['ChargeDescription'].rsplit(', ', 1)[1].split()[0]}"
    elif instance_type:
        usage_type = f"{prefix}-{'SpotUsage' if row['PricingCategory'] == 'Dynamic' else 'BoxUsage'}:{instance_type}"
    elif category == "Storage":
        usage_type = f"{prefix}-EBS:VolumeUsage.gp3"
    else:
        usage_type = f"{prefix}-DataTransfer-Out-Bytes"
    product = {"product_name": row["ServiceName"], "region": region}
    if instance_type:
        # no `gpu` attribute, as in many real CUR 2.0 product maps: the GPU count comes from the catalogue
        # (aws_pricing) or, without one, the shipped inventory (warehouse/data/gpu_instance_types.csv)
        product.update(instance_type=instance_type, operating_system="Linux", tenancy="Shared")
    tags = {f"user_{k}": v for k, v in json.loads(row["Tags"]).items()} if row.get("Tags") else None  # CUR 2.0 keys
    usage_like = kind in ("Usage", "DiscountedUsage")
    return {
        "bill_bill_type": "Anniversary",
        "bill_billing_entity": "AWS",
        "bill_invoicing_entity": row["InvoiceIssuerName"],
        "bill_invoice_id": f"{row['BillingPeriodStart']:%Y%m}{row['BillingAccountId'][-6:]}",  # a closed month's invoice
        "bill_payer_account_id": row["BillingAccountId"],
        "bill_payer_account_name": row["BillingAccountName"],
        "bill_billing_period_start_date": row["BillingPeriodStart"].replace(tzinfo=None),
        "bill_billing_period_end_date": row["BillingPeriodEnd"].replace(tzinfo=None),
        "line_item_usage_account_id": row["SubAccountId"],
        "line_item_usage_account_name": row["SubAccountName"],
        "line_item_line_item_type": kind,
        "line_item_legal_entity": row["PublisherName"],
        "line_item_usage_start_date": row["ChargePeriodStart"].replace(tzinfo=None),
        "line_item_usage_end_date": row["ChargePeriodEnd"].replace(tzinfo=None),
        "line_item_product_code": PRODUCT_CODE.get(row["ServiceName"], "AmazonEC2"),
        "line_item_usage_type": usage_type,
        "line_item_operation": "RunInstances" if instance_type else None,
        "line_item_availability_zone": row.get("AvailabilityZone") if kind != "RIFee" else None,
        "line_item_resource_id": row.get("ResourceId"),
        "line_item_currency_code": row["BillingCurrency"],
        "line_item_line_item_description": row["ChargeDescription"],
        "line_item_usage_amount": _money(row.get("ConsumedQuantity")),
        "line_item_unblended_cost": _money(row["BilledCost"]),
        "line_item_unblended_rate": _money(row.get("ContractedUnitPrice")) if kind == "Usage" else 0.0,
        "pricing_public_on_demand_cost": _money(row.get("ListCost")) if usage_like else None,
        "pricing_public_on_demand_rate": _money(row.get("ListUnitPrice")) if usage_like else None,
        "pricing_unit": UNITS.get(row.get("PricingUnit") or "", row.get("PricingUnit")),
        "pricing_term": "Reserved"
        if kind in ("DiscountedUsage", "RIFee")
        else ("Spot" if row.get("PricingCategory") == "Dynamic" else "OnDemand"),
        "pricing_rate_code": row.get("SkuPriceId"),
        "product_sku": row.get("SkuId"),
        "product_instance_type": instance_type,
        "product_region_code": region,
        "product_location": row.get("RegionName"),
        "product_product_family": PRODUCT_FAMILY.get(category or "") if kind != "RIFee" else "Compute Instance",
        "product_servicecode": PRODUCT_CODE.get(row["ServiceName"], "AmazonEC2"),
        "reservation_reservation_a_r_n": row.get("_ReservationArn"),
        "reservation_effective_cost": _money(row["EffectiveCost"]) if kind == "DiscountedUsage" else None,
        "reservation_unused_recurring_fee": _money(row.get("_UnusedFee")),
        "reservation_unused_amortized_upfront_fee_for_billing_period": 0.0 if kind == "RIFee" else None,
        "product": list(product.items()),
        "resource_tags": list(tags.items()) if tags else None,
    }


def write_cur2(root: Path, rows: list[dict]) -> Path:
    """Write one CUR 2.0 delivery per billing month under ``root`` (the bucket's prefix); returns root."""
    by_month: dict[str, list[dict]] = {}
    for row in rows:
        by_month.setdefault(row["BillingPeriodStart"].strftime("%Y-%m"), []).append(_line_item(row))
    for kind in ("data", "metadata"):
        folder = root / EXPORT / kind
        for stale in folder.glob("BILLING_PERIOD=*") if folder.exists() else []:
            if stale.name.removeprefix("BILLING_PERIOD=") not in by_month:
                shutil.rmtree(stale)
    for month, items in sorted(by_month.items()):
        columns = {name: [item[name] for item in items] for name in items[0]}
        write_delivery(root, EXPORT, month, [conform(columns)], bucket="acme-billing", prefix="cur", execution_id=None)
    return root
