"""A deterministic simulated GPU fleet with planted waste: the input of ``gpufinops demo``.

``generate(home)`` writes, in the providers' native formats, ``days`` of a two-cloud + on-prem
fleet ending at :data:`DEMO_END` (fixed, so a seed gives the same numbers on any day)::

    home/exports/aws/cur/gpufinops-demo/…          AWS CUR 2.0 Data Export (Parquet + manifest per billing
                                                   month, the bucket's own layout; see ingest/aws/aws_cur2_format.py)
    home/exports/gcp/billing/<table>-YYYYMM-….json Google Cloud billing export rows (BigQuery JSONL extract,
                                                   one file per invoice month; see simulator/gcp_export.py)
    home/metrics/nvidia-smi/<host>.csv             nvidia-smi --query-gpu=… --format=csv -l 900
    home/metrics/dcgm-mig/<host>.prom              the MIG GPU's DCGM exporter history (simulator/demo_mig.py)
    home/metrics/dcgm-shared/<host>.prom           the shared node's DCGM exporter history, with its pods
                                                   (simulator/demo_shared.py)
    home/metrics/serving/<pod>.prom                the inference servers' counters (simulator/demo_serving.py)
    home/exports/azure/cost/gpufinops/…            the Azure subscription's Cost Management FocusCost export runs
                                                   (manifest.json + CSV per month, simulator/demo_azure.py)
    home/metrics/dcgm-azure/<host>.prom            its VMs' and AKS nodes' DCGM exporter histories
    home/ground_truth.json                         what was planted, with exact quantities

Prices are hard-coded (the demo runs from a fresh clone without ``shared/``); each table names
the reference file it was copied from. Money is ``Decimal`` quantised to 10 fractional digits.
The on-prem cluster is no export: ``gpufinops demo`` configures it as an ``onprem`` source
(:data:`simulator.demo_prices.ONPREM_OPTIONS`, recorded in ground_truth.json), and its ground-truth cost is priced with the
source's own :func:`ingest.onprem.onprem_cost.hourly_gpu_cost` from each GPU's mean utilisation in the hour
(the on-prem hosts' DCGM exposition carries no power, so the TDP model). Committed usage is billed at
the committed rate on the usage line (no separate commitment-fee line), except on AWS where, as in
a real CUR, a Reserved Instance's hours are ``DiscountedUsage`` lines (billed 0, effective cost the RI
rate) and the month's ``RIFee`` line bills the RI for every hour of the window (its unused hours are
its effective cost). Randomness comes only
from ``random.Random(seed)`` and ``numpy.random.default_rng((seed, machine))``; nothing reads the
clock, and a file whose bytes would not change is not rewritten.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpufinops.simulator import (
    azure_export,
    cur2_export,
    demo_azure,
    demo_mig,
    demo_serving,
    demo_shared,
    demo_storage,
    gcp_export,
)
from gpufinops.simulator.cur2_export import aws_reserved_instance
from gpufinops.simulator.demo_billing import (
    Machine,
    build_fleet,
    compute_lines,
    daily_lines,
    machine_truth,
    onprem_options,
)
from gpufinops.simulator.demo_prices import (
    AWS_SPOT_ADVISOR,
    GCP_PRICES,
    GCP_PRICES_FILE,
    GCP_PRICES_HEADER,
    HOURS_PER_MONTH,
    ONPREM_SOURCE,
    SPOT_ADVISOR_FILE,
    SPOT_ADVISOR_RANGES,
)
from gpufinops.simulator.demo_profiles import Clock, gpu_samples, running_hours
from gpufinops.simulator.demo_smi import sample_stamps, smi_log
from gpufinops.simulator.demo_truth import IDLE_UTIL_PCT, commitment_truth, planted_entry
from gpufinops.simulator.demo_workloads import GPU_HARDWARE, INSTANCE_GPUS
from gpufinops.simulator.month_files import write_if_changed, write_months
from gpufinops.warehouse import cost_schema

DEMO_END = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass(frozen=True)
class FleetSummary:
    home: Path
    export_dirs: dict[str, Path]  # provider -> FOCUS export folder
    metrics_dir: Path  # nvidia-smi logs, one <host>.csv per host
    ground_truth_path: Path
    resource_map: dict[str, str]  # host -> billed ResourceId (every host)
    machines: int
    gpus: int
    line_items: int
    metric_rows: int
    cost_by_provider: dict[str, Decimal]  # sum of EffectiveCost, every line
    planted: list[dict] = field(default_factory=list)
    onprem_hosts: frozenset[str] = frozenset()  # the private cluster's hosts (the rest are cloud machines)
    mig_hosts: frozenset[str] = frozenset()  # hosts whose GPUs run MIG: a DCGM history, no nvidia-smi log
    shared_hosts: frozenset[str] = frozenset()  # shared Kubernetes nodes: a DCGM history with pods, no nvidia-smi log
    azure_hosts: frozenset[str] = frozenset()  # the Azure subscription's VMs and AKS nodes: a DCGM history each
    aks_hosts: frozenset[str] = frozenset()  # of those, the AKS nodes (attributed by their providerID)


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


# ---- writers ------------------------------------------------------------------------------------

OUTPUT_SCHEMA = pa.schema(
    [f for f in cost_schema.COST_LINE_ITEMS if f.name not in ("x_Team", "x_Source", "x_IngestRunId")]
)


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
        by_month: dict[str, list[dict]] = {}
        for row in rows:
            by_month.setdefault(row["BillingPeriodStart"].strftime("%Y-%m"), []).append(row)
        files = {f"focus-{month}.csv": _focus_csv(month_rows) for month, month_rows in by_month.items()}
        dirs[provider] = write_months(home / "exports" / provider / "focus", "focus-*.csv", files)
    return dirs


def _write_price_references(home: Path, clock: Clock) -> None:
    """The price reference files the demo's config loads: the spot advisor feed (AWS) and a one-revision
    GCP price file in Cyclenerd's format (the prices the demo bills at, effective from the window start)."""
    advisor: dict = {}
    for (region, instance_type), (saving, band) in sorted(AWS_SPOT_ADVISOR.items()):
        advisor.setdefault(region, {"Linux": {}})["Linux"][instance_type] = {"s": saving, "r": band}
    (home / SPOT_ADVISOR_FILE).parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(
        home / SPOT_ADVISOR_FILE,
        json.dumps({"ranges": SPOT_ADVISOR_RANGES, "spot_advisor": advisor}, indent=1).encode(),
    )
    (home / GCP_PRICES_FILE).parent.mkdir(parents=True, exist_ok=True)
    stamp = clock.start.strftime("%Y-%m-%dT%H:%M:%S+00:00")
    lines = [GCP_PRICES_HEADER]
    for (instance_type, region), (on_demand, spot, cud_month) in sorted(GCP_PRICES.items()):
        model, count = INSTANCE_GPUS[instance_type]
        lines.append(
            f"demo,{stamp},demo,{instance_type},{model.lower()},{count},{region},{on_demand},{spot},"
            f"{cud_month or ''},,first_seen"
        )
    write_if_changed(home / GCP_PRICES_FILE, ("\n".join(lines) + "\n").encode())


