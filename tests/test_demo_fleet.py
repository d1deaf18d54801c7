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

from ingest.aws_cur2_format import CUR2_SCHEMA
from jobs.demo_fleet import DEMO_END, generate

DAYS = 7
IDLE_PCT = 5
SMI_HEADER = ("timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], "
              "memory.total [MiB], memory.used [MiB], power.draw [W]")
SMI_ROW = re.compile(
    r"^(\d{4}/\d{2}/\d{2} \d{2}:(?:00|15|30|45):00\.000), (NVIDIA [A-Za-z0-9 -]+|Tesla T4), "
    r"(00000000:[0-9A-F]{2}:[0-9A-F]{2}\.\d), (GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}), "
    r"(\d), (\d{1,3}) %, (\d{1,3}) %, (\d+) MiB, (\d+) MiB, (\d+\.\d{2}) W$")
REAL_SMI_NAMES = {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA A10G",
                  "NVIDIA L4", "Tesla T4", "NVIDIA L40S", "NVIDIA A40"}


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


# The AWS export is CUR 2.0: read it independently of ingest/cur_mapping.py (RI hours effective at the RI
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
           TRY_CAST(product['gpu'] AS INTEGER) AS x_GpuCount,
           line_item_usage_start_date AS ChargePeriodStart,
           CAST(pricing_public_on_demand_cost AS VARCHAR) AS ListCost, CAST(line_item_unblended_cost AS VARCHAR) AS BilledCost,
           CAST(CASE line_item_line_item_type WHEN 'DiscountedUsage' THEN reservation_effective_cost
                     WHEN 'RIFee' THEN reservation_unused_recurring_fee ELSE line_item_unblended_cost END AS VARCHAR)
               AS EffectiveCost
    FROM read_parquet('{home}/exports/aws/cur/*/data/*/*.parquet')"""


@pytest.fixture(scope="module")
def costs(home):
    """Every cost line of the three exports, read with DuckDB: money as exact decimals."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    cols = ('ProviderName, BillingAccountId, ResourceId, ServiceCategory, PricingCategory, Tags, x_GpuCount, '
            'CAST(ChargePeriodStart AS TIMESTAMPTZ) AS start, CAST(ListCost AS DECIMAL(38,10)) AS list_cost, '
            'CAST(BilledCost AS DECIMAL(38,10)) AS billed, CAST(EffectiveCost AS DECIMAL(38,10)) AS effective')
    aws = f"SELECT {cols} FROM ({AWS_CUR2_AS_FOCUS.format(home=home)})"
    text = (f"SELECT {cols} FROM read_csv(['{home}/exports/gcp/focus/*.csv', '{home}/exports/onprem/focus/*.csv'], "
            f"header = true, all_varchar = true, nullstr = 'NULL', quote = '\"', escape = '\"')")
    con.execute(f"CREATE TABLE costs AS {aws} UNION ALL BY NAME {text}")
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
    rows = costs.execute("SELECT start, effective FROM costs WHERE ResourceId = ? AND ServiceCategory = 'Compute'",
                         [resource_id]).fetchall()
    by_hour = {start.astimezone(UTC): cost for start, cost in rows}
    assert len(by_hour) == len(rows), "one compute line per resource and hour"
    return by_hour


def test_same_seed_gives_identical_bytes_and_another_seed_differs(homes):
    a, b, c = (files_of(homes[k][0]) for k in "abc")
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between two runs with the same seed"
    assert a["ground_truth.json"] != c["ground_truth.json"]
    for folder in ("exports/aws/", "exports/gcp/", "exports/onprem/", "metrics/"):
        assert any(a[n] != c.get(n) for n in a if n.startswith(folder)), f"{folder} ignores the seed"


def test_rerun_into_the_same_home_rewrites_nothing(homes):
    home, first = homes["a"]
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()}
    again = generate(home, days=DAYS, seed=7)
    assert {p: p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()} == before
    assert again == first


