"""The demo fleet's machines and their bills: one FOCUS-named dict per cost line.

:func:`build_fleet` gives each :data:`~simulator.demo_workloads.FLEET` spec its host, billed resource
id and region; :func:`compute_lines` bills its running hours at the provider's prices (on-demand,
spot moving every 6 hours, committed), :func:`daily_lines` its block storage and egress. On-prem
node-hours are priced with the ``onprem`` source's own cost function (:func:`onprem_options` is
that source's config for the machines).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

import numpy as np

from gpufinops.simulator.demo_prices import (
    ACCOUNTS,
    AWS_ON_DEMAND_USD,
    AWS_RI_1Y_RATE,
    EGRESS_USD_PER_GB,
    GCP_PRICES,
    HOURS_PER_MONTH,
    ONPREM_NODE_TYPES,
    ONPREM_OPTIONS,
    ONPREM_SOURCE,
    PROVIDER_NAMES,
    REGION_NAMES,
    SERVICE_NAMES,
    STORAGE_USD_PER_GB_MONTH,
    money,
)
from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples
from gpufinops.simulator.demo_workloads import FLEET, INSTANCE_GPUS, Spec


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


def build_fleet(seed: int, scale: int = 1) -> list[Machine]:
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
            host, region, rid = str(spec.name), spec.zone.rsplit("-", 1)[0], gcp_resource_id(spec)
        else:
            node += 1
            host = rid = f"gpu-node-{node:02d}"
            region = spec.zone
        machines.append(Machine(spec, host, rid, model, count, region))
    return machines


def gcp_resource_id(spec: Spec) -> str:
    """A Google Cloud VM's billed resource id (its project is the team's)."""
    if spec.name is None:
        raise ValueError(f"a Google Cloud machine of the fleet needs its VM name: {spec}")
    project = _sub_account("gcp", spec.team)[0]
    return f"//compute.googleapis.com/projects/{project}/zones/{spec.zone}/instances/{spec.name}"


def _sub_account(provider: str, team: str) -> tuple[str, str]:
    subs = ACCOUNTS[provider][2]
    return subs.get(team, subs["*"])


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
    return {
        **ONPREM_OPTIONS,
        "node_groups": [
            {
                "name": kind,
                "nodes": [m.host for m in ms],
                "gpu_model": ms[0].gpu_model,
                "gpus_per_node": ms[0].gpu_count,
                **ONPREM_NODE_TYPES[kind],
            }
            for kind, ms in groups.items()
        ],
        "node_teams": {m.host: m.spec.team for m in machines},
        "node_tags": {
            m.host: {"workload": m.spec.workload, "checkpointing": str(m.spec.checkpointing).lower()} for m in machines
        },
    }


@functools.cache
def _gpu_specs() -> dict:
    from gpufinops.ingest.onprem.onprem_cost import specs_from_rows
    from gpufinops.warehouse.gpu_models import load_gpu_specs

    return specs_from_rows([(r["gpu_model"], r["tdp_w"], r["list_price_usd"]) for r in load_gpu_specs().to_pylist()])


def _onprem_rates(m: Machine, samples: Samples) -> list[Decimal]:
    """$/node-hour: the sum of its GPUs' hourly costs, priced as the `onprem` source prices them (the
    same function, from each GPU's mean utilisation in the hour; no power in the DCGM exposition)."""
    from gpufinops.ingest.onprem.onprem_cost import UTIL_STEP, hourly_gpu_cost, parse_cluster, quantity

    group = parse_cluster(ONPREM_SOURCE, onprem_options([m]), _gpu_specs()).groups[0]
    cost = functools.lru_cache(maxsize=None)(lambda util: hourly_gpu_cost(group, util, None).total)
    means = samples.util.reshape(-1, SAMPLES_PER_HOUR, m.gpu_count).mean(axis=1)
    return [sum((cost(quantity(float(u), UTIL_STEP)) for u in hour), Decimal(0)) for hour in means.tolist()]


