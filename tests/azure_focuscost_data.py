"""FocusCost export runs built for the tests, in the exact documented shape.

No public FocusCost rows with GPU VMs exist (Microsoft's dataset examples are Git LFS pointers; the FOCUS
sample data's Microsoft rows carry no ``x_`` columns), so the rows here are generated: every column of the
dataset version's export schema (tests/data/azure/finops-toolkit-focuscost/export-schemas, Microsoft's FinOps
toolkit, MIT), in the schema's order, with the values an Azure VM's usage carries (the size in ``x_SkuDetails``'
``ServiceType`` and in the meter's name). The manifest is Microsoft's documented example
(tests/data/azure/cost-management-docs, manifestVersion 2024-04-01) with a FocusCost run's values.
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DATA = Path(__file__).parent / "data" / "azure"
SCHEMAS = DATA / "finops-toolkit-focuscost" / "export-schemas"
MANIFEST_EXAMPLE = DATA / "cost-management-docs" / "manifest_example_2024-04-01_tutorial-export-acm-data.json"
SUBSCRIPTION = "6f1c2a3b-4d5e-4f60-8a9b-0c1d2e3f4a5b"
H100_VM = (
    f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ml-rg/providers/microsoft.compute/virtualmachines/h100-train-01"
)
A100_VM = f"/subscriptions/{SUBSCRIPTION}/resourcegroups/ml-rg/providers/microsoft.compute/virtualmachines/a100-spot-01"
H100_HOURLY = Decimal("98.32")  # eastus Linux pay-as-you-go (Azure's Karpenter provider's price table)
A100_SPOT_HOURLY = Decimal("1.1019")
EXPORT, FOLDER = "gpu-focus", "exports"  # the export's name and root folder in the container


def columns(version: str) -> list[str]:
    doc = json.loads((SCHEMAS / f"focuscost_{version}.json").read_text(encoding="utf-8"))
    return [m["source"]["name"] for m in doc["translator"]["mappings"]]


def _stamp(moment: datetime, version: str) -> str:
    # 1.0 writes no seconds ("2024-01-01T00:00Z"); 1.0r2 and later do (the export docs)
    return moment.strftime("%Y-%m-%dT%H:%MZ" if version == "1.0" else "%Y-%m-%dT%H:%M:%SZ")


def vm_day(
    version: str,
    day: datetime,
    resource_id: str,
    size: str,
    hourly: Decimal,
    *,
    spot: bool = False,
    team: str = "research",
) -> dict[str, str]:
    """One day of one VM's compute usage, as a FocusCost row of ``version``."""
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    meter = size.removeprefix("Standard_").replace("_", " ") + (" Spot" if spot else "")
    cost = str(hourly * 24)
    values = {
        "BilledCost": cost,
        "BillingAccountId": "/providers/Microsoft.Billing/billingAccounts/8611537",
        "BillingAccountName": "Contoso GPU",
        "BillingAccountType": "Billing Account",
        "BillingCurrency": "USD",
        "BillingPeriodStart": _stamp(month, version),
        "BillingPeriodEnd": _stamp(next_month, version),
        "ChargeCategory": "Usage",
        "ChargeDescription": meter,
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodStart": _stamp(day, version),
        "ChargePeriodEnd": _stamp(day + timedelta(days=1), version),
        "ConsumedQuantity": "24",
        "ConsumedUnit": "Hours",
        "ContractedCost": cost,
        "ContractedUnitPrice": str(hourly),
        "EffectiveCost": cost,
        "InvoiceIssuerName": "Microsoft",
        "ListCost": cost,
        "ListUnitPrice": str(hourly),
        "PricingCategory": "Dynamic" if spot else "Standard",
        "PricingQuantity": "24",
        "PricingUnit": "1 Hour",
        "ProviderName": "Microsoft",
        "PublisherName": "Microsoft",
        "RegionId": "eastus",
        "RegionName": "East US",
        "ResourceId": resource_id,
        "ResourceName": resource_id.rsplit("/", 1)[-1],
        "ResourceType": "Virtual machine",
        "ServiceCategory": "Compute",
        "ServiceName": "Virtual Machines",
        "ServiceSubcategory": "Virtual Machines",  # 1.2-preview and 1.2 only (the schema has it from 1.2-preview)
        "SkuId": "DZH318Z0BQPS",
        "SkuPriceId": f"DZH318Z0BQPS/{'0015' if spot else '000G'}",
        "SubAccountId": f"/subscriptions/{SUBSCRIPTION}",
        "SubAccountName": "ml-prod",
        "SubAccountType": "Subscription",
        "Tags": json.dumps({"team": team}),
        "x_BilledCostInUsd": cost,
        "x_EffectiveCostInUsd": cost,
        "x_ResourceGroupName": "ml-rg",
        "x_SkuDetails": json.dumps({"ServiceType": size, "VMName": resource_id.rsplit("/", 1)[-1], "VCPUs": 96}),
        "x_SkuMeterCategory": "Virtual Machines",
        "x_SkuMeterSubcategory": size.removeprefix("Standard_").split("_", 1)[-1] + " Series",
        "x_SkuMeterId": "5e3f8a1c-0a8b-4c4e-9a7d-2b9a1c0f3e11",
        "x_SkuMeterName": meter,
        "SkuMeter": meter,
        "x_SkuTerm": "",
        "x_BillingAccountId": "8611537",
        "x_SkuRegion": "US East",
    }
    return {name: values.get(name, "") for name in columns(version)}