def test_layout_counts_and_totals(home, summary, costs):
    aws = sorted(p.relative_to(home / "exports/aws/cur").as_posix() for p in (home / "exports/aws/cur").rglob("*") if p.is_file())
    assert aws == ["gpufinops-demo/data/BILLING_PERIOD=2026-10/gpufinops-demo-00001.snappy.parquet",
                   "gpufinops-demo/metadata/BILLING_PERIOD=2026-10/gpufinops-demo-Manifest.json"]
    assert sorted(p.name for p in (home / "exports/gcp/focus").iterdir()) == ["focus-2026-10.csv"]
    assert sorted(p.name for p in (home / "exports/onprem/focus").iterdir()) == ["focus-2026-10.csv"]
    assert summary.export_dirs["aws"] == home / "exports/aws/cur"
    assert 25 <= summary.machines <= 35 and 80 <= summary.gpus <= 120
    logs = sorted(summary.metrics_dir.glob("*.csv"))
    assert len(logs) == summary.machines == len(summary.resource_map)
    assert {p.stem for p in logs} == set(summary.resource_map)
    assert summary.metric_rows == sum(len(p.read_text().splitlines()) - 1 for p in logs)
    assert summary.line_items == costs.execute("SELECT count(*) FROM costs").fetchone()[0]
    totals = dict(costs.execute("SELECT ProviderName, sum(effective) FROM costs GROUP BY 1").fetchall())
    assert totals == {"AWS": summary.cost_by_provider["aws"], "Google Cloud": summary.cost_by_provider["gcp"],
                      "onprem": summary.cost_by_provider["onprem"]}
    for host, rid in summary.resource_map.items():
        if host.startswith("ip-10-0-"):
            assert re.fullmatch(r"i-0[0-9a-f]{16}", rid)
        elif host.startswith("gpu-node-"):
            assert rid == host
        else:
            assert rid == re.sub(r"[^/]+$", host, rid) and rid.startswith("//compute.googleapis.com/projects/")
    gpu_share = costs.execute("SELECT sum(effective) FILTER (x_GpuCount IS NOT NULL) / sum(effective) FROM costs").fetchone()[0]
    assert Decimal("0.8") < gpu_share < 1


def test_every_planted_item_is_billed_and_logged(summary, truth, costs):
    planted = truth["planted"]
    assert planted == summary.planted
    kinds = sorted((p["kind"], p["variant"], p["provider"]) for p in planted)
    assert [k for k in kinds if k[0] == "idle_gpu"] == [
        ("idle_gpu", "always_idle", "aws"), ("idle_gpu", "always_idle", "gcp"),
        ("idle_gpu", "idle_off_hours", "aws"), ("idle_gpu", "idle_off_hours", "gcp")]
    assert {k[0] for k in kinds} == {"idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix"}
    assert len(planted) < summary.machines / 3, "most of the fleet must be free of waste"
    for item in planted:
        assert item["hosts"] == [item["host"]] and summary.resource_map[item["host"]] == item["resource_id"]
        assert (summary.metrics_dir / f"{item['host']}.csv").exists()
        hours = compute_lines(costs, item["resource_id"])
        assert len(hours) == item["billed_hours"] > 0
        assert sum(hours.values()) == Decimal(item["cost_usd"])


def test_idle_cost_equals_a_recomputation_from_the_files(summary, truth, costs):
    for item in (p for p in truth["planted"] if p["kind"] == "idle_gpu"):
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
    for host in summary.resource_map:
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
        rows = costs.execute("SELECT DISTINCT Tags, PricingCategory FROM costs WHERE ResourceId = ? "
                             "AND ServiceCategory = 'Compute'", [by_kind[kind]["resource_id"]]).fetchall()
        assert [(json.loads(t)[tag], pc) for t, pc in rows] == [(value, "Standard")]


