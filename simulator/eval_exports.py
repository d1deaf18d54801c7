"""How the second fleet (:mod:`simulator.eval_fleet`) is delivered: bills, metrics, price references, config.

The bills are built as FOCUS-named dicts and written by the demo's own writers in the providers'
formats (:func:`simulator.cur2_export.write_cur2`: CUR 2.0 Parquet + manifest, no GPU counts in the product
map; :func:`simulator.gcp_export.export_row`: BigQuery export rows). The first billing month is delivered
twice: the first delivery lacks the last :data:`LATE_HOURS` hours of the :data:`LATE` machines; the
second adds them and restates the :data:`CORRECTED` machines' costs (AWS: the line items change; Google
Cloud: the rows gain a credit and a later ``export_time``). AWS hosts log nvidia-smi CSV; Google Cloud
VMs serve DCGM exporter expositions of the same samples; one host has no metrics at all.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np

from gpufinops.simulator import eval_laws as laws
from gpufinops.simulator import gcp_export
from gpufinops.simulator.dcgm_export import write_dcgm_exposition
from gpufinops.simulator.demo_prices import (
    GCP_PRICES_FILE,
    GCP_PRICES_HEADER,
    PRICE_REFERENCE_CONFIG,
    SPOT_ADVISOR_FILE,
    SPOT_ADVISOR_RANGES,
)
from gpufinops.simulator.demo_smi import SMI_HEADER, bus_ids, gpu_uuid
from gpufinops.simulator.eval_machines import Box, Machine

MONEY = Decimal("1E-10")
REGION_NAMES = {"us-east-1": "US East (N. Virginia)", "us-central1": "Iowa"}
LATE_HOURS = 36  # hours the first delivery of the restated month lacks …
LATE = ("llm-train", "sweep-l4x8", "speech-a100")  # … for these machines
CORRECTED = {"nlp-h100": Decimal("0.97"), "vision-a100": Decimal("0.96")}  # restated cost / first cost


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


# ---- bills ---------------------------------------------------------------------------------------


def month_bounds(t: datetime) -> tuple[datetime, datetime]:
    first = t.replace(day=1, hour=0)
    return first, (first + timedelta(days=32)).replace(day=1)


def _tags(box: Box) -> str:
    tags = {"team": box.team, "workload": box.workload, "checkpointing": str(box.checkpointing).lower()}
    if box.precision:
        tags["precision"] = box.precision
    if box.checkpoint_interval_min:
        tags["checkpoint_interval_min"] = str(box.checkpoint_interval_min)
    return json.dumps(tags, sort_keys=True)


def _description(m: Machine) -> str:
    it, region = m.box.instance_type, m.region
    if m.box.provider == "aws":
        return (
            f"Linux/UNIX (Amazon VPC), {it} Spot Instance-hour"
            if m.box.pricing == "spot"
            else f"On Demand Linux {it} Instance Hour"
        )
    where = f"running in {REGION_NAMES[region]} ({region})"
    return {"spot": f"Spot Preemptible {it} {where}", "committed": f"Commitment v1: {it} in {region} for 1 Year"}.get(
        m.box.pricing, f"{it} {where}"
    )


def bill_rows(m: Machine, prices: dict, start: datetime) -> list[dict]:
    """One compute line per running hour, FOCUS-named (the demo's writers turn them into CUR / BigQuery rows)."""
    box, law = m.box, prices[(m.box.provider, m.box.instance_type)]
    aws = box.provider == "aws"
    account = ("210987654321", "Acme Research AWS") if aws else ("01B2C3-D4E5F6-A7B8C9", "Acme Research GCP")
    sub = (f"3{_digest(box.team)[:11]}" if aws else f"acme-{box.team}-prod", box.team)
    category = {"on_demand": "Standard", "spot": "Dynamic", "committed": "Committed"}[box.pricing]
    sku = _digest(box.provider, box.instance_type, box.pricing).upper()
    sku = f"{sku[:4]}-{sku[4:8]}-{sku[8:12]}" if not aws else sku[:16]
    fixed = {
        "AvailabilityZone": "us-east-1a" if aws else "us-central1-a",
        "BillingAccountId": account[0],
        "BillingAccountName": account[1],
        "BillingCurrency": "USD",
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "InvoiceIssuerName": "Amazon Web Services, Inc." if aws else "Google Cloud",
        "ProviderName": "AWS" if aws else "Google Cloud",
        "PublisherName": "Amazon Web Services, Inc." if aws else "Google Cloud",
        "RegionId": m.region,
        "RegionName": REGION_NAMES[m.region],
        "ServiceName": "Amazon Elastic Compute Cloud" if aws else "Compute Engine",
        "SubAccountId": sub[0],
        "SubAccountName": sub[1],
        "Tags": _tags(box),
        "ChargeDescription": _description(m),
        "PricingCategory": category,
        "PricingUnit": "Hours",
        "ConsumedUnit": "Hours",
        "ResourceId": m.resource_id,
        "ServiceCategory": "Compute",
        "ServiceSubcategory": "Virtual Machines",
        "ResourceName": None if aws else m.host,
        "SkuId": sku,
        "SkuPriceId": f"{sku}.{box.pricing}",
        "x_InstanceType": box.instance_type,
    }
    rows = []
    for hour in np.flatnonzero(m.running).tolist():
        t = start + timedelta(hours=hour)
        listed, billed = law.list_usd(hour), m.rates[hour]
        bp_start, bp_end = month_bounds(t)
        rows.append(
            {
                **fixed,
                "BillingPeriodStart": bp_start,
                "BillingPeriodEnd": bp_end,
                "ChargePeriodStart": t,
                "ChargePeriodEnd": t + timedelta(hours=1),
                "ListUnitPrice": listed,
                "ListCost": listed,
                "ContractedUnitPrice": billed if box.pricing == "spot" else listed,
                "ContractedCost": listed,
                "BilledCost": billed,
                "EffectiveCost": billed,
                "ConsumedQuantity": Decimal(1),
                "PricingQuantity": Decimal(1),
                "_machine": box.name,
            }
        )
    return rows


def restated(rows: list[dict], month: datetime) -> list[dict]:
    """The month's rows as the second delivery states them: the corrected machines' costs changed."""
    out = []
    for row in rows:
        factor = CORRECTED.get(row["_machine"]) if row["BillingPeriodStart"] == month else None
        if factor is None:
            out.append(row)
            continue
        billed = (row["BilledCost"] * factor).quantize(MONEY)
        out.append(
            {
                **row,
                "BilledCost": billed,
                "EffectiveCost": billed,
                "ContractedUnitPrice": billed,
                "_credit": billed - row["BilledCost"],
            }
        )
    return out


def first_delivery(rows: list[dict], month: datetime) -> list[dict]:
    """The month as first delivered: the late machines' last hours of the month are not in it yet."""
    _, month_end = month_bounds(month)
    late_from = month_end - timedelta(hours=LATE_HOURS)
    return [r for r in rows if not (r["_machine"] in LATE and late_from <= r["ChargePeriodStart"] < month_end)]


def _gcp_rows(rows: list[dict]) -> list[dict]:
    """GCP lines as export rows; a restated row keeps its cost and gains a credit, exported later."""
    out = []
    for row in rows:
        item = gcp_export.export_row(row)
        if "_credit" in row:
            item["cost"] = float(row["BilledCost"] - row["_credit"])
            item["credits"] = [
                {
                    "name": "Negotiated price correction",
                    "amount": float(row["_credit"]),
                    "full_name": "Negotiated price correction",
                    "id": "price-correction",
                    "type": "DISCOUNT",
                }
            ]
            item["export_time"] = gcp_export._time(row["ChargePeriodEnd"] + timedelta(days=9))
        out.append(item)
    return out


def write_gcp(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    by_month: dict[str, list[str]] = {}
    for item in _gcp_rows(rows):
        by_month.setdefault(item["invoice"]["month"], []).append(
            json.dumps(item, sort_keys=True, separators=(",", ":"))
        )
    for stale in folder.glob("*.json"):
        stale.unlink()
    for month, lines in sorted(by_month.items()):
        (folder / f"{gcp_export.EXPORT_TABLE}-{month}-000000000000.json").write_text("\n".join(lines) + "\n")


# ---- metrics -------------------------------------------------------------------------------------


def smi_log(m: Machine, start: datetime, seed: int) -> bytes:
    """The host's nvidia-smi --query-gpu CSV log over its running hours."""
    hw = laws.HARDWARE[m.gpu_model]
    prefix = [
        f", {hw.smi_name}, {bus}, {gpu_uuid(seed, m.host, i)}, {i}, "
        for i, bus in enumerate(bus_ids(m.box.provider, m.gpu_count))
    ]
    keep = np.flatnonzero(np.repeat(m.running, laws.SAMPLES_PER_HOUR))
    util, mem = m.util[keep].tolist(), m.mem_mib[keep].tolist()
    power = np.round(hw.idle_w + (hw.tdp_w - hw.idle_w) * 0.9 * m.util[keep] / 100, 2).tolist()
    lines = [SMI_HEADER]
    for row, sample in enumerate(keep.tolist()):
        ts = (start + timedelta(minutes=15 * sample)).strftime("%Y/%m/%d %H:%M:%S.000")
        for g in range(m.gpu_count):
            lines.append(
                f"{ts}{prefix[g]}{util[row][g]} %, {int(util[row][g] * 0.4)} %, {hw.memory_total_mib} MiB, "
                f"{mem[row][g]} MiB, {power[row][g]:.2f} W"
            )
    return ("\n".join(lines) + "\n").encode()


def write_metrics(home: Path, machines: list[Machine], start: datetime, seed: int) -> None:
    smi, dcgm = home / "metrics" / "nvidia-smi", home / "metrics" / "dcgm"
    smi.mkdir(parents=True, exist_ok=True)
    dcgm.mkdir(parents=True, exist_ok=True)
    for m in machines:
        if not m.box.metrics:
            continue
        log = smi / f"{m.host}.csv"
        log.write_bytes(smi_log(m, start, seed))
        if m.box.provider == "gcp":  # the VM's DCGM exporter serves the same samples
            write_dcgm_exposition(log, m.host, dcgm / f"{m.host}.prom")
            log.unlink()


def write_references(home: Path, prices: dict, start: datetime) -> None:
    """The AWS spot advisor feed and Google Cloud price history (one revision per price change)."""
    advisor = {
        "us-east-1": {
            "Linux": {
                it: {"s": int(o.spot), "r": o.band} for (p, it), o in sorted(laws.CATALOGUE.items()) if p == "aws"
            }
        }
    }
    (home / SPOT_ADVISOR_FILE).parent.mkdir(parents=True, exist_ok=True)
    (home / SPOT_ADVISOR_FILE).write_text(json.dumps({"ranges": SPOT_ADVISOR_RANGES, "spot_advisor": advisor}))
    lines = [GCP_PRICES_HEADER]
    for (provider, it), law in sorted(prices.items()):
        if provider != "gcp":
            continue
        for n, hour in enumerate((0, law.change_hour)):
            stamp = (start + timedelta(hours=hour)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
            cud = law.cud_usd(hour)
            lines.append(
                f"eval{n},{stamp},eval,{it},{law.offer.gpu_model.lower()},{law.offer.gpu_count},us-central1,"
                f"{law.list_usd(hour)},{law.spot_usd(hour, 'gcp')},{cud * 730 if cud else ''},,"
                f"{'first_seen' if n == 0 else 'price_change'}"
            )
    (home / GCP_PRICES_FILE).parent.mkdir(parents=True, exist_ok=True)
    (home / GCP_PRICES_FILE).write_text("\n".join(lines) + "\n")


def write_config(home: Path, machines: list[Machine]) -> Path:
    """Metrics sources first (they arrive before the bills), then the bills and the price references."""

    def table(rows: list[Machine]) -> list[str]:
        return [f"{json.dumps(m.host)} = {json.dumps(m.resource_id)}" for m in rows if m.box.metrics]

    lines = [
        "[warehouse]",
        'path = "data/gpufinops.duckdb"',
        "",
        "[teams]",
        'tag_keys = ["team", "user_team"]',
        "",
        "[sources.gpu_smi]",
        'type = "nvidia_smi_csv"',
        'path = "metrics/nvidia-smi/*.csv"',
        "",
        "[sources.gpu_smi.resource_map]",
        *table([m for m in machines if m.box.provider == "aws"]),
        "",
        "[sources.gpu_dcgm]",
        'type = "dcgm_exporter"',
        'targets = ["metrics/dcgm/*.prom"]',
        "",
        "[sources.gpu_dcgm.resource_map]",
        *table([m for m in machines if m.box.provider == "gcp"]),
        "",
        "[sources.aws_cur]",
        'type = "aws_cur"',
        'path = "exports/aws/cur"',
        'format = "cur2"',
        "",
        "[sources.gcp_billing]",
        'type = "gcp_billing_export"',
        'path = "exports/gcp/billing/*.json"',
        "",
        *PRICE_REFERENCE_CONFIG,
    ]
    path = home / "gpufinops.toml"
    path.write_text("\n".join(lines))
    return path