def meter_day(
    version: str,
    day: datetime,
    resource_id: str,
    meter: str,
    *,
    quantity: Decimal,
    cost: Decimal,
    unit: str,
    category: str = "Storage",
) -> dict[str, str]:
    """One day of another meter of ``resource_id`` (a managed disk's tier, a storage account's data stored), as a
    FocusCost row of ``version``: the VM row's columns with the meter's own name, unit, quantity and cost."""
    row = vm_day(version, day, resource_id, "Standard_D2s_v3", Decimal(0))
    values = {
        "BilledCost": str(cost),
        "ContractedCost": str(cost),
        "EffectiveCost": str(cost),
        "ListCost": str(cost),
        "x_BilledCostInUsd": str(cost),
        "x_EffectiveCostInUsd": str(cost),
        "ContractedUnitPrice": str(cost / quantity),
        "ListUnitPrice": str(cost / quantity),
        "ChargeDescription": meter,
        "ConsumedQuantity": str(quantity),
        "ConsumedUnit": unit,
        "PricingQuantity": str(quantity),
        "PricingUnit": unit,
        "ResourceType": category,
        "ServiceCategory": category,
        "ServiceName": category,
        "ServiceSubcategory": category,
        "x_SkuDetails": "{}",
        "x_SkuMeterCategory": category,
        "x_SkuMeterSubcategory": category,
        "x_SkuMeterName": meter,
        "SkuMeter": meter,
    }
    return {name: values.get(name, value) for name, value in row.items()}


def month_days(month: str, days: int) -> list[datetime]:
    start = datetime.fromisoformat(f"{month}-01T00:00:00").replace(tzinfo=UTC)
    return [start + timedelta(days=d) for d in range(days)]


