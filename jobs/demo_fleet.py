"""A deterministic simulated GPU fleet with planted waste: the input of ``gpufinops demo``.

``generate(home)`` writes, in the providers' native formats, ``days`` of a two-cloud + on-prem
fleet ending at :data:`DEMO_END` (fixed, so a seed gives the same numbers on any day)::

    home/exports/aws/cur/gpufinops-demo/…          AWS CUR 2.0 Data Export (Parquet + manifest per billing
                                                   month, the bucket's own layout; see ingest/aws_cur2_format.py)
    home/exports/gcp/focus/focus-YYYY-MM.csv       Google Cloud FOCUS CSV, one file per month
    home/exports/onprem/focus/focus-YYYY-MM.csv    the on-prem cluster's costs as FOCUS CSV
    home/metrics/nvidia-smi/<host>.csv             nvidia-smi --query-gpu=… --format=csv -l 900
    home/ground_truth.json                         what was planted, with exact quantities

Prices are hard-coded (the demo runs from a fresh clone without ``shared/``); each table names
the reference file it was copied from. Money is ``Decimal`` quantised to 10 fractional digits.
The on-prem cost of a node-hour is ``gpus × purchase price per GPU / (36 × 730 h)`` plus metered
power ``(the GPUs' mean power.draw in the hour + 1000 W host) × PUE 1.5 × $0.12/kWh``. Committed usage is billed at
the committed rate on the usage line (no separate commitment-fee line), except on AWS where, as in
a real CUR, a Reserved Instance's hours are ``DiscountedUsage`` lines (billed 0, effective cost the RI
rate) and the month's ``RIFee`` line bills the RI for every hour of the window (its unused hours are
its effective cost). Randomness comes only
from ``random.Random(seed)`` and ``numpy.random.default_rng((seed, machine))``; nothing reads the
clock, and a file whose bytes would not change is not rewritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from jobs import demo_aws
from jobs.demo_aws import aws_reserved_instance as _aws_reserved_instance
from jobs.demo_workloads import (FLEET, GPU_HARDWARE, INSTANCE_GPUS, SAMPLES_PER_HOUR, Clock, Samples, Spec,
                                 gpu_samples, running_hours, sample_stamps, smi_log)
from warehouse import schema

DEMO_END = datetime(2026, 11, 1, tzinfo=UTC)
MONEY = Decimal("1E-10")
IDLE_UTIL_PCT = 5              # an idle hour: every GPU at most this in every sample of the hour
HOURS_PER_MONTH = 730

# us-east-1 Linux on-demand $/h, from shared/data/aws-ondemand-karpenter/
# aws_ondemand_linux_prices_us-east-1_karpenter.csv (karpenter, generated 2026-07-20). us-west-2
# is billed at the same rates (these types have the same list price there).
AWS_ON_DEMAND_USD = {
    "p4d.24xlarge": "21.957642", "p4de.24xlarge": "27.44705", "p5.48xlarge": "55.04",
    "g5.xlarge": "1.006", "g5.12xlarge": "5.672", "g5.48xlarge": "16.288",
    "g6.xlarge": "0.8048", "g6.12xlarge": "4.6016", "g4dn.xlarge": "0.526", "g4dn.12xlarge": "3.912",
}
AWS_RI_1Y_RATE = Decimal("0.62")   # assumed 1-year no-upfront reserved rate / on-demand (not in the data)
# (machine type, region) -> ($/h on-demand, $/h spot, $/month 1-year CUD) from
# shared/data/gcp-pricing-cyclenerd/pricing.yml (compute.instance.<type>.cost.<region>).
GCP_PRICES = {
    ("a2-highgpu-1g", "us-central1"): ("3.673385", "1.92802", "1689.3711392"),
    ("a2-highgpu-4g", "us-central1"): ("14.69354", "7.71208", "6757.4845568"),
    ("a2-highgpu-8g", "us-central1"): ("29.38708", "15.42416", "13514.9691136"),
    ("a2-ultragpu-1g", "us-central1"): ("5.06879789041096", "2.75954630136986", None),
    ("a3-highgpu-8g", "us-central1"): ("88.4899999025753", "50.6095408219178", "44810.08066464"),
    ("g2-standard-4", "us-central1"): ("0.706832255", "0.397336", "325.07215214"),
    ("g2-standard-4", "europe-west4"): ("0.742916046", "0.38986", "341.6671049"),
    ("g2-standard-48", "europe-west4"): ("4.205950264", "2.20712", "1934.3166532"),
}
# On-prem cost model: purchase price per GPU slot (GPU + its share of the server), amortised over
# 36 months, plus power. Assumed figures, documented here and in ground_truth.json.
ONPREM_PRICE_PER_GPU_USD = {"A40": Decimal("12000"), "A100-80GB": Decimal("25000")}
ONPREM_AMORTISATION_MONTHS, ONPREM_HOST_W, ONPREM_PUE, ONPREM_KWH_USD = 36, 1000, Decimal("1.5"), Decimal("0.12")
# Public list prices of the non-GPU lines (AWS / Google Cloud pricing pages).
STORAGE_USD_PER_GB_MONTH = {"aws": Decimal("0.08"), "gcp": Decimal("0.10")}
EGRESS_USD_PER_GB = {"aws": Decimal("0.09"), "gcp": Decimal("0.12")}

REGION_NAMES = {"us-east-1": "US East (N. Virginia)", "us-west-2": "US West (Oregon)", "us-central1": "Iowa",
                "europe-west4": "Netherlands", "dc1": "Datacentre 1"}
PROVIDER_NAMES = {"aws": ("AWS", "Amazon Web Services, Inc."), "gcp": ("Google Cloud", "Google Cloud"),
                  "onprem": ("onprem", "onprem")}
SERVICE_NAMES = {"aws": "Amazon Elastic Compute Cloud", "gcp": "Compute Engine", "onprem": "On-prem GPU cluster"}
ACCOUNTS = {  # provider -> (billing account id, name, {team: (sub-account id, name)}, default team key)
    "aws": ("012345678901", "Acme ML", {"research": ("023456789012", "research"), "*": ("004455667788", "ml-prod")}),
    "gcp": ("01A2B3-C4D5E6-F7A8B9", "Acme ML GCP",
            {"research": ("research-sbx-1177", "research-sbx"), "*": ("ml-prod-4821", "ml-prod")}),
    "onprem": ("onprem", "Acme datacentre", {"*": ("dc1", "dc1")}),
}


@dataclass(frozen=True)
class FleetSummary:
    home: Path
    export_dirs: dict[str, Path]          # provider -> FOCUS export folder
    metrics_dir: Path                     # nvidia-smi logs, one <host>.csv per host
    ground_truth_path: Path
    resource_map: dict[str, str]          # host -> billed ResourceId (every host)
    machines: int
    gpus: int
    line_items: int
    metric_rows: int
    cost_by_provider: dict[str, Decimal]  # sum of EffectiveCost, every line
    planted: list[dict] = field(default_factory=list)


@dataclass
class Machine:
    spec: Spec
    host: str
    resource_id: str
    gpu_model: str
    gpu_count: int
    region: str


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _build_fleet(seed: int) -> list[Machine]:
    rnd = random.Random(seed)
    machines, used_ips, node = [], set(), 0
    for spec in FLEET:
        model, count = INSTANCE_GPUS[spec.instance_type]
        if spec.provider == "aws":
            ip = (rnd.randint(1, 31), rnd.randint(4, 254))
            while ip in used_ips:
                ip = (rnd.randint(1, 31), rnd.randint(4, 254))
            used_ips.add(ip)
            host, rid, region = f"ip-10-0-{ip[0]}-{ip[1]}", f"i-0{rnd.getrandbits(64):016x}", spec.zone[:-1]
        elif spec.provider == "gcp":
            project = _sub_account("gcp", spec.team)[0]
            host, region = spec.name, spec.zone.rsplit("-", 1)[0]
            rid = f"//compute.googleapis.com/projects/{project}/zones/{spec.zone}/instances/{host}"
        else:
            node += 1
            host = rid = f"gpu-node-{node:02d}"
            region = spec.zone
        machines.append(Machine(spec, host, rid, model, count, region))
    return machines


def _sub_account(provider: str, team: str) -> tuple[str, str]:
    subs = ACCOUNTS[provider][2]
    return subs.get(team, subs["*"])


def _money(value: Decimal) -> Decimal:
    return value.quantize(MONEY)


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _sku(m: Machine) -> str:
    h = _digest(m.spec.provider, m.spec.instance_type, m.region, m.spec.pricing).upper()
    return f"{h[:4]}-{h[4:8]}-{h[8:12]}" if m.spec.provider == "gcp" else h[:16]


def _onprem_rates(m: Machine, samples: Samples) -> list[Decimal]:
    """$/node-hour: amortised purchase price + metered power (GPUs' mean power.draw in the hour + host)."""
    amortised = m.gpu_count * ONPREM_PRICE_PER_GPU_USD[m.gpu_model] / (ONPREM_AMORTISATION_MONTHS * HOURS_PER_MONTH)
    centiwatts = np.rint(samples.power * 100).astype(np.int64).reshape(-1, SAMPLES_PER_HOUR * m.gpu_count).sum(axis=1)
    return [_money(amortised + (Decimal(cw) / (100 * SAMPLES_PER_HOUR) + ONPREM_HOST_W) / 1000 * ONPREM_PUE
                   * ONPREM_KWH_USD) for cw in centiwatts.tolist()]


def _unit_prices(m: Machine, clock: Clock, rng: np.random.Generator,
                 samples: Samples) -> tuple[list[Decimal], list[Decimal], str]:
    """(list $/h, billed $/h) per hour of the window, and the charge description."""
    spec, hours = m.spec, clock.hours
    if spec.provider == "aws":
        list_price = Decimal(AWS_ON_DEMAND_USD[spec.instance_type])
        listed = [list_price] * hours
        if spec.pricing == "spot":   # ~30–40 % of on-demand, moving every 6 hours, 4 decimals like AWS
            steps = rng.uniform(0.30, 0.40) * (1 + rng.normal(0, 0.02, hours // 6 + 1))
            billed = [Decimal(f"{float(list_price) * s:.4f}") for s in np.repeat(steps, 6)[:hours]]
            return listed, billed, f"Linux/UNIX (Amazon VPC), {spec.instance_type} Spot Instance-hour"
        if spec.pricing == "committed":
            rate = _money(list_price * AWS_RI_1Y_RATE)
            return listed, [rate] * hours, (f"USD {_plain(rate)} hourly fee per Linux/UNIX (Amazon VPC), "
                                            f"{spec.instance_type} instance")
        return listed, listed, f"${_plain(list_price)} per On Demand Linux {spec.instance_type} Instance Hour"
    if spec.provider == "gcp":
        on_demand, spot, cud_month = GCP_PRICES[(spec.instance_type, m.region)]
        listed = [Decimal(on_demand)] * hours
        where = f"running in {REGION_NAMES[m.region]} ({m.region})"
        if spec.pricing == "spot":
            return listed, [Decimal(spot)] * hours, f"Spot Preemptible {spec.instance_type} {where}"
        if spec.pricing == "committed":
            rate = _money(Decimal(cud_month) / HOURS_PER_MONTH)
            return listed, [rate] * hours, f"Commitment v1: {spec.instance_type} in {m.region} for 1 Year"
        return listed, listed, f"{spec.instance_type} {where}"
    rates = _onprem_rates(m, samples)
    return rates, rates, (f"{m.host} node-hour: {m.gpu_count}x {m.gpu_model} amortised over "
                          f"{ONPREM_AMORTISATION_MONTHS} months + metered power")


@functools.lru_cache(maxsize=None)
def _month_bounds(t: datetime) -> tuple[datetime, datetime]:
    first = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return first, (first + timedelta(days=32)).replace(day=1)


def _base_line(m: Machine) -> dict:
    """The columns every line of a machine shares."""
    spec = m.spec
    provider_name, publisher = PROVIDER_NAMES[spec.provider]
    account_id, account_name, _ = ACCOUNTS[spec.provider]
    sub_id, sub_name = _sub_account(spec.provider, spec.team)
    tags = {"team": spec.team, "workload": spec.workload, "checkpointing": str(spec.checkpointing).lower()}
    if spec.precision:
        tags["precision"] = spec.precision
    return {
        "AvailabilityZone": None if spec.provider == "onprem" else spec.zone, "BillingAccountId": account_id,
        "BillingAccountName": account_name, "BillingCurrency": "USD", "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based", "InvoiceIssuerName": publisher, "ProviderName": provider_name,
        "PublisherName": publisher, "RegionId": m.region, "RegionName": REGION_NAMES[m.region],
        "ServiceName": SERVICE_NAMES[spec.provider], "SubAccountId": sub_id, "SubAccountName": sub_name,
        "Tags": json.dumps(tags, sort_keys=True),
    }


def _line(base: dict, start: datetime, period: timedelta, values: dict) -> dict:
    bp_start, bp_end = _month_bounds(start)
    return {**base, "BillingPeriodStart": bp_start, "BillingPeriodEnd": bp_end, "ChargePeriodStart": start,
            "ChargePeriodEnd": start + period, **values}


def _costs(list_unit: Decimal, billed_unit: Decimal, contracted_unit: Decimal, quantity: Decimal) -> dict:
    billed = _money(billed_unit * quantity)
    return {"ListUnitPrice": _money(list_unit), "ListCost": _money(list_unit * quantity),
            "ContractedUnitPrice": _money(contracted_unit), "ContractedCost": _money(contracted_unit * quantity),
            "BilledCost": billed, "EffectiveCost": billed, "ConsumedQuantity": _money(quantity),
            "PricingQuantity": _money(quantity)}


def _compute_lines(m: Machine, clock: Clock, running: np.ndarray, rng: np.random.Generator,
                   samples: Samples) -> tuple[list[dict], dict[int, Decimal]]:
    """One line per running hour; also {hour index: EffectiveCost}."""
    spec = m.spec
    listed, billed, description = _unit_prices(m, clock, rng, samples)
    category = {"on_demand": "Standard", "spot": "Dynamic", "committed": "Committed"}[spec.pricing]
    fixed = {"ChargeDescription": description, "PricingCategory": category, "PricingUnit": "Hours",
             "ConsumedUnit": "Hours", "ResourceId": m.resource_id, "ServiceCategory": "Compute",
             "ServiceSubcategory": "Virtual Machines" if spec.provider != "onprem" else "GPU Nodes",
             "ResourceName": None if spec.provider == "aws" else m.host,
             "ResourceType": {"aws": "Instance", "gcp": "Virtual Machine", "onprem": "GPU Node"}[spec.provider],
             "SkuId": _sku(m), "SkuPriceId": f"{_sku(m)}.{spec.pricing}", "x_InstanceType": spec.instance_type,
             "x_GpuModel": m.gpu_model, "x_GpuCount": m.gpu_count}
    if spec.pricing == "committed":
        fixed.update(CommitmentDiscountCategory="Usage", CommitmentDiscountStatus="Used",
                     CommitmentDiscountType="Reserved Instance" if spec.provider == "aws" else "Committed Use Discount",
                     CommitmentDiscountId=f"commitment-{_digest(m.resource_id)[:12]}")
    lines, effective, base = [], {}, _base_line(m)
    for hour in np.flatnonzero(running).tolist():
        unit = billed[hour]
        contracted = unit if spec.pricing == "spot" else listed[hour]
        costs = _costs(listed[hour], unit, contracted, Decimal(1))
        lines.append(_line(base, clock.start + timedelta(hours=hour), timedelta(hours=1), {**fixed, **costs}))
        effective[hour] = costs["EffectiveCost"]
    return lines, effective


def _daily_lines(m: Machine, clock: Clock, running: np.ndarray, rng: np.random.Generator) -> list[dict]:
    """Block storage every day the machine exists; internet egress for online inference."""
    spec = m.spec
    if spec.provider == "onprem":
        return []
    hours = np.flatnonzero(running)
    days = range(int(hours[0]) // 24, int(hours[-1]) // 24 + 1)
    size_gb = {"training": 2000, "online_inference": 500}.get(spec.workload, 1000)
    region_name = REGION_NAMES[m.region]
    if spec.provider == "aws":
        disk_id = f"vol-0{_digest('vol', m.resource_id)[:16]}"
        disk = {"ResourceId": disk_id, "ResourceType": "Volume", "ServiceSubcategory": "Block Storage",
                "ChargeDescription": f"$0.08 per GB-month of General Purpose SSD (gp3) provisioned storage - {region_name}"}
        egress = {"ServiceName": "AWS Data Transfer", "ChargeDescription": "$0.09 per GB - first 10 TB / month data "
                  "transfer out beyond the global free tier"}
    else:
        disk_id = m.resource_id.replace("/instances/", "/disks/") + "-boot"
        disk = {"ResourceId": disk_id, "ResourceType": "Persistent Disk", "ServiceSubcategory": "Block Storage",
                "ChargeDescription": f"Balanced PD Capacity in {region_name}"}
        egress = {"ServiceName": "Networking", "ChargeDescription": f"Network Internet Data Transfer Out from {region_name}"}
    sku = _digest("storage", spec.provider, m.region).upper()[:16]
    lines, base = [], _base_line(m)
    for day in days:
        start = clock.start + timedelta(days=day)
        quantity = Decimal(size_gb * 24) / HOURS_PER_MONTH
        rate = STORAGE_USD_PER_GB_MONTH[spec.provider]
        lines.append(_line(base, start, timedelta(days=1), {
            **disk, "ServiceCategory": "Storage", "PricingCategory": "Standard", "ConsumedUnit": "GB-Mo",
            "PricingUnit": "GB-Mo", "SkuId": sku, **_costs(rate, rate, rate, quantity)}))
        if spec.workload == "online_inference":
            gigabytes = Decimal(f"{rng.uniform(80, 600):.3f}")
            rate = EGRESS_USD_PER_GB[spec.provider]
            lines.append(_line(base, start, timedelta(days=1), {
                **egress, "ResourceId": m.resource_id, "ServiceCategory": "Networking",
                "ServiceSubcategory": "Network Traffic", "PricingCategory": "Standard", "ConsumedUnit": "GB",
                "PricingUnit": "GB", "SkuId": _digest("egress", spec.provider).upper()[:16],
                **_costs(rate, rate, rate, gigabytes)}))
    return lines


# ---- writers ------------------------------------------------------------------------------------

OUTPUT_SCHEMA = pa.schema([f for f in schema.COST_LINE_ITEMS if f.name not in ("x_Team", "x_Source", "x_IngestRunId")])


def _write_if_changed(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.write_bytes(data)


@functools.lru_cache(maxsize=65536)
def _csv_time(value: datetime) -> str:
    return '"' + value.strftime("%Y-%m-%dT%H:%M:%SZ") + '"'


def _csv_cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return _csv_time(value)
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace('"', '""') + '"'


def _focus_csv(rows: list[dict]) -> bytes:
    names = OUTPUT_SCHEMA.names
    out = [",".join(f'"{n}"' for n in names)]
    out.extend(",".join(_csv_cell(row.get(n)) for n in names) for row in rows)
    return ("\n".join(out) + "\n").encode()


def _write_exports(home: Path, rows_by_provider: dict[str, list[dict]]) -> dict[str, Path]:
    dirs = {}
    for provider, rows in rows_by_provider.items():
        if provider == "aws":
            dirs[provider] = demo_aws.write_cur2(home / "exports" / "aws" / "cur", rows)
            continue
        folder = home / "exports" / provider / "focus"
        suffix = "csv"
        folder.mkdir(parents=True, exist_ok=True)
        by_month: dict[str, list[dict]] = {}
        for row in rows:
            by_month.setdefault(row["BillingPeriodStart"].strftime("%Y-%m"), []).append(row)
        wanted = {f"focus-{month}.{suffix}" for month in by_month}
        for stale in folder.glob(f"focus-*.{suffix}"):
            if stale.name not in wanted:
                stale.unlink()
        for month, month_rows in sorted(by_month.items()):
            data = _focus_csv(month_rows)
            _write_if_changed(folder / f"focus-{month}.{suffix}", data)
        dirs[provider] = folder
    return dirs


# ---- ground truth ------------------------------------------------------------------------------

def _planted_entry(m: Machine, clock: Clock, running: np.ndarray, samples: Samples,
                   effective: dict[int, Decimal]) -> dict:
    kind, variant = m.spec.plant
    keep = np.repeat(running, SAMPLES_PER_HOUR)
    util, mem = samples.util[keep], samples.mem_used[keep]
    cost = sum(effective.values(), Decimal(0))
    entry = {
        "kind": kind, "variant": variant, "provider": m.spec.provider, "resource_id": m.resource_id,
        "host": m.host, "hosts": [m.host], "team": m.spec.team, "workload": m.spec.workload,
        "instance_type": m.spec.instance_type, "gpu_model": m.gpu_model, "gpu_count": m.gpu_count,
        "pricing": m.spec.pricing, "checkpointing": m.spec.checkpointing, "precision": m.spec.precision,
        "billed_hours": int(running.sum()), "cost_usd": str(cost),
        "util_mean_pct": round(float(util.mean()), 2), "util_max_pct": int(util.max()),
        "mem_used_max_gib": round(int(mem.max()) / 1024, 2),
    }
    if kind == "idle_gpu":
        hour_max = samples.util.reshape(clock.hours, SAMPLES_PER_HOUR, -1).max(axis=(1, 2))
        idle = np.flatnonzero(running & (hour_max <= IDLE_UTIL_PCT)).tolist()
        entry.update(idle_hours=len(idle), idle_gpu_hours=len(idle) * m.gpu_count,
                     idle_cost_usd=str(sum((effective[h] for h in idle), Decimal(0))))
    elif kind == "gpu_count":
        busy, spare = util[:, :2], util[:, 2:]
        entry.update(busy_gpu_indices=[0, 1], idle_gpu_indices=list(range(2, m.gpu_count)),
                     busy_util_mean_pct=round(float(busy.mean()), 2), idle_util_max_pct=int(spare.max()),
                     idle_gpu_cost_usd=str(_money(cost * (m.gpu_count - 2) / m.gpu_count)), proposed_gpu_count=2)
    elif kind == "gpu_type":
        entry.update(mem_total_gib=round(GPU_HARDWARE[m.gpu_model].memory_total_mib / 1024, 2),
                     proposed_gpu_models=["L4", "A10G"])
    elif kind == "quantization":
        entry.update(proposed_precision="fp16", mem_used_fp16_estimate_gib=round(int(mem.max()) / 2048, 2))
    elif kind == "spot_mix":
        entry.update(proposed_pricing="spot")
    return entry


def generate(home: Path, *, days: int = 60, seed: int = 7, end: datetime = DEMO_END) -> FleetSummary:
    """Write the simulated fleet's exports, nvidia-smi logs and ground truth into ``home``."""
    if days < 7:
        raise ValueError(f"days must be at least 7 (got {days}): the fleet has weekly patterns")
    if end.tzinfo is None or end.utcoffset() != timedelta(0) or end != end.replace(minute=0, second=0, microsecond=0):
        raise ValueError(f"end must be a whole hour in UTC (got {end.isoformat()})")
    home = Path(home)
    clock = Clock(end - timedelta(days=days), end)
    stamps = sample_stamps(clock)
    metrics_dir = home / "metrics" / "nvidia-smi"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    machines = _build_fleet(seed)
    rows: dict[str, list[dict]] = {"aws": [], "gcp": [], "onprem": []}
    planted, metric_rows, hosts = [], 0, set()
    for number, m in enumerate(machines):
        rng = np.random.default_rng((seed, number))
        running = running_hours(m.spec.schedule, clock, rng)
        samples = gpu_samples(m.spec.profile, GPU_HARDWARE[m.gpu_model], m.gpu_count, clock, rng)
        compute, effective = _compute_lines(m, clock, running, rng, samples)
        if m.spec.provider == "aws" and m.spec.pricing == "committed":
            compute += _aws_reserved_instance(m, clock, running, compute)
        rows[m.spec.provider] += compute + _daily_lines(m, clock, running, rng)
        log, count = smi_log(m.spec.provider, m.host, m.gpu_model, m.gpu_count, running, samples, stamps, seed)
        _write_if_changed(metrics_dir / f"{m.host}.csv", log)
        metric_rows += count
        hosts.add(f"{m.host}.csv")
        if m.spec.plant:
            planted.append(_planted_entry(m, clock, running, samples, effective))
    for stale in metrics_dir.glob("*.csv"):
        if stale.name not in hosts:
            stale.unlink()
    for provider_rows in rows.values():
        provider_rows.sort(key=lambda r: (r["ChargePeriodStart"], r["ResourceId"], r["ServiceCategory"]))
    export_dirs = _write_exports(home, rows)
    totals = {p: sum((r["EffectiveCost"] for r in provider_rows), Decimal(0)) for p, provider_rows in rows.items()}
    resource_map = {m.host: m.resource_id for m in machines}
    truth = {
        "generator": "jobs.demo_fleet", "seed": seed, "days": days,
        "window_start": clock.start.strftime("%Y-%m-%dT%H:%M:%SZ"), "window_end": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "idle_rule": f"an idle hour is a billed hour in which every GPU shows at most {IDLE_UTIL_PCT} % "
                     f"utilization.gpu in every nvidia-smi sample; idle_cost_usd sums the EffectiveCost of "
                     f"the resource's Compute lines in those hours; idle_gpu_hours = idle_hours x gpu_count",
        "onprem_cost_model": {"price_per_gpu_usd": {k: str(v) for k, v in ONPREM_PRICE_PER_GPU_USD.items()},
                              "amortisation_months": ONPREM_AMORTISATION_MONTHS, "hours_per_month": HOURS_PER_MONTH,
                              "host_w": ONPREM_HOST_W, "pue": str(ONPREM_PUE), "usd_per_kwh": str(ONPREM_KWH_USD),
                              "power_w": "mean over the hour's samples of the sum of the node's GPUs' "
                                         "power.draw, plus host_w"},
        "cost_by_provider_usd": {p: str(v) for p, v in totals.items()},
        "resource_map": resource_map,
        "machines": [{"host": m.host, "provider": m.spec.provider, "resource_id": m.resource_id,
                      "instance_type": m.spec.instance_type, "gpu_model": m.gpu_model, "gpu_count": m.gpu_count,
                      "team": m.spec.team, "workload": m.spec.workload, "pricing": m.spec.pricing,
                      "planted": m.spec.plant[0] if m.spec.plant else None} for m in machines],
        "planted": planted,
    }
    truth_path = home / "ground_truth.json"
    _write_if_changed(truth_path, (json.dumps(truth, indent=2) + "\n").encode())
    return FleetSummary(home=home, export_dirs=export_dirs, metrics_dir=metrics_dir, ground_truth_path=truth_path,
                        resource_map=resource_map, machines=len(machines), gpus=sum(m.gpu_count for m in machines),
                        line_items=sum(len(r) for r in rows.values()), metric_rows=metric_rows,
                        cost_by_provider=totals, planted=planted)
