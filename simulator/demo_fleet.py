"""A deterministic simulated GPU fleet with planted waste: the input of ``gpufinops demo``.

``generate(home)`` writes, in the providers' native formats, ``days`` of a two-cloud + on-prem
fleet ending at :data:`DEMO_END` (fixed, so a seed gives the same numbers on any day)::

    home/exports/aws/cur/gpufinops-demo/…          AWS CUR 2.0 Data Export (Parquet + manifest per billing
                                                   month, the bucket's own layout; see ingest/aws_cur2_format.py)
    home/exports/gcp/billing/<table>-YYYYMM-….json Google Cloud billing export rows (BigQuery JSONL extract,
                                                   one file per invoice month; see simulator/gcp_export.py)
    home/metrics/nvidia-smi/<host>.csv             nvidia-smi --query-gpu=… --format=csv -l 900
    home/ground_truth.json                         what was planted, with exact quantities

Prices are hard-coded (the demo runs from a fresh clone without ``shared/``); each table names
the reference file it was copied from. Money is ``Decimal`` quantised to 10 fractional digits.
The on-prem cluster is no export: ``gpufinops demo`` configures it as an ``onprem`` source
(:data:`ONPREM_OPTIONS`, recorded in ground_truth.json), and its ground-truth cost is priced with the
source's own :func:`ingest.onprem_cost.hourly_gpu_cost` from each GPU's mean utilisation in the hour
(the demo's DCGM exposition carries no power, so the TDP model). Committed usage is billed at
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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from simulator import cur2_export, gcp_export
from simulator.cur2_export import aws_reserved_instance as _aws_reserved_instance
from simulator.demo_workloads import (FLEET, GPU_HARDWARE, INSTANCE_GPUS, SAMPLES_PER_HOUR, Clock, Samples, Spec,
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
# The on-prem cluster as an `onprem` source (assumed figures; GPU prices default to gpu_specs' list
# price): cluster-wide keys, and per node type (x_InstanceType) its node price and idle GPU draw.
ONPREM_SOURCE = "onprem"
ONPREM_OPTIONS = {"cluster": "dc1", "region": "dc1", "billing_account_name": "Acme datacentre",
                  "amortisation_months": 36, "pue": Decimal("1.5"), "energy_usd_per_kwh": Decimal("0.12"),
                  "host_power_w": 1000, "facility_usd_per_node_month": 250, "operations_usd_per_node_month": 400}
ONPREM_NODE_TYPES = {"onprem-a40x4": {"server_price_usd": 22000, "network_price_usd": 3000, "storage_price_usd": 3000,
                                      "idle_power_w": 30},
                     "onprem-a100x8": {"server_price_usd": 60000, "network_price_usd": 12000,
                                       "storage_price_usd": 8000, "idle_power_w": 60}}
# AWS Spot Instance Advisor, Linux: (region, type) -> (saving over on-demand "s" %, interruption band "r"),
# from shared/data/aws-spot-advisor-spotinfo/spot-advisor-data_2025-06.json, with that feed's band ranges.
# The demo writes them as reference/aws/spot-advisor-data.json (the feed's format) for `aws_spot_advisor`.
AWS_SPOT_ADVISOR = {
    ("us-east-1", "p4d.24xlarge"): (67, 2), ("us-east-1", "p4de.24xlarge"): (65, 0), ("us-east-1", "p5.48xlarge"): (52, 4),
    ("us-east-1", "g5.xlarge"): (59, 4), ("us-east-1", "g5.12xlarge"): (58, 4), ("us-east-1", "g5.48xlarge"): (71, 4),
    ("us-east-1", "g6.xlarge"): (49, 4), ("us-east-1", "g6.12xlarge"): (59, 4), ("us-east-1", "g4dn.xlarge"): (64, 3),
    ("us-east-1", "g4dn.12xlarge"): (64, 2),
    ("us-west-2", "p4d.24xlarge"): (53, 4), ("us-west-2", "p4de.24xlarge"): (67, 3), ("us-west-2", "p5.48xlarge"): (46, 1),
    ("us-west-2", "g5.xlarge"): (63, 4), ("us-west-2", "g5.12xlarge"): (70, 4), ("us-west-2", "g5.48xlarge"): (72, 4),
    ("us-west-2", "g6.xlarge"): (47, 4), ("us-west-2", "g6.12xlarge"): (62, 4), ("us-west-2", "g4dn.xlarge"): (64, 4),
    ("us-west-2", "g4dn.12xlarge"): (63, 2),
}
SPOT_ADVISOR_RANGES = [{"index": 0, "label": "<5%", "dots": 0, "max": 5}, {"index": 1, "label": "5-10%", "dots": 1, "max": 11},
                       {"index": 2, "label": "10-15%", "dots": 2, "max": 16}, {"index": 3, "label": "15-20%", "dots": 3, "max": 22},
                       {"index": 4, "label": ">20%", "dots": 4, "max": 100}]
# The spot_mix truth prices an interruption with the spot model's documented defaults (the demo tags no
# checkpoint interval): half a 60-minute checkpoint interval redone plus a 20-minute restart.
SPOT_LOST_HOURS_PER_INTERRUPTION = Decimal(30 + 20) / 60
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


def _build_fleet(seed: int, scale: int = 1) -> list[Machine]:
    """The fleet's machines; ``scale`` > 1 repeats FLEET that many times (copies' GCP VMs get a ``-N`` suffix)."""
    rnd = random.Random(seed)
    machines, used_ips, node = [], set(), 0
    for copy, spec in ((c, s) for c in range(scale) for s in FLEET):
        if copy and spec.name:
            spec = replace(spec, name=f"{spec.name}-{copy}")
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


def onprem_options(machines: list[Machine]) -> dict:
    """The `onprem` source's config table for these on-prem machines (one node group per node type)."""
    groups: dict[str, list[Machine]] = {}
    for m in machines:
        groups.setdefault(m.spec.instance_type, []).append(m)
    return {**ONPREM_OPTIONS,
            "node_groups": [{"name": kind, "nodes": [m.host for m in ms], "gpu_model": ms[0].gpu_model,
                             "gpus_per_node": ms[0].gpu_count, **ONPREM_NODE_TYPES[kind]} for kind, ms in groups.items()],
            "node_teams": {m.host: m.spec.team for m in machines},
            "node_tags": {m.host: {"workload": m.spec.workload, "checkpointing": str(m.spec.checkpointing).lower()}
                          for m in machines}}


