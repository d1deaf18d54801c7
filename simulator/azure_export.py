"""The demo's Azure subscription's bill as a Cost Management export of the ``FocusCost`` dataset (1.0r2), as a
copy of its storage container holds it.

Per month one run folder ``<root folder>/<export>/<YYYYMMDD-YYYYMMDD>/<run time>/<run id>/`` with the run's
``manifest.json`` (manifestVersion 2024-04-01, Microsoft's documented example with a FocusCost run's values) and
one CSV partition whose columns are the dataset's 96, in the export's order (the schema Microsoft's FinOps toolkit
reads them with, ``focuscost_1.0r2.json``; MIT). Rows are daily, as Cost Management's are. The machines and their
prices are :mod:`simulator.demo_azure`'s; ``gpufinops`` reads the folder back with ``azure_cost_export``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Protocol

from gpufinops.simulator.month_files import write_if_changed


class Node(Protocol):
    """What a bill row reads of a VM (simulator/demo_azure.py's ``Node``)."""

    @property
    def size(self) -> str: ...
    @property
    def pricing(self) -> str: ...  # on_demand | spot
    @property
    def instance(self) -> int | None: ...  # the scale-set instance id; None: a standalone VM
    @property
    def resource_group(self) -> str: ...
    @property
    def vm_name(self) -> str: ...
    @property
    def billed_resource(self) -> str: ...
    def tags(self) -> dict[str, str]: ...


SUBSCRIPTION = "5f1c9a2e-7b3d-4e8f-9a61-2c4d8e0f1a37"
SUBSCRIPTION_NAME = "gpu-prod"
BILLING_ACCOUNT = ("/providers/Microsoft.Billing/billingAccounts/70123456", "70123456", "Acme GPU")
REGION, REGION_NAME, SKU_REGION = "eastus", "East US", "US East"
EXPORT, ROOT_FOLDER = "gpu-focus-cost", "gpufinops"  # the export's name and root folder in the container
DATA_VERSION = "1.0r2"

# The FocusCost 1.0r2 export's columns, in its order (Microsoft FinOps toolkit, focuscost_1.0r2.json, MIT).
COLUMNS = (
    "BilledCost BillingAccountId BillingAccountName BillingAccountType BillingCurrency BillingPeriodEnd "
    "BillingPeriodStart ChargeCategory ChargeClass ChargeDescription ChargeFrequency ChargePeriodEnd "
    "ChargePeriodStart CommitmentDiscountCategory CommitmentDiscountId CommitmentDiscountName "
    "CommitmentDiscountStatus CommitmentDiscountType ConsumedQuantity ConsumedUnit ContractedCost "
    "ContractedUnitPrice EffectiveCost InvoiceIssuerName ListCost ListUnitPrice PricingCategory PricingQuantity "
    "PricingUnit ProviderName PublisherName RegionId RegionName ResourceId ResourceName ResourceType "
    "ServiceCategory ServiceName SkuId SkuPriceId SubAccountId SubAccountName SubAccountType Tags x_AccountId "
    "x_AccountName x_AccountOwnerId x_BilledCostInUsd x_BilledUnitPrice x_BillingAccountId x_BillingAccountName "
    "x_BillingExchangeRate x_BillingExchangeRateDate x_BillingProfileId x_BillingProfileName "
    "x_ContractedCostInUsd x_CostAllocationRuleName x_CostCenter x_CustomerId x_CustomerName "
    "x_EffectiveCostInUsd x_EffectiveUnitPrice x_InvoiceId x_InvoiceIssuerId x_InvoiceSectionId "
    "x_InvoiceSectionName x_ListCostInUsd x_PartnerCreditApplied x_PartnerCreditRate x_PricingBlockSize "
    "x_PricingCurrency x_PricingSubcategory x_PricingUnitDescription x_PublisherCategory x_PublisherId "
    "x_ResellerId x_ResellerName x_ResourceGroupName x_ResourceType x_ServicePeriodEnd x_ServicePeriodStart "
    "x_SkuDescription x_SkuDetails x_SkuIsCreditEligible x_SkuMeterCategory x_SkuMeterId x_SkuMeterName "
    "x_SkuMeterSubcategory x_SkuOfferId x_SkuOrderId x_SkuOrderName x_SkuPartNumber x_SkuRegion "
    "x_SkuServiceFamily x_SkuTerm x_SkuTier"
).split()


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")  # 1.0r2 writes seconds


def _month(t: datetime) -> tuple[datetime, datetime]:
    first = t.replace(day=1, hour=0)
    return first, (first + timedelta(days=32)).replace(day=1)


def bill_row(node: Node, day: datetime, hourly: Decimal, payg: Decimal, vcpus: int) -> dict[str, str]:
    """One day of one VM's compute usage as a FocusCost 1.0r2 row (billed at ``hourly``, listed at ``payg``)."""
    cost, listed = hourly * 24, payg * 24
    spot = node.pricing == "spot"
    meter = node.size.removeprefix("Standard_").replace("_", " ") + (" Spot" if spot else "")
    series = node.size.removeprefix("Standard_").split("_", 1)[-1].replace("_", " ") + " Series"
    start, end = _month(day)
    account_id, account_number, account_name = BILLING_ACCOUNT
    sku = hashlib.sha256(f"azure-sku|{node.size}|{REGION}".encode()).hexdigest()[:12].upper()
    meter_id = hashlib.sha256(f"azure-meter|{meter}|{REGION}".encode()).hexdigest()
    details = {
        "UsageType": "ComputeHR",
        "ImageType": "Canonical",
        "ServiceType": node.size,
        "VMName": node.vm_name,
        "VCPUs": vcpus,
    }
    if node.instance is not None:
        details["VMProperties"] = "Microsoft.AKS.Compute.AKS.Linux.Billing"
    values = {
        "BilledCost": cost,
        "BillingAccountId": account_id,
        "BillingAccountName": account_name,
        "BillingAccountType": "Billing Account",
        "BillingCurrency": "USD",
        "BillingPeriodStart": _stamp(start),
        "BillingPeriodEnd": _stamp(end),
        "ChargeCategory": "Usage",
        "ChargeDescription": meter,
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": _stamp(day),
        "ChargePeriodEnd": _stamp(day + timedelta(days=1)),
        "ConsumedQuantity": 24,
        "ConsumedUnit": "Hours",
        "ContractedCost": cost,
        "ContractedUnitPrice": hourly,
        "EffectiveCost": cost,
        "InvoiceIssuerName": "Microsoft",
        "ListCost": listed,
        "ListUnitPrice": payg,
        "PricingCategory": "Dynamic" if spot else "Standard",
        "PricingQuantity": 24,
        "PricingUnit": "1 Hour",
        "ProviderName": "Microsoft",
        "PublisherName": "Microsoft",
        "RegionId": REGION,
        "RegionName": REGION_NAME,
        "ResourceId": node.billed_resource,
        "ResourceName": node.billed_resource.rsplit("/", 1)[-1],
        "ResourceType": "Virtual machine" if node.instance is None else "Virtual machine scale set",
        "ServiceCategory": "Compute",
        "ServiceName": "Virtual Machines",
        "SkuId": sku,
        "SkuPriceId": f"{sku}/{'0015' if spot else '000G'}",
        "SubAccountId": f"/subscriptions/{SUBSCRIPTION}",
        "SubAccountName": SUBSCRIPTION_NAME,
        "SubAccountType": "Subscription",
        "Tags": json.dumps(node.tags(), sort_keys=True),
        "x_BilledCostInUsd": cost,
        "x_BilledUnitPrice": hourly,
        "x_BillingAccountId": account_number,
        "x_BillingAccountName": account_name,
        "x_BillingExchangeRate": 1,
        "x_BillingExchangeRateDate": _stamp(start),
        "x_ContractedCostInUsd": cost,
        "x_EffectiveCostInUsd": cost,
        "x_EffectiveUnitPrice": hourly,
        "x_ListCostInUsd": listed,
        "x_PricingBlockSize": 1,
        "x_PricingCurrency": "USD",
        "x_PricingSubcategory": "Spot" if spot else "Standard",
        "x_PricingUnitDescription": "1 Hour",
        "x_PublisherCategory": "Cloud Provider",
        "x_ResourceGroupName": node.resource_group,
        "x_ResourceType": "microsoft.compute/" + node.billed_resource.split("/microsoft.compute/")[1].split("/")[0],
        "x_ServicePeriodStart": _stamp(day),
        "x_ServicePeriodEnd": _stamp(day + timedelta(days=1)),
        "x_SkuDescription": f"Virtual Machines {series} - {meter} - {SKU_REGION}",
        "x_SkuDetails": json.dumps(details),
        "x_SkuIsCreditEligible": "true",
        "x_SkuMeterCategory": "Virtual Machines",
        "x_SkuMeterId": f"{meter_id[:8]}-{meter_id[8:12]}-{meter_id[12:16]}-{meter_id[16:20]}-{meter_id[20:32]}",
        "x_SkuMeterName": meter,
        "x_SkuMeterSubcategory": series,
        "x_SkuOfferId": "MS-AZR-0017P",
        "x_SkuPartNumber": f"AAH-{sku[:5]}",
        "x_SkuRegion": SKU_REGION,
        "x_SkuServiceFamily": "Compute",
    }
    return {name: _text(values.get(name)) for name in COLUMNS}


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return str(value)


def _csv(rows: list[dict[str, str]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def _uuid(*parts: object) -> str:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def run_manifest(month: datetime, run_dir: str, blob: str, data: bytes, rows: int, submitted: datetime) -> dict:
    """A run's manifest.json (manifestVersion 2024-04-01; Microsoft's documented example, a FocusCost run)."""
    last = _month(month)[1] - timedelta(days=1)
    scope = f"/subscriptions/{SUBSCRIPTION}"
    return {
        "manifestVersion": "2024-04-01",
        "byteCount": len(data),
        "blobCount": 1,
        "dataRowCount": rows,
        "exportConfig": {
            "exportName": EXPORT,
            "resourceId": f"{scope}/providers/Microsoft.CostManagement/exports/{EXPORT}",
            "dataVersion": DATA_VERSION,
            "apiVersion": "2023-07-01-preview",
            "type": "FocusCost",
            "timeFrame": "MonthToDate",
            "granularity": "Daily",
        },
        "deliveryConfig": {
            "partitionData": True,
            "dataOverwriteBehavior": "OverwritePreviousReport",
            "fileFormat": "Csv",
            "compressionMode": "None",
            "containerUri": f"{scope}/resourceGroups/finops-rg/providers/Microsoft.Storage/storageAccounts/acmecostexports",
            "rootFolderPath": ROOT_FOLDER,
        },
        "runInfo": {
            "executionType": "Scheduled",
            "submittedTime": submitted.strftime("%Y-%m-%dT%H:%M:%S.0000000Z"),
            "runId": run_dir.rsplit("/", 1)[-1],
            "startDate": month.strftime("%Y-%m-%dT%H:%M:%S"),
            "endDate": last.strftime("%Y-%m-%dT00:00:00Z"),
        },
        "blobs": [{"blobName": blob, "byteCount": len(data), "dataRowCount": rows}],
    }


def write_export(container: Path, rows: list[dict[str, str]]) -> Path:
    """Each month's export run under ``container/<root folder>/<export>/`` (its manifest and one CSV partition);
    runs of other months removed. Returns ``container`` (the ``azure_cost_export`` source's ``path``)."""
    by_month: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_month.setdefault(row["BillingPeriodStart"], []).append(row)
    export_dir = container / ROOT_FOLDER / EXPORT
    wanted = set()
    for period, month_rows in sorted(by_month.items()):
        month = datetime.fromisoformat(period.replace("Z", "+00:00"))
        last_day = max(r["ChargePeriodEnd"] for r in month_rows)
        submitted = datetime.fromisoformat(last_day.replace("Z", "+00:00")) + timedelta(hours=6)
        span = f"{month:%Y%m%d}-{_month(month)[1] - timedelta(days=1):%Y%m%d}"
        run_dir = f"{ROOT_FOLDER}/{EXPORT}/{span}/{submitted:%Y%m%d%H%M}/{_uuid(EXPORT, period, last_day)}"
        blob = f"{run_dir}/part_0_0001.csv"
        data = _csv(month_rows)
        write_if_changed(container / blob, data)
        manifest = run_manifest(month, run_dir, blob, data, len(month_rows), submitted)
        write_if_changed(container / run_dir / "manifest.json", (json.dumps(manifest, indent=2) + "\n").encode())
        wanted.add(container / run_dir)
    for stale in export_dir.glob("*/*/*"):  # <span>/<run time>/<run id>: another window's runs
        if stale not in wanted:
            shutil.rmtree(stale)
    for empty in sorted(export_dir.glob("*/*"), reverse=True) + sorted(export_dir.glob("*")):
        if empty.is_dir() and not any(empty.iterdir()):
            empty.rmdir()
    return container