def test_one_row_per_gpu_per_quarter_hour_while_running(summary, costs):
    for host, rid in summary.resource_map.items():
        rows = read_smi(summary.metrics_dir / f"{host}.csv")
        per_stamp: dict[datetime, list[int]] = defaultdict(list)
        for stamp, index, *_ in rows:
            per_stamp[stamp].append(index)
        gpus = costs.execute("SELECT any_value(x_GpuCount) FROM costs WHERE ResourceId = ? "
                             "AND ServiceCategory = 'Compute'", [rid]).fetchone()[0]
        assert all(indices == list(range(int(gpus))) for indices in per_stamp.values())
        billed = set(compute_lines(costs, rid))
        assert {s.replace(minute=0) for s in per_stamp} == billed
        assert len(per_stamp) == 4 * len(billed)
        assert min(billed) >= DEMO_END - timedelta(days=DAYS) and max(billed) < DEMO_END


def test_focus_csv_text_conventions(home):
    text = (home / "exports/gcp/focus/focus-2026-10.csv").read_text()
    header, first = text.splitlines()[:2]
    assert header.startswith('"AvailabilityZone","BilledCost","BillingAccountId"') and header.endswith('"x_GpuCount"')
    assert ",NULL," in first and '"NULL"' not in text
    with open(home / "exports/gcp/focus/focus-2026-10.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    raw = csv.reader(text.splitlines()[1:2], quoting=csv.QUOTE_NONE, escapechar=None)
    assert next(raw)[2] == '"01A2B3-C4D5E6-F7A8B9"', "account ids are quoted text"
    for row in rows:
        for money in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ListUnitPrice"):
            assert re.fullmatch(r"\d+\.\d{10}", row[money]), (money, row[money])
        assert re.fullmatch(r"2026-\d{2}-\d{2}T\d{2}:00:00Z", row["ChargePeriodStart"])
        assert row["ChargeCategory"] == "Usage" and row["ChargeClass"] == "NULL" and row["BillingCurrency"] == "USD"
        tags = json.loads(row["Tags"])
        assert {"team", "workload", "checkpointing"} <= tags.keys()
        assert ("precision" in tags) == tags["workload"].endswith("inference")
        if row["PricingCategory"] == "Dynamic":
            assert Decimal(row["BilledCost"]) < Decimal(row["ListCost"])
    onprem = (home / "exports/onprem/focus/focus-2026-10.csv").read_text().splitlines()[1]
    assert '"onprem","onprem"' in onprem and '"On-prem GPU cluster"' in onprem


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
    assert manifest["dataFiles"] == ["s3://acme-billing/cur/gpufinops-demo/data/BILLING_PERIOD=2026-10/"
                                     "gpufinops-demo-00001.snappy.parquet"]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="days"):
        generate(tmp_path, days=3)
    with pytest.raises(ValueError, match="UTC"):
        generate(tmp_path, end=datetime(2026, 11, 1))


def test_onprem_cost_is_amortisation_plus_metered_power(summary, truth, costs):
    model = truth["onprem_cost_model"]
    pue, kwh, host_w = Decimal(model["pue"]), Decimal(model["usd_per_kwh"]), model["host_w"]
    for machine in (m for m in truth["machines"] if m["provider"] == "onprem"):
        price = Decimal(model["price_per_gpu_usd"][machine["gpu_model"]])
        amortised = machine["gpu_count"] * price / (model["amortisation_months"] * model["hours_per_month"])
        watts: dict[datetime, Decimal] = defaultdict(Decimal)
        for line in (summary.metrics_dir / f"{machine['host']}.csv").read_text().splitlines()[1:]:
            fields = line.split(", ")
            hour = datetime.strptime(fields[0][:13], "%Y/%m/%d %H").replace(tzinfo=UTC)
            watts[hour] += Decimal(fields[9].removesuffix(" W")) / 4
        billed = compute_lines(costs, machine["resource_id"])
        assert set(billed) == set(watts)
        for hour, cost in billed.items():
            expected = amortised + (watts[hour] + host_w) / 1000 * pue * kwh
            assert cost == expected.quantize(Decimal("1E-10")), (machine["host"], hour)