def _csv_bytes(rows: list[dict[str, str]], version: str) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns(version), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def _write_part(path: Path, rows: list[dict[str, str]], version: str, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        names = columns(version)
        table = pa.table({n: pa.array([r[n] or None for r in rows], pa.string()) for n in names})
        pq.write_table(table, path, compression="snappy")
    elif fmt == "csv.gz":
        path.write_bytes(gzip.compress(_csv_bytes(rows, version)))
    else:
        path.write_bytes(_csv_bytes(rows, version))


def write_run(
    root: Path,
    month: str,
    rows: list[dict[str, str]],
    *,
    version: str = "1.0r2",
    fmt: str = "csv",
    parts: int = 2,
    run_id: str = "0b1d6f2e-1c1e-4a8a-9f5e-2d7c1a0e9b31",
    submitted: datetime | None = None,
) -> Path:
    """One export run in Cost Management's layout under ``root`` (the container); returns its manifest."""
    export, folder = EXPORT, FOLDER
    submitted = submitted or datetime.fromisoformat(f"{month}-05T06:00:00").replace(tzinfo=UTC)
    start = datetime.fromisoformat(f"{month}-01T00:00:00")
    end = (start + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    run_dir = f"{folder}/{export}/{start:%Y%m%d}-{end:%Y%m%d}/{submitted:%Y%m%d%H%M}/{run_id}"
    suffix = {"csv": "csv", "csv.gz": "csv.gz", "parquet": "parquet"}[fmt]
    chunks = [rows[i::parts] for i in range(parts)]
    blobs: list[dict[str, Any]] = []
    for index, chunk in enumerate(chunks):
        name = f"{run_dir}/part_{index}_0001.{suffix}"
        _write_part(root / name, chunk, version, fmt)
        blobs.append({"blobName": name, "byteCount": (root / name).stat().st_size, "dataRowCount": len(chunk)})
    manifest = copy.deepcopy(json.loads(MANIFEST_EXAMPLE.read_text(encoding="utf-8")))
    manifest["byteCount"] = sum(b["byteCount"] for b in blobs)
    manifest["blobCount"] = len(blobs)
    manifest["dataRowCount"] = len(rows)
    manifest["exportConfig"].update(
        exportName=export,
        resourceId=f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.CostManagement/exports/{export}",
        dataVersion=version,
        apiVersion="2023-07-01-preview",
        type="FocusCost",
        timeFrame="MonthToDate",
        granularity="Daily",
    )
    manifest["deliveryConfig"].update(
        fileFormat="Parquet" if fmt == "parquet" else "Csv",
        compressionMode={"csv": "None", "csv.gz": "Gzip", "parquet": "Snappy"}[fmt],
        rootFolderPath=folder,
    )
    manifest["runInfo"].update(
        submittedTime=submitted.strftime("%Y-%m-%dT%H:%M:%S.%f0Z"),
        runId=run_id,
        startDate=f"{start:%Y-%m-%dT%H:%M:%S}",
        endDate=f"{end:%Y-%m-%dT00:00:00Z}",
    )
    manifest["blobs"] = blobs
    path = root / run_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return path


def fleet_rows(version: str, month: str = "2026-10", days: int = 8) -> list[dict[str, str]]:
    """An ND96isr_H100_v5 on demand and a spot NC24ads_A100_v4, ``days`` days each."""
    rows = [vm_day(version, d, H100_VM, "Standard_ND96isr_H100_v5", H100_HOURLY) for d in month_days(month, days)]
    rows += [
        vm_day(version, d, A100_VM, "Standard_NC24ads_A100_v4", A100_SPOT_HOURLY, spot=True, team="vision")
        for d in month_days(month, days)
    ]
    return rows


def conformance_input(tmp: Path) -> tuple[dict, datetime]:
    """tests/test_conformance.py's input: one 1.0r2 run of October 2026 in a copied container."""
    write_run(tmp, "2026-10", fleet_rows("1.0r2"))
    return {"path": str(tmp)}, datetime(2026, 10, 1, tzinfo=UTC)


AKS_VMSS = (
    f"/subscriptions/{SUBSCRIPTION}/resourcegroups/mc_ml-rg_gpu-aks_eastus/providers/microsoft.compute/"
    "virtualmachinescalesets/aks-gpupool-12345678-vmss"
)
AKS_HOURLY = Decimal("7.346")  # Standard_NC48ads_A100_v4, eastus pay-as-you-go (the Karpenter price table)


def aks_rows(version: str, month: str = "2026-10", days: int = 8, instances: int = 2) -> list[dict[str, str]]:
    """An AKS node pool's scale-set instances, ``days`` days each: billed to the scale set (ResourceId), the
    instance in x_SkuDetails' VMName (``aks-gpupool-12345678-vmss_0``) and AKS's tags on the scale set, as Cost
    Management bills Virtual Machine Scale Set instances (Microsoft's real EA rows, tests/data/azure/
    finops-toolkit-focuscost/SOURCE.txt: VMName ``aks-agentpool-42850074-vmss_1``)."""
    rows = []
    for instance in range(instances):
        for day in month_days(month, days):
            row = vm_day(version, day, AKS_VMSS, "Standard_NC48ads_A100_v4", AKS_HOURLY, team="recsys")
            if "x_SkuDetails" in row:
                details = json.loads(row["x_SkuDetails"])
                details.update(VMName=f"aks-gpupool-12345678-vmss_{instance}", VCPUs=48)
                details["VMProperties"] = "Microsoft.AKS.Compute.AKS.Linux.Billing"
                row["x_SkuDetails"] = json.dumps(details)
            tags = {"team": "recsys", "aks-managed-cluster-name": "gpu-aks", "aks-managed-poolName": "gpupool"}
            row["Tags"] = json.dumps(tags)
            rows.append(row)
    return rows


def write_dcgm(
    folder: Path, host: str, model: str, gpus: int, days: int, busy: tuple[int, float, float] = (0, 0.0, 0.0)
) -> None:
    """The DCGM exporter's exposition of ``host`` every 15 minutes for ``days`` from 2026-10-01: ``busy``
    (how many GPUs, near what utilisation %, holding how many MiB) busy, the others idle (0-1 %, 300 MiB)."""
    count, busy_util, busy_mib = busy
    folder.mkdir(parents=True, exist_ok=True)
    start, lines = datetime(2026, 10, 1, tzinfo=UTC), []
    for step in range(days * 96):
        ts = int(start.timestamp() * 1000) + step * 900_000
        for gpu in range(gpus):
            labels = f'{{gpu="{gpu}",UUID="GPU-{host}-{gpu}",modelName="{model}",Hostname="{host}"}}'
            util = busy_util + step % 10 if gpu < count else float(step % 2)
            used = busy_mib if gpu < count else 300.0
            for metric, value in (
                ("DCGM_FI_DEV_GPU_UTIL", util),
                ("DCGM_FI_DEV_FB_USED", used),
                ("DCGM_FI_DEV_FB_FREE", 80_000.0 - used),
                ("DCGM_FI_DEV_POWER_USAGE", 70.0 + 4 * util),
            ):
                lines.append(f"{metric}{labels} {value!r} {ts}")
    (folder / f"{host}.prom").write_text("\n".join(lines) + "\n")
