"""The demo fleet simulator: deterministic files in the providers' formats, and a ground truth that
an independent reading of those files (DuckDB over the FOCUS exports, the nvidia-smi logs as text)
reproduces exactly."""

from __future__ import annotations

import csv
import functools
import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.aws.aws_cur2_format import CUR2_SCHEMA
from gpufinops.ingest.gcp.gcp_machines import GPU_MACHINE_TYPES
from gpufinops.simulator import demo_azure
from gpufinops.simulator.demo_fleet import DEMO_END, generate
from gpufinops.simulator.gcp_export import EXPORT_TABLE

DAYS = 7
IDLE_PCT = 5
SMI_HEADER = (
    "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], "
    "memory.total [MiB], memory.used [MiB], power.draw [W]"
)
SMI_ROW = re.compile(
    r"^(\d{4}/\d{2}/\d{2} \d{2}:(?:00|15|30|45):00\.000), (NVIDIA [A-Za-z0-9 -]+|Tesla T4), "
    r"(00000000:[0-9A-F]{2}:[0-9A-F]{2}\.\d), (GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}), "
    r"(\d), (\d{1,3}) %, (\d{1,3}) %, (\d+) MiB, (\d+) MiB, (\d+\.\d{2}) W$"
)
REAL_SMI_NAMES = {
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A10G",
    "NVIDIA L4",
    "Tesla T4",
    "NVIDIA L40S",
    "NVIDIA A40",
}


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """Two generations with the same seed, one with another seed."""
    out = {}
    for key, seed in (("a", 7), ("b", 7), ("c", 8)):
        home = tmp_path_factory.mktemp(f"demo_{key}")
        out[key] = (home, generate(home, days=DAYS, seed=seed))
    return out


@pytest.fixture(scope="module")
def home(homes):
    return homes["a"][0]


@pytest.fixture(scope="module")
def summary(homes):
    return homes["a"][1]


@pytest.fixture(scope="module")
def truth(home):
    return json.loads((home / "ground_truth.json").read_text())