def _steady(m: Machine, running: np.ndarray) -> bool:
    """The commitment ground truth's machines: GCP on-demand, billed and busy every hour of the window (no
    idle or notebook profile), on a machine type with a 1-year CUD price."""
    return bool(
        m.spec.pricing == "on_demand"
        and m.spec.schedule == "always"
        and running.all()
        and m.spec.provider == "gcp"
        and m.spec.profile not in ("idle", "notebook")
        and GCP_PRICES[(m.spec.instance_type, m.region)][2]
    )


def generate(home: Path, *, days: int = 60, seed: int = 7, end: datetime = DEMO_END, scale: int = 1) -> FleetSummary:
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
    machines = build_fleet(seed, scale)
    rows: dict[str, list[dict]] = {"aws": [], "gcp": [], "onprem": []}
    planted, metric_rows, hosts, steady = [], 0, set(), []
    for number, m in enumerate(machines):
        rng = np.random.default_rng((seed, number))
        running = running_hours(m.spec.schedule, clock, rng)
        samples = gpu_samples(m.spec.profile, GPU_HARDWARE[m.gpu_model], m.gpu_count, clock, rng)
        compute, effective = compute_lines(m, clock, running, rng, samples)
        if m.spec.provider == "aws" and m.spec.pricing == "committed":
            compute += aws_reserved_instance(m, clock, running, compute)
        rows[m.spec.provider] += compute + daily_lines(m, clock, running, rng)
        log, count = smi_log(m.spec.provider, m.host, m.gpu_model, m.gpu_count, running, samples, stamps, seed)
        write_if_changed(metrics_dir / f"{m.host}.csv", log)
        metric_rows += count
        hosts.add(f"{m.host}.csv")
        if m.spec.plant:
            planted.append(planted_entry(m, clock, running, samples, effective))
        if _steady(m, running):
            steady.append(m)
    for stale in metrics_dir.glob("*.csv"):
        if stale.name not in hosts:
            stale.unlink()
    mig = demo_mig.generate(clock, seed)  # the MIG-partitioned GPU (simulator/demo_mig.py): its own random stream
    rows["gcp"] += mig.lines
    demo_mig.write_exposition(home / "metrics" / "dcgm-mig", mig)
    if _steady(mig.machine, mig.running):  # an always-on on-demand serving VM: a CUD covers it like any other
        steady.append(mig.machine)
    shared = demo_shared.generate(clock, seed)  # the shared node (simulator/demo_shared.py): its own random stream
    rows["aws"] += shared.lines
    demo_shared.write_exposition(home / "metrics" / "dcgm-shared", shared)
    rows["aws"] += demo_storage.bill_rows(machines, end)  # the storage GPU work leaves (simulator/demo_storage.py)
    azure = demo_azure.generate(clock, seed)  # the Azure subscription (simulator/demo_azure.py): its own stream
    demo_azure.write_expositions(home / "metrics" / "dcgm-azure", azure, clock, seed)
    for provider_rows in rows.values():
        provider_rows.sort(key=lambda r: (r["ChargePeriodStart"], r["ResourceId"], r["ServiceCategory"]))
    onprem_rows = rows.pop("onprem")  # not exported: the `onprem` source costs the cluster from its config
    export_dirs = _write_exports(home, rows)
    export_dirs["azure"] = azure_export.write_export(home / "exports" / "azure" / "cost", azure.rows)
    served = [*machines, mig.machine, shared.machine, *azure.machines]
    demo_serving.write_serving_exports(home / "metrics" / "serving", served, clock.start, end, seed)
    _write_price_references(home, clock)
    commitments = commitment_truth(steady)  # opportunities on healthy machines, not planted waste
    totals = {
        p: sum((r["EffectiveCost"] for r in provider_rows), Decimal(0))
        for p, provider_rows in {**rows, "onprem": onprem_rows}.items()
    }
    totals["azure"] = azure.total
    resource_map = {m.host: m.resource_id for m in served}
    truth = {
        "generator": "gpufinops.simulator.demo_fleet",
        "seed": seed,
        "days": days,
        "window_start": clock.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "window_end": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "idle_rule": f"an idle hour is a billed hour in which every GPU shows at most {IDLE_UTIL_PCT} % "
        f"utilization.gpu in every nvidia-smi sample; idle_cost_usd sums the EffectiveCost of "
        f"the resource's Compute lines in those hours; idle_gpu_hours = idle_hours x gpu_count",
        "onprem_cost_model": {
            "source": ONPREM_SOURCE,
            "cost_function": "gpufinops.ingest.onprem.onprem_cost.hourly_gpu_cost",
            "power": "no power in the DCGM exposition: the TDP model from each GPU's mean utilization.gpu in the hour",
            "hours_per_month": HOURS_PER_MONTH,
            "options": json.loads(
                json.dumps(onprem_options([m for m in machines if m.spec.provider == "onprem"]), default=float)
            ),
        },
        "cost_by_provider_usd": {p: str(v) for p, v in totals.items()},
        "resource_map": resource_map,
        "machines": [machine_truth(m, m.spec.plant[0] if m.spec.plant else None) for m in machines]
        + [demo_mig.truth(mig.machine), demo_shared.truth(shared)]
        + demo_azure.truth(azure),
        "planted": planted + azure.planted,
        "commitments": commitments,
    }
    truth_path = home / "ground_truth.json"
    write_if_changed(truth_path, (json.dumps(truth, indent=2) + "\n").encode())
    return FleetSummary(
        home=home,
        export_dirs=export_dirs,
        metrics_dir=metrics_dir,
        ground_truth_path=truth_path,
        resource_map=resource_map,
        machines=len(served),
        gpus=sum(m.gpu_count for m in served),
        line_items=sum(len(r) for r in rows.values()) + len(azure.rows),
        metric_rows=metric_rows,
        cost_by_provider=totals,
        planted=planted + azure.planted,
        onprem_hosts=frozenset(m.host for m in machines if m.spec.provider == "onprem"),
        mig_hosts=frozenset([mig.machine.host]),
        shared_hosts=frozenset([shared.machine.host]),
        azure_hosts=frozenset(n.host for n in azure.nodes),
        aks_hosts=frozenset(n.host for n in azure.nodes if n.provider_id),
    )