def _toml_value(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings, numbers and booleans are written alike in JSON and TOML


def onprem_config_lines(home: Path) -> list[str]:
    """The `[sources.onprem]` TOML of the cluster ground_truth.json records (none without on-prem machines)."""
    truth = home / "ground_truth.json"
    options = json.loads(truth.read_text()).get("onprem_cost_model", {}).get("options") if truth.exists() else None
    if not options or not options.get("node_groups"):
        return []
    head = f"sources.{ONPREM_SOURCE}"
    lines = [f"[{head}]", 'type = "onprem"']
    lines += [f"{k} = {_toml_value(v)}" for k, v in options.items() if not isinstance(v, dict) and k != "node_groups"]
    for key in ("node_teams", "node_tags"):
        flat = {n: v for n, v in options.get(key, {}).items() if not isinstance(v, dict)}
        lines += [f"[{head}.{key}]"] * bool(flat) + [f"{json.dumps(n)} = {_toml_value(v)}" for n, v in flat.items()]
        for node, table in ((n, v) for n, v in options.get(key, {}).items() if isinstance(v, dict)):
            lines += [f"[{head}.{key}.{json.dumps(node)}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    for group in options["node_groups"]:
        lines += [f"[[{head}.node_groups]]"] + [f"{k} = {_toml_value(v)}" for k, v in group.items()]
    return lines + [""]


@functools.lru_cache(maxsize=None)
def _gpu_specs() -> dict:
    from ingest.onprem_cost import specs_from_rows
    from warehouse.gpu_models import load_gpu_specs
    return specs_from_rows([(r["gpu_model"], r["tdp_w"], r["list_price_usd"]) for r in load_gpu_specs().to_pylist()])


def _onprem_rates(m: Machine, samples: Samples) -> list[Decimal]:
    """$/node-hour: the sum of its GPUs' hourly costs, priced as the `onprem` source prices them (the
    same function, from each GPU's mean utilisation in the hour; no power in the DCGM exposition)."""
    from ingest.onprem_cost import UTIL_STEP, hourly_gpu_cost, parse_cluster, quantity
    group = parse_cluster(ONPREM_SOURCE, onprem_options([m]), _gpu_specs()).groups[0]
    cost = functools.lru_cache(maxsize=None)(lambda util: hourly_gpu_cost(group, util, None).total)
    means = samples.util.reshape(-1, SAMPLES_PER_HOUR, m.gpu_count).mean(axis=1)
    return [sum((cost(quantity(float(u), UTIL_STEP)) for u in hour), Decimal(0)) for hour in means.tolist()]


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
    return rates, rates, f"{m.host} node-hour: {m.gpu_count}x {m.gpu_model} (the onprem source's cost model)"


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
    if not spec.team_label:  # one machine nobody tagged: its cost and GPU-hours have no team
        del tags["team"]
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
            dirs[provider] = cur2_export.write_cur2(home / "exports" / "aws" / "cur", rows)
            continue
        if provider == "gcp":
            dirs[provider] = gcp_export.write_billing_export(home / "exports" / "gcp" / "billing", rows)
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
                     idle_gpu_cost_usd=str(_money(cost * (m.gpu_count - 2) / m.gpu_count)), proposed_gpu_count=2,
                     **_smaller_type_truth(m, cost))
    elif kind == "gpu_type":
        entry.update(mem_total_gib=round(GPU_HARDWARE[m.gpu_model].memory_total_mib / 1024, 2),
                     proposed_gpu_models=["L4", "A10G"])
    elif kind == "quantization":
        entry.update(proposed_precision="fp16", mem_used_fp16_estimate_gib=round(int(mem.max()) / 2048, 2))
    elif kind == "spot_mix":
        entry.update(proposed_pricing="spot", **_spot_mix_truth(m, cost, clock))
    return entry


def _smaller_type_truth(m: Machine, cost: Decimal) -> dict:
    """The billable saving of 2 busy GPUs out of N: the cheapest type of the same GPU in the family with
    fewer GPUs that holds 2 (AWS bills instances whole: no per-GPU saving), from the generator's prices."""
    family = m.spec.instance_type.split(".")[0]
    options = sorted((Decimal(price), it) for it, price in AWS_ON_DEMAND_USD.items()
                     if it.split(".")[0] == family and 2 <= INSTANCE_GPUS[it][1] < m.gpu_count)
    if not options:
        return {}
    price, target = options[0]
    ratio = price / Decimal(AWS_ON_DEMAND_USD[m.spec.instance_type])
    return {"proposed_instance_type": target, "window_saving_usd": str(_money(cost * (1 - ratio)))}


def _spot_mix_truth(m: Machine, cost: Decimal, clock: Clock) -> dict:
    """The saving of running an always-on on-demand machine on spot: the monthly on-demand cost x
    (1 - spot ratio x (1 + rework)); spot ratio = 1 - the advisor's saving, rework = the band's upper
    edge as interruptions a month x the hours lost per interruption / the hours of a month."""
    saving_pct, band = AWS_SPOT_ADVISOR[(m.region, m.spec.instance_type)]
    ratio = 1 - Decimal(saving_pct) / 100
    interruptions = Decimal(SPOT_ADVISOR_RANGES[band]["max"]) / 100
    hours_per_month = Decimal("730.5")
    rework = interruptions * SPOT_LOST_HOURS_PER_INTERRUPTION / hours_per_month
    monthly_cost = cost / Decimal(clock.hours) * hours_per_month
    return {"spot_ratio": str(ratio), "interruption_band": SPOT_ADVISOR_RANGES[band]["label"],
            "rework_fraction": str(_money(rework)), "monthly_on_demand_usd": str(_money(monthly_cost)),
            "monthly_savings_usd": str(_money(monthly_cost * (1 - ratio * (1 + rework))))}


def _commitment_truth(steady: list[Machine]) -> list[dict]:
    """The commitment truth (ground_truth.json "commitments", not waste, so not "planted"): one per
    (provider, region, machine type, team) of machines billed on-demand every hour and busy every hour
    (no idle or notebook profile), where a catalogue commitment price
    exists (GCP 1-year CUD from pricing.yml; the demo has no AWS commitment price: AWS_RI_1Y_RATE is an
    assumption, so AWS groups are left out). Saving = machines x (on-demand - CUD/730) x 730.5 h."""
    groups: dict[tuple, list[Machine]] = {}
    for m in steady:
        groups.setdefault((m.spec.provider, m.region, m.spec.instance_type, m.spec.team), []).append(m)
    out = []
    for (provider, region, instance_type, team), members in sorted(groups.items()):
        on_demand, _, cud_month = GCP_PRICES[(instance_type, region)]
        hourly = Decimal(cud_month) / HOURS_PER_MONTH
        saving = len(members) * (Decimal(on_demand) - hourly) * Decimal("730.5")
        out.append({"kind": "commitment", "variant": "steady_on_demand_baseline", "provider": provider,
                    "resource_id": min(m.resource_id for m in members), "team": team,
                    "group": f"commitment/{provider}/{region}/{instance_type}/{team}",
                    "region": region, "instance_type": instance_type, "machines": len(members),
                    "resource_ids": sorted(m.resource_id for m in members), "term": "1y",
                    "on_demand_usd_per_hour": on_demand, "commit_usd_per_hour": str(_money(hourly)),
                    "break_even_utilisation": str(_money(hourly / Decimal(on_demand))),
                    "monthly_savings_usd": str(_money(saving))})
    return out


def _write_price_references(home: Path, clock: Clock) -> None:
    """The price reference files the demo's config loads: the spot advisor feed (AWS) and a one-revision
    GCP price file in Cyclenerd's format (the prices the demo bills at, effective from the window start)."""
    aws = home / "reference" / "aws"
    aws.mkdir(parents=True, exist_ok=True)
    advisor: dict = {}
    for (region, instance_type), (saving, band) in sorted(AWS_SPOT_ADVISOR.items()):
        advisor.setdefault(region, {"Linux": {}})["Linux"][instance_type] = {"s": saving, "r": band}
    _write_if_changed(aws / "spot-advisor-data.json",
                      json.dumps({"ranges": SPOT_ADVISOR_RANGES, "spot_advisor": advisor}, indent=1).encode())
    gcp = home / "reference" / "gcp"
    gcp.mkdir(parents=True, exist_ok=True)
    stamp = clock.start.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    lines = ["commit,commit_date,generated,machine_type,gpu_model,gpu_count,region,hour_ondemand_usd,hour_spot_usd,"
             "month_1y_cud_usd,month_3y_cud_usd,change_kind"]
    for (instance_type, region), (on_demand, spot, cud_month) in sorted(GCP_PRICES.items()):
        model, count = INSTANCE_GPUS[instance_type]
        lines.append(f"demo,{stamp},demo,{instance_type},{model.lower()},{count},{region},{on_demand},{spot},"
                     f"{cud_month or ''},,first_seen")
    _write_if_changed(gcp / "gcp_gpu_machine_price_changes.csv", ("\n".join(lines) + "\n").encode())


def generate(home: Path, *, days: int = 60, seed: int = 7, end: datetime = DEMO_END,
             scale: int = 1) -> FleetSummary:
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
    machines = _build_fleet(seed, scale)
    rows: dict[str, list[dict]] = {"aws": [], "gcp": [], "onprem": []}
    planted, metric_rows, hosts, steady = [], 0, set(), []
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
        if (m.spec.pricing == "on_demand" and m.spec.schedule == "always" and running.all() and m.spec.provider == "gcp"
                and m.spec.profile not in ("idle", "notebook") and GCP_PRICES[(m.spec.instance_type, m.region)][2]):
            steady.append(m)   # commitment ground truth: busy on-demand every hour, with a CUD price
    for stale in metrics_dir.glob("*.csv"):
        if stale.name not in hosts:
            stale.unlink()
    for provider_rows in rows.values():
        provider_rows.sort(key=lambda r: (r["ChargePeriodStart"], r["ResourceId"], r["ServiceCategory"]))
    onprem_rows = rows.pop("onprem")  # not exported: the `onprem` source costs the cluster from its config
    export_dirs = _write_exports(home, rows)
    _write_price_references(home, clock)
    commitments = _commitment_truth(steady)   # opportunities on healthy machines, not planted waste
    totals = {p: sum((r["EffectiveCost"] for r in provider_rows), Decimal(0))
              for p, provider_rows in {**rows, "onprem": onprem_rows}.items()}
    resource_map = {m.host: m.resource_id for m in machines}
    truth = {
        "generator": "simulator.demo_fleet", "seed": seed, "days": days,
        "window_start": clock.start.strftime("%Y-%m-%dT%H:%M:%SZ"), "window_end": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "idle_rule": f"an idle hour is a billed hour in which every GPU shows at most {IDLE_UTIL_PCT} % "
                     f"utilization.gpu in every nvidia-smi sample; idle_cost_usd sums the EffectiveCost of "
                     f"the resource's Compute lines in those hours; idle_gpu_hours = idle_hours x gpu_count",
        "onprem_cost_model": {"source": ONPREM_SOURCE, "cost_function": "ingest.onprem_cost.hourly_gpu_cost",
                              "power": "no power in the DCGM exposition: the TDP model from each GPU's mean "
                                       "utilization.gpu in the hour", "hours_per_month": HOURS_PER_MONTH,
                              "options": json.loads(json.dumps(onprem_options(
                                  [m for m in machines if m.spec.provider == "onprem"]), default=float))},
        "cost_by_provider_usd": {p: str(v) for p, v in totals.items()},
        "resource_map": resource_map,
        "machines": [{"host": m.host, "provider": m.spec.provider, "resource_id": m.resource_id,
                      "instance_type": m.spec.instance_type, "gpu_model": m.gpu_model, "gpu_count": m.gpu_count,
                      "team": m.spec.team, "workload": m.spec.workload, "pricing": m.spec.pricing,
                      "planted": m.spec.plant[0] if m.spec.plant else None} for m in machines],
        "planted": planted,
        "commitments": commitments,
    }
    truth_path = home / "ground_truth.json"
    _write_if_changed(truth_path, (json.dumps(truth, indent=2) + "\n").encode())
    return FleetSummary(home=home, export_dirs=export_dirs, metrics_dir=metrics_dir, ground_truth_path=truth_path,
                        resource_map=resource_map, machines=len(machines), gpus=sum(m.gpu_count for m in machines),
                        line_items=sum(len(r) for r in rows.values()), metric_rows=metric_rows,
                        cost_by_provider=totals, planted=planted)