def files_of(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


INVENTORY_CSV = Path(__file__).resolve().parent.parent / "warehouse" / "data" / "gpu_instance_types.csv"

# The AWS export is CUR 2.0: read it independently of ingest/aws/cur_mapping.py (RI hours effective at the RI
# rate, the RI fee effective for its unused hours, spot by usage type), money from its doubles' text.
AWS_CUR2_AS_FOCUS = """
    SELECT 'AWS' AS ProviderName, bill_payer_account_id AS BillingAccountId, line_item_resource_id AS ResourceId,
           CASE product_product_family WHEN 'Compute Instance' THEN 'Compute' WHEN 'Storage' THEN 'Storage'
                ELSE 'Networking' END AS ServiceCategory,
           CASE WHEN line_item_line_item_type = 'DiscountedUsage' THEN 'Committed'
                WHEN line_item_usage_type LIKE '%SpotUsage%' THEN 'Dynamic'
                WHEN line_item_line_item_type = 'Usage' THEN 'Standard' END AS PricingCategory,
           to_json(map_from_entries(list_transform(map_entries(resource_tags),  -- CUR 2.0 keys: user_<tag>
               lambda e: {{'k': regexp_replace(e.key, '^user_', ''), 'v': e.value}}))) AS Tags,
           -- the product map has no `gpu` key (as in many real CURs): the count is the inventory's
           (SELECT gpu_count FROM read_csv('{inventory}') WHERE instance_type = product['instance_type']) AS x_GpuCount,
           product['gpu'] AS product_gpu, line_item_usage_start_date AS ChargePeriodStart,
           CAST(pricing_public_on_demand_cost AS VARCHAR) AS ListCost, CAST(line_item_unblended_cost AS VARCHAR) AS BilledCost,
           CAST(CASE line_item_line_item_type WHEN 'DiscountedUsage' THEN reservation_effective_cost
                     WHEN 'RIFee' THEN reservation_unused_recurring_fee ELSE line_item_unblended_cost END AS VARCHAR)
               AS EffectiveCost
    FROM read_parquet('{home}/exports/aws/cur/*/data/*/*.parquet')"""


# The GCP export is the BigQuery billing export extracted as JSONL: read it independently of
# ingest/gcp/gcp_export_mapping.py (the GPU count from the machine_spec system label), money from its doubles' text.
GCP_EXPORT_AS_FOCUS = """
    SELECT 'Google Cloud' AS ProviderName, billing_account_id AS BillingAccountId, resource.name AS ResourceId,
           CASE WHEN service.description = 'Networking' THEN 'Networking' WHEN sku.description LIKE '%PD Capacity%'
                THEN 'Storage' ELSE 'Compute' END AS ServiceCategory,
           CASE WHEN sku.description LIKE 'Commitment v1:%' THEN 'Committed'
                WHEN sku.description LIKE 'Spot Preemptible%' THEN 'Dynamic' ELSE 'Standard' END AS PricingCategory,
           to_json(map_from_entries(list_transform(labels, lambda l: {{'k': l.key, 'v': l.value}}))) AS Tags,
           m.gpus AS x_GpuCount, CAST(replace(usage_start_time, ' UTC', '+00') AS TIMESTAMPTZ) AS ChargePeriodStart,
           CAST(cost_at_list AS VARCHAR) AS ListCost, CAST(cost AS VARCHAR) AS BilledCost,
           CAST(cost + coalesce(list_sum(list_transform(credits, lambda c: c.amount)), 0) AS VARCHAR) AS EffectiveCost
    FROM read_json('{home}/exports/gcp/billing/*.json', format = 'newline_delimited',
                   columns = {{billing_account_id: 'VARCHAR', resource: 'STRUCT(name VARCHAR)',
                              service: 'STRUCT(description VARCHAR)', sku: 'STRUCT(description VARCHAR)',
                              labels: 'STRUCT(key VARCHAR, value VARCHAR)[]',
                              system_labels: 'STRUCT(key VARCHAR, value VARCHAR)[]', usage_start_time: 'VARCHAR',
                              cost: 'DOUBLE', cost_at_list: 'DOUBLE', credits: 'STRUCT(amount DOUBLE)[]'}}) e
    LEFT JOIN (VALUES {gpus}) m(machine, gpus)
      ON m.machine = list_filter(e.system_labels, lambda l: l.key = 'compute.googleapis.com/machine_spec')[1].value"""


@pytest.fixture(scope="module")
def costs(home):
    """Every cost line of the three exports, read with DuckDB: money as exact decimals."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cols = (
        "ProviderName, BillingAccountId, ResourceId, ServiceCategory, PricingCategory, Tags, x_GpuCount, "
        "CAST(ChargePeriodStart AS TIMESTAMPTZ) AS start, CAST(ListCost AS DECIMAL(38,10)) AS list_cost, "
        "CAST(BilledCost AS DECIMAL(38,10)) AS billed, CAST(EffectiveCost AS DECIMAL(38,10)) AS effective"
    )
    aws = f"SELECT {cols}, product_gpu FROM ({AWS_CUR2_AS_FOCUS.format(home=home, inventory=INVENTORY_CSV)})"
    gpus = ", ".join(f"('{t}', {n})" for t, (_, n) in sorted(GPU_MACHINE_TYPES.items()))
    gcp = f"SELECT {cols} FROM ({GCP_EXPORT_AS_FOCUS.format(home=home, gpus=gpus)})"
    con.execute(f"CREATE TABLE costs AS {aws} UNION ALL BY NAME {gcp}")
    yield con
    con.close()


@functools.cache
def read_smi(path: Path) -> list[tuple]:
    """(timestamp, index, util %, mem used MiB, mem total MiB) per row; every row must match the format."""
    lines = path.read_text().splitlines()
    assert lines[0] == SMI_HEADER
    rows = []
    for line in lines[1:]:
        m = SMI_ROW.match(line)
        assert m, f"{path.name}: not an nvidia-smi row: {line!r}"
        t = m.group(1)
        stamp = datetime(int(t[:4]), int(t[5:7]), int(t[8:10]), int(t[11:13]), int(t[14:16]), tzinfo=UTC)
        assert m.group(2) in REAL_SMI_NAMES
        rows.append((stamp, int(m.group(5)), int(m.group(6)), int(m.group(9)), int(m.group(8))))
    return rows


def idle_hours_from_log(path: Path) -> tuple[set[datetime], set[datetime]]:
    """(hours with samples, hours where every GPU was at most IDLE_PCT in every sample)."""
    hour_max: dict[datetime, int] = defaultdict(int)
    for stamp, _, util, _, _ in read_smi(path):
        hour = stamp.replace(minute=0)
        hour_max[hour] = max(hour_max[hour], util)
    return set(hour_max), {h for h, u in hour_max.items() if u <= IDLE_PCT}


def compute_lines(costs, resource_id: str) -> dict[datetime, Decimal]:
    rows = costs.execute(
        "SELECT start, effective FROM costs WHERE ResourceId = ? AND ServiceCategory = 'Compute'", [resource_id]
    ).fetchall()
    by_hour = {start.astimezone(UTC): cost for start, cost in rows}
    assert len(by_hour) == len(rows), "one compute line per resource and hour"
    return by_hour


def test_same_seed_gives_identical_bytes_and_another_seed_differs(homes):
    a, b, c = (files_of(homes[k][0]) for k in "abc")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between two runs with the same seed"
    assert a["ground_truth.json"] != c["ground_truth.json"]
    for folder in ("exports/aws/", "exports/gcp/", "metrics/"):
        assert any(a[n] != c.get(n) for n in a if n.startswith(folder)), f"{folder} ignores the seed"


def test_rerun_into_the_same_home_rewrites_nothing(homes):
    home, first = homes["a"]
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()}
    again = generate(home, days=DAYS, seed=7)
    assert {p: p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()} == before
    assert again == first


def test_layout_counts_and_totals(home, summary, costs):
    aws = sorted(
        p.relative_to(home / "exports/aws/cur").as_posix() for p in (home / "exports/aws/cur").rglob("*") if p.is_file()
    )
    assert aws == [
        "gpufinops-demo/data/BILLING_PERIOD=2026-10/gpufinops-demo-00001.snappy.parquet",
        "gpufinops-demo/metadata/BILLING_PERIOD=2026-10/gpufinops-demo-Manifest.json",
    ]
    assert sorted(p.name for p in (home / "exports/gcp/billing").iterdir()) == [
        f"{EXPORT_TABLE}-202610-000000000000.json"
    ]
    assert not (home / "exports/onprem").exists()  # the `onprem` source costs the cluster from its config
    assert summary.export_dirs["aws"] == home / "exports/aws/cur"
    assert 25 <= summary.machines <= 40 and 80 <= summary.gpus <= 140  # 5 Azure VMs and 15 GPUs of those
    logs = sorted(summary.metrics_dir.glob("*.csv"))
    # a DCGM history each, no nvidia-smi log (the Azure subscription's: tests/test_demo_azure.py)
    dcgm_only = summary.mig_hosts | summary.shared_hosts | summary.azure_hosts
    assert len(logs) == summary.machines - len(dcgm_only) == len(summary.resource_map) - len(dcgm_only)
    assert {p.stem for p in logs} == set(summary.resource_map) - dcgm_only
    assert [p.stem for p in (home / "metrics/dcgm-mig").glob("*.prom")] == sorted(summary.mig_hosts)
    assert [p.stem for p in (home / "metrics/dcgm-shared").glob("*.prom")] == sorted(summary.shared_hosts)
    assert summary.metric_rows == sum(len(p.read_text().splitlines()) - 1 for p in logs)
    azure_rows = sum(json.loads(p.read_text())["dataRowCount"] for p in (home / "exports/azure").rglob("manifest.json"))
    assert summary.line_items == costs.execute("SELECT count(*) FROM costs").fetchone()[0] + azure_rows
    totals = dict(costs.execute("SELECT ProviderName, sum(effective) FROM costs GROUP BY 1").fetchall())
    assert totals == {"AWS": summary.cost_by_provider["aws"], "Google Cloud": summary.cost_by_provider["gcp"]}
    for host, rid in summary.resource_map.items():
        if host.startswith("ip-10-0-"):
            assert re.fullmatch(r"i-0[0-9a-f]{16}", rid)
        elif host.startswith("gpu-node-"):
            assert rid == host
        elif host in summary.azure_hosts:
            assert rid.startswith(f"/subscriptions/{demo_azure.SUBSCRIPTION}/resourcegroups/")
        else:
            assert rid == re.sub(r"[^/]+$", host, rid) and rid.startswith("//compute.googleapis.com/projects/")
    assert costs.execute("SELECT count(product_gpu) FROM costs").fetchone()[0] == 0  # no GPU attribute billed
    gpu_share = costs.execute(
        "SELECT sum(effective) FILTER (x_GpuCount IS NOT NULL) / sum(effective) FROM costs"
    ).fetchone()[0]
    assert Decimal("0.8") < gpu_share < 1


def test_every_planted_item_is_billed_and_logged(summary, truth, costs):
    assert truth["planted"] == summary.planted
    planted = [p for p in truth["planted"] if p["provider"] != "azure"]  # tests/test_demo_azure.py
    kinds = sorted((p["kind"], p["variant"], p["provider"]) for p in truth["planted"])
    assert [k for k in kinds if k[0] == "idle_gpu"] == [
        ("idle_gpu", "always_idle", "aws"),
        ("idle_gpu", "always_idle", "azure"),
        ("idle_gpu", "always_idle", "azure"),
        ("idle_gpu", "always_idle", "gcp"),
        ("idle_gpu", "idle_off_hours", "aws"),
        ("idle_gpu", "idle_off_hours", "gcp"),
    ]
    assert {k[0] for k in kinds} == {"idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix"}
    assert len(truth["planted"]) < summary.machines / 3, "most of the fleet must be free of waste"
    for item in planted:
        assert item["hosts"] == [item["host"]] and summary.resource_map[item["host"]] == item["resource_id"]
        assert (summary.metrics_dir / f"{item['host']}.csv").exists()
        hours = compute_lines(costs, item["resource_id"])
        assert len(hours) == item["billed_hours"] > 0
        assert sum(hours.values()) == Decimal(item["cost_usd"])


def test_idle_cost_equals_a_recomputation_from_the_files(summary, truth, costs):
    for item in (p for p in truth["planted"] if p["kind"] == "idle_gpu" and p["provider"] != "azure"):
        logged, idle = idle_hours_from_log(summary.metrics_dir / f"{item['host']}.csv")
        billed = compute_lines(costs, item["resource_id"])
        assert logged == set(billed), "metrics exist exactly for the billed hours"
        assert item["idle_hours"] == len(idle) > 0
        assert item["idle_gpu_hours"] == len(idle) * item["gpu_count"]
        assert Decimal(item["idle_cost_usd"]) == sum(billed[h] for h in idle)
        if item["variant"] == "always_idle":
            assert idle == logged
        else:
            off_hours = {h for h in logged if h.weekday() >= 5 or not 9 <= h.hour < 18}
            assert idle == off_hours and len(idle) < len(logged)


def test_machines_without_planted_waste_are_never_idle(summary, truth):
    planted_hosts = {p["host"] for p in truth["planted"] if p["kind"] == "idle_gpu"}
    for host in set(summary.resource_map) - summary.mig_hosts - summary.shared_hosts - summary.azure_hosts:
        if host not in planted_hosts:
            _, idle = idle_hours_from_log(summary.metrics_dir / f"{host}.csv")
            assert not idle, f"{host} has idle hours but nothing was planted there"


def test_planted_patterns_show_in_the_data(summary, truth, costs):
    by_kind = {p["kind"]: p for p in truth["planted"]}
    gpu_count = read_smi(summary.metrics_dir / f"{by_kind['gpu_count']['host']}.csv")
    busy = [u for _, i, u, _, _ in gpu_count if i < 2]
    assert max(u for _, i, u, _, _ in gpu_count if i >= 2) < 5 and min(busy) >= 60 and max(busy) <= 90
    small = read_smi(summary.metrics_dir / f"{by_kind['gpu_type']['host']}.csv")
    assert all(15 <= u <= 25 and 16 * 1024 <= mem <= 18 * 1024 and total >= 80 * 1024 for _, _, u, mem, total in small)
    fp32 = read_smi(summary.metrics_dir / f"{by_kind['quantization']['host']}.csv")
    assert all(29 * 1024 <= mem <= 31 * 1024 and total == 40960 for _, _, _, mem, total in fp32)
    for kind, tag, value in (("quantization", "precision", "fp32"), ("spot_mix", "checkpointing", "true")):
        rows = costs.execute(
            "SELECT DISTINCT Tags, PricingCategory FROM costs WHERE ResourceId = ? AND ServiceCategory = 'Compute'",
            [by_kind[kind]["resource_id"]],
        ).fetchall()
        assert [(json.loads(t)[tag], pc) for t, pc in rows] == [(value, "Standard")]


def test_one_row_per_gpu_per_quarter_hour_while_running(summary, truth, costs):
    machines = {m["host"]: m for m in truth["machines"]}
    for host, rid in summary.resource_map.items():
        if host in summary.mig_hosts | summary.shared_hosts | summary.azure_hosts:
            continue
        rows = read_smi(summary.metrics_dir / f"{host}.csv")
        per_stamp: dict[datetime, list[int]] = defaultdict(list)
        for stamp, index, *_ in rows:
            per_stamp[stamp].append(index)
        if machines[host]["provider"] == "onprem":  # no export: always running, costed by the onprem source
            gpus = machines[host]["gpu_count"]
            billed = {DEMO_END - timedelta(hours=h + 1) for h in range(DAYS * 24)}
        else:
            gpus = costs.execute(
                "SELECT any_value(x_GpuCount) FROM costs WHERE ResourceId = ? AND ServiceCategory = 'Compute'", [rid]
            ).fetchone()[0]
            billed = set(compute_lines(costs, rid))
        assert all(indices == list(range(int(gpus))) for indices in per_stamp.values())
        assert {s.replace(minute=0) for s in per_stamp} == billed
        assert len(per_stamp) == 4 * len(billed)
        assert min(billed) >= DEMO_END - timedelta(days=DAYS) and max(billed) < DEMO_END


def test_gcp_billing_export_rows_are_bigquery_extract_json(home):
    lines = (home / f"exports/gcp/billing/{EXPORT_TABLE}-202610-000000000000.json").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    for row in rows:
        assert row["billing_account_id"] == "01A2B3-C4D5E6-F7A8B9" and row["invoice"] == {"month": "202610"}
        assert re.fullmatch(r"2026-\d{2}-\d{2} \d{2}:00:00 UTC", row["usage_start_time"])
        assert row["export_time"] > row["usage_end_time"] and row["cost_type"] == "regular" and row["credits"] == []
        assert isinstance(row["cost"], float) and isinstance(row["cost_at_list"], float) and row["currency"] == "USD"
        assert row["service"]["description"] in ("Compute Engine", "Networking") and row["sku"]["description"]
        tags = {label["key"]: label["value"] for label in row["labels"]}
        # every machine but the one the demo leaves untagged (as real accounts do) names its team
        untagged = "/vision-batch-a2" in (row["resource"]["name"] or "")  # its VM and its boot disk
        assert ({"workload", "checkpointing"} if untagged else {"team", "workload", "checkpointing"}) <= tags.keys()
        assert ("team" in tags) != bool(untagged)
        assert ("precision" in tags) == tags["workload"].endswith("inference")
        machine = [
            label["value"] for label in row["system_labels"] if label["key"] == "compute.googleapis.com/machine_spec"
        ]
        assert len(machine) == (row["usage"]["pricing_unit"] == "hour")  # compute lines name their machine type
        if row["sku"]["description"].startswith("Spot Preemptible"):
            assert row["cost"] < row["cost_at_list"]
    assert any(row["system_labels"] for row in rows) and any(not row["system_labels"] for row in rows)


def test_aws_cur2_export_keeps_account_ids_and_the_cur2_schema(home):
    export = home / "exports/aws/cur/gpufinops-demo"
    table = pq.read_table(next((export / "data").rglob("*.parquet")))
    assert table.schema == CUR2_SCHEMA
    assert set(table.column("bill_payer_account_id").to_pylist()) == {"012345678901"}
    assert set(table.column("line_item_usage_account_id").to_pylist()) <= {"023456789012", "004455667788"}
    for money in ("line_item_unblended_cost", "pricing_public_on_demand_cost", "reservation_effective_cost"):
        assert table.schema.field(money).type == pa.float64()
    assert table.schema.field("resource_tags").type == pa.map_(pa.string(), pa.string())
    kinds = set(table.column("line_item_line_item_type").to_pylist())
    assert kinds == {"Usage", "DiscountedUsage", "RIFee"}
    od = [d for d in table.column("line_item_line_item_description").to_pylist() if "On Demand" in d]
    assert "$21.957642 per On Demand Linux p4d.24xlarge Instance Hour" in od
    manifest = json.loads(next((export / "metadata").rglob("*-Manifest.json")).read_text())
    assert manifest["billingPeriod"]["start"] == "2026-10-01T00:00:00.000Z"
    assert manifest["dataFiles"] == [
        "s3://acme-billing/cur/gpufinops-demo/data/BILLING_PERIOD=2026-10/gpufinops-demo-00001.snappy.parquet"
    ]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="days"):
        generate(tmp_path, days=3)
    with pytest.raises(ValueError, match="UTC"):
        generate(tmp_path, end=datetime(2026, 11, 1))


def test_onprem_cost_is_the_onprem_source_model_over_the_logged_utilisation(summary, truth):
    """The ground truth's on-prem cost, recomputed from the nvidia-smi logs' utilisation with the
    onprem source's cost model written out: amortised GPU (gpu_specs list price) + node share, the TDP
    power model (the DCGM exposition carries no power), facility and operations."""
    model = truth["onprem_cost_model"]
    options, q = model["options"], Decimal("1E-10")
    assert model["source"] == "onprem" and model["hours_per_month"] == 730
    with open(Path(__file__).parent.parent / "warehouse" / "data" / "gpu_specs.csv", newline="") as f:
        specs = {r["gpu_model"]: r for r in csv.DictReader(f)}
    per_kwh = Decimal(str(options["pue"])) * Decimal(str(options["energy_usd_per_kwh"])) / 1000
    node_month = Decimal(options["facility_usd_per_node_month"]) + Decimal(options["operations_usd_per_node_month"])
    total, hosts = Decimal(0), set()
    for group in options["node_groups"]:
        n, spec = group["gpus_per_node"], specs[group["gpu_model"]]
        tdp, idle = Decimal(spec["tdp_w"]), Decimal(str(group["idle_power_w"]))
        node_price = sum(Decimal(group[k]) for k in ("server_price_usd", "network_price_usd", "storage_price_usd"))
        hardware = (
            (Decimal(spec["list_price_usd"]) + node_price / n) / (options["amortisation_months"] * 730)
        ).quantize(q)
        facility = (node_month / n / 730).quantize(q)
        for host in group["nodes"]:
            hosts.add(host)
            util: dict[tuple[datetime, int], int] = defaultdict(int)
            for stamp, index, pct, _, _ in read_smi(summary.metrics_dir / f"{host}.csv"):
                util[(stamp.replace(minute=0), index)] += pct
            assert len(util) == DAYS * 24 * n
            for busy in util.values():
                watts = idle + (tdp - idle) * (Decimal(busy) / 4).quantize(Decimal("0.01")) / 100
                energy = ((watts + Decimal(options["host_power_w"]) / n) * per_kwh).quantize(q)
                total += hardware + energy + facility
    assert hosts == {m["host"] for m in truth["machines"] if m["provider"] == "onprem"}
    assert total == Decimal(truth["cost_by_provider_usd"]["onprem"]) == summary.cost_by_provider["onprem"]


def test_the_shared_node_has_one_pod_per_gpu_and_two_teams_leave_a_gpu_idle(summary, truth, costs):
    """simulator/demo_shared.py: the DCGM history labels each GPU with its pod; research's notebook and nlp's
    stalled job hold their GPUs at 0 % for the hours the ground truth records, the trainers never idle."""
    (host,) = summary.shared_hosts
    node = next(m for m in truth["machines"] if m["host"] == host)
    assert (node["instance_type"], node["gpu_count"], node["team"]) == ("g5.12xlarge", 4, "platform")
    text = (summary.home / "metrics/dcgm-shared" / f"{host}.prom").read_text()
    util: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in text.splitlines():
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
            labels, value, ms = line[len("DCGM_FI_DEV_GPU_UTIL{") :].rsplit(" ", 2)
            found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            util[(found["namespace"], found["pod"])][int(ms) // 3_600_000].append(float(value))
    assert sorted(util) == sorted((p["namespace"], p["pod"]) for p in node["pods"])
    idle = {ns: sum(1 for v in hours.values() if max(v) == 0) for (ns, _), hours in util.items()}
    assert {ns: idle[ns] for ns in node["idle_pod_hours"]} == node["idle_pod_hours"]
    assert idle["speech"] == 0 and all(h > 72 for h in node["idle_pod_hours"].values())
    hours = compute_lines(costs, node["resource_id"])
    assert len(hours) == DAYS * 24  # always on, billed every hour