def _unit_prices(
    m: Machine, clock: Clock, rng: np.random.Generator, samples: Samples
) -> tuple[list[Decimal], list[Decimal], str]:
    """(list $/h, billed $/h) per hour of the window, and the charge description."""
    spec, hours = m.spec, clock.hours
    if spec.provider == "aws":
        list_price = Decimal(AWS_ON_DEMAND_USD[spec.instance_type])
        listed = [list_price] * hours
        if spec.pricing == "spot":  # ~30–40 % of on-demand, moving every 6 hours, 4 decimals like AWS
            steps = rng.uniform(0.30, 0.40) * (1 + rng.normal(0, 0.02, hours // 6 + 1))
            billed = [Decimal(f"{float(list_price) * s:.4f}") for s in np.repeat(steps, 6)[:hours]]
            return listed, billed, f"Linux/UNIX (Amazon VPC), {spec.instance_type} Spot Instance-hour"
        if spec.pricing == "committed":
            rate = money(list_price * AWS_RI_1Y_RATE)
            return (
                listed,
                [rate] * hours,
                (f"USD {_plain(rate)} hourly fee per Linux/UNIX (Amazon VPC), {spec.instance_type} instance"),
            )
        return listed, listed, f"${_plain(list_price)} per On Demand Linux {spec.instance_type} Instance Hour"
    if spec.provider == "gcp":
        on_demand, spot, cud_month = GCP_PRICES[(spec.instance_type, m.region)]
        listed = [Decimal(on_demand)] * hours
        where = f"running in {REGION_NAMES[m.region]} ({m.region})"
        if spec.pricing == "spot":
            return listed, [Decimal(spot)] * hours, f"Spot Preemptible {spec.instance_type} {where}"
        if spec.pricing == "committed":
            if cud_month is None:
                raise ValueError(f"no 1-year CUD price for {spec.instance_type} in {m.region}")
            rate = money(Decimal(cud_month) / HOURS_PER_MONTH)
            return listed, [rate] * hours, f"Commitment v1: {spec.instance_type} in {m.region} for 1 Year"
        return listed, listed, f"{spec.instance_type} {where}"
    rates = _onprem_rates(m, samples)
    return rates, rates, f"{m.host} node-hour: {m.gpu_count}x {m.gpu_model} (the onprem source's cost model)"


@functools.cache
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
        "AvailabilityZone": None if spec.provider == "onprem" else spec.zone,
        "BillingAccountId": account_id,
        "BillingAccountName": account_name,
        "BillingCurrency": "USD",
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "InvoiceIssuerName": publisher,
        "ProviderName": provider_name,
        "PublisherName": publisher,
        "RegionId": m.region,
        "RegionName": REGION_NAMES[m.region],
        "ServiceName": SERVICE_NAMES[spec.provider],
        "SubAccountId": sub_id,
        "SubAccountName": sub_name,
        "Tags": json.dumps(tags, sort_keys=True),
    }


def _line(base: dict, start: datetime, period: timedelta, values: dict) -> dict:
    bp_start, bp_end = _month_bounds(start)
    return {
        **base,
        "BillingPeriodStart": bp_start,
        "BillingPeriodEnd": bp_end,
        "ChargePeriodStart": start,
        "ChargePeriodEnd": start + period,
        **values,
    }


def _costs(list_unit: Decimal, billed_unit: Decimal, contracted_unit: Decimal, quantity: Decimal) -> dict:
    billed = money(billed_unit * quantity)
    return {
        "ListUnitPrice": money(list_unit),
        "ListCost": money(list_unit * quantity),
        "ContractedUnitPrice": money(contracted_unit),
        "ContractedCost": money(contracted_unit * quantity),
        "BilledCost": billed,
        "EffectiveCost": billed,
        "ConsumedQuantity": money(quantity),
        "PricingQuantity": money(quantity),
    }


def compute_lines(
    m: Machine, clock: Clock, running: np.ndarray, rng: np.random.Generator, samples: Samples
) -> tuple[list[dict], dict[int, Decimal]]:
    """One line per running hour; also {hour index: EffectiveCost}."""
    spec = m.spec
    listed, billed, description = _unit_prices(m, clock, rng, samples)
    category = {"on_demand": "Standard", "spot": "Dynamic", "committed": "Committed"}[spec.pricing]
    fixed = {
        "ChargeDescription": description,
        "PricingCategory": category,
        "PricingUnit": "Hours",
        "ConsumedUnit": "Hours",
        "ResourceId": m.resource_id,
        "ServiceCategory": "Compute",
        "ServiceSubcategory": "Virtual Machines" if spec.provider != "onprem" else "GPU Nodes",
        "ResourceName": None if spec.provider == "aws" else m.host,
        "ResourceType": {"aws": "Instance", "gcp": "Virtual Machine", "onprem": "GPU Node"}[spec.provider],
        "SkuId": _sku(m),
        "SkuPriceId": f"{_sku(m)}.{spec.pricing}",
        "x_InstanceType": spec.instance_type,
        "x_GpuModel": m.gpu_model,
        "x_GpuCount": m.gpu_count,
    }
    if spec.pricing == "committed":
        fixed.update(
            CommitmentDiscountCategory="Usage",
            CommitmentDiscountStatus="Used",
            CommitmentDiscountType="Reserved Instance" if spec.provider == "aws" else "Committed Use Discount",
            CommitmentDiscountId=f"commitment-{_digest(m.resource_id)[:12]}",
        )
    lines, effective, base = [], {}, _base_line(m)
    for hour in np.flatnonzero(running).tolist():
        unit = billed[hour]
        contracted = unit if spec.pricing == "spot" else listed[hour]
        costs = _costs(listed[hour], unit, contracted, Decimal(1))
        lines.append(_line(base, clock.start + timedelta(hours=hour), timedelta(hours=1), {**fixed, **costs}))
        effective[hour] = costs["EffectiveCost"]
    return lines, effective


def daily_lines(m: Machine, clock: Clock, running: np.ndarray, rng: np.random.Generator) -> list[dict]:
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
        disk = {
            "ResourceId": disk_id,
            "ResourceType": "Volume",
            "ServiceSubcategory": "Block Storage",
            "ChargeDescription": f"$0.08 per GB-month of General Purpose SSD (gp3) provisioned storage - {region_name}",
        }
        egress = {
            "ServiceName": "AWS Data Transfer",
            "ChargeDescription": "$0.09 per GB - first 10 TB / month data transfer out beyond the global free tier",
        }
    else:
        disk_id = m.resource_id.replace("/instances/", "/disks/") + "-boot"
        disk = {
            "ResourceId": disk_id,
            "ResourceType": "Persistent Disk",
            "ServiceSubcategory": "Block Storage",
            "ChargeDescription": f"Balanced PD Capacity in {region_name}",
        }
        egress = {
            "ServiceName": "Networking",
            "ChargeDescription": f"Network Internet Data Transfer Out from {region_name}",
        }
    sku = _digest("storage", spec.provider, m.region).upper()[:16]
    storage = {
        **disk,
        "ServiceCategory": "Storage",
        "PricingCategory": "Standard",
        "ConsumedUnit": "GB-Mo",
        "PricingUnit": "GB-Mo",
        "SkuId": sku,
    }
    traffic = {
        **egress,
        "ResourceId": m.resource_id,
        "ServiceCategory": "Networking",
        "ServiceSubcategory": "Network Traffic",
        "PricingCategory": "Standard",
        "ConsumedUnit": "GB",
        "PricingUnit": "GB",
        "SkuId": _digest("egress", spec.provider).upper()[:16],
    }
    lines, base = [], _base_line(m)
    for day in days:
        start = clock.start + timedelta(days=day)
        charges = [(storage, STORAGE_USD_PER_GB_MONTH[spec.provider], Decimal(size_gb * 24) / HOURS_PER_MONTH)]
        if spec.workload == "online_inference":
            charges.append((traffic, EGRESS_USD_PER_GB[spec.provider], Decimal(f"{rng.uniform(80, 600):.3f}")))
        for fields, rate, quantity in charges:  # standard-priced: listed, contracted and billed at the rate
            lines.append(_line(base, start, timedelta(days=1), {**fields, **_costs(rate, rate, rate, quantity)}))
    return lines


def machine_truth(m: Machine, planted: str | None) -> dict:
    """A machine's entry in the demo's ground_truth.json: what it is, whose, how billed, what was planted on it."""
    return {
        "host": m.host,
        "provider": m.spec.provider,
        "resource_id": m.resource_id,
        "instance_type": m.spec.instance_type,
        "gpu_model": m.gpu_model,
        "gpu_count": m.gpu_count,
        "team": m.spec.team,
        "workload": m.spec.workload,
        "pricing": m.spec.pricing,
        "planted": planted,
    }
