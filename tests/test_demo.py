"""`gpufinops demo` end to end: ingests every source, finds every planted idle GPU, is repeatable."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest

from gpufinops.jobs import demo
from tests.conftest import query
from tests.demo_cache import demo_copy

TABLES = ("cost_line_items", "gpu_metrics_hourly", "recommendations", "gpu_specs")


def counts(db_path) -> dict[str, int]:
    return {t: query(db_path, f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo")
    return home, demo_copy(tmp_path_factory, home, days=14, seed=3)


def test_demo_finds_every_planted_idle_gpu_at_its_true_cost(demo_home):
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    truth = [p for p in json.loads((home / "ground_truth.json").read_text())["planted"] if p["kind"] == "idle_gpu"]
    assert len(truth) == 6  # 2 on AWS, 2 on GCP, 2 on Azure (simulator/demo_azure.py)
    recs = {
        r[0]: r
        for r in query(db_path, "SELECT resource_id, evidence FROM recommendations WHERE kind = 'idle_gpu'")
        if json.loads(r[1])["pattern"] != "allocated_idle"  # the shared node's pods: the test below
    }
    assert set(recs) == {p["resource_id"] for p in truth}  # all found, nothing else flagged
    for item in truth:
        evidence = json.loads(recs[item["resource_id"]][1])
        assert evidence["pattern"] == item["variant"]
        assert Decimal(str(evidence["idle_cost_usd"])) == Decimal(item["idle_cost_usd"]).quantize(Decimal("0.01"))
    assert "6/6 planted idle GPUs found" in printed


def test_demo_ingests_every_source_and_totals_match_the_simulation(demo_home):
    home, _ = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    statuses = query(db_path, "SELECT source, status FROM ingest_runs ORDER BY source")
    assert statuses == [
        ("aws_cur", "succeeded"),
        ("aws_spot_advisor", "succeeded"),
        ("azure_cost", "succeeded"),
        ("demo_storage", "succeeded"),  # the simulated storage listing, loaded as an aws_storage source
        ("gcp_billing", "succeeded"),
        ("gcp_prices", "succeeded"),
        ("gpu_metrics", "succeeded"),
        ("onprem", "succeeded"),
        ("serving", "succeeded"),
    ]
    truth = json.loads((home / "ground_truth.json").read_text())["cost_by_provider_usd"]
    got = dict(query(db_path, 'SELECT "ProviderName", sum("EffectiveCost") FROM cost_line_items GROUP BY 1'))
    names = {"aws": "AWS", "gcp": "Google Cloud", "onprem": "onprem", "azure": "Microsoft"}
    assert {names[k]: Decimal(v) for k, v in truth.items()} == got
    unattributed = query(db_path, "SELECT count(*) FROM gpu_metrics_hourly WHERE resource_id IS NULL")[0][0]
    assert unattributed == 0


def test_demo_rerun_leaves_row_counts_and_numbers_unchanged(demo_home, tmp_path):
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    before = counts(db_path)
    out = io.StringIO()
    assert demo.run(home, days=14, seed=3, out=out) == 0
    assert counts(db_path) == before
    other = tmp_path / "again"
    out2 = io.StringIO()
    assert demo.run(other, days=14, seed=3, out=out2) == 0
    assert counts(other / "data" / "gpufinops.duckdb") == before
    strip = lambda text: text.replace(str(home), "HOME").replace(str(other), "HOME")  # noqa: E731
    assert strip(out2.getvalue()) == strip(printed)


def test_demo_gpu_metrics_come_through_the_dcgm_exporter_path(demo_home):
    from prometheus_client.parser import text_string_to_metric_families

    home, _ = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    assert query(db_path, "SELECT DISTINCT source_type FROM ingest_runs WHERE source = 'gpu_metrics'") == [
        ("dcgm_exporter",)
    ]
    expositions = sorted((home / "metrics" / "dcgm").glob("*.prom"))
    logs = sorted((home / "metrics" / "nvidia-smi").glob("*.csv"))
    assert [p.stem for p in expositions] == [p.stem for p in logs]
    smallest = min(expositions, key=lambda p: p.stat().st_size)
    families = {f.name: f for f in text_string_to_metric_families(smallest.read_text())}  # the library's own parser
    base = ["DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL"]
    assert sorted(set(families) - {"DCGM_FI_DEV_POWER_USAGE"}) == base
    # the cloud hosts' exporters serve measured power (their carbon); the on-prem cluster's do not
    onprem_sql = """SELECT DISTINCT m.host FROM gpu_metrics_hourly m WHERE m.resource_id IN
                    (SELECT "ResourceId" FROM cost_line_items WHERE "ProviderName" = 'onprem')"""
    onprem = {h for (h,) in query(db_path, onprem_sql)}
    assert onprem and len(onprem) < len(expositions)
    for path in expositions:
        served = {f.name for f in text_string_to_metric_families(path.read_text())}
        assert ("DCGM_FI_DEV_POWER_USAGE" in served) == (path.stem not in onprem), path.name
    watts = query(
        db_path, f"SELECT count(*), count(power_mean_w) FROM gpu_metrics_hourly WHERE host NOT IN ({onprem_sql})"
    )
    assert watts[0][0] > 0 and watts[0][0] == watts[0][1]
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples
    smi_rows = len((home / "metrics" / "nvidia-smi" / f"{smallest.stem}.csv").read_text().splitlines()) - 1
    assert len(util) == smi_rows and all(
        s.timestamp is not None and s.labels["Hostname"] == smallest.stem for s in util
    )
    samples_per_hour = query(db_path, "SELECT DISTINCT samples FROM gpu_metrics_hourly")
    assert samples_per_hour == [(4,)]  # every 15 minutes, as the simulated exporter was scraped
    assert any((home / "data" / "samples" / "gpu_metrics").glob("day=*/*.parquet"))


def test_demo_configures_two_budgets_one_crossed_and_prints_its_alerts(demo_home):
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    assert "Alerts as of 2026-11-01 00:30 UTC" in printed and "CRITICAL  Budget research-gpu: 100 %" in printed
    budgets = {scope for (scope,) in query(db_path, "SELECT DISTINCT scope FROM alerts WHERE rule LIKE 'budget%'")}
    assert budgets == {"research-gpu"} and "budget fleet: $" in printed  # the fleet's budget is not crossed
    # the idle-GPU burn alerts are the planted always-idle machines, nothing else
    truth = json.loads((home / "ground_truth.json").read_text())["planted"]
    always_idle = {p["resource_id"] for p in truth if p["kind"] == "idle_gpu" and p["variant"] == "always_idle"}
    burning = {r for (r,) in query(db_path, "SELECT scope FROM alerts WHERE rule = 'idle_burn' AND status = 'open'")}
    assert burning == always_idle and burning


def test_demo_shared_node_is_two_primary_plans_one_per_team(demo_home):
    """simulator/demo_shared.py: research and nlp each leave a GPU of one g5.12xlarge idle; the idle model finds
    both pods, each a primary plan in its own team's scope, at what allocation charged it for the idle hours
    (a quarter of the node's hourly bill per GPU-hour), and the demo's total counts both."""
    from gpufinops.models import plans

    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    truth = json.loads((home / "ground_truth.json").read_text())
    node = next(m for m in truth["machines"] if m.get("idle_pod_hours"))
    rows = query(
        db_path,
        "SELECT team, plan, plan_id, monthly_savings_usd, status, evidence FROM recommendations "
        "WHERE kind = 'idle_gpu' AND resource_id = ? ORDER BY team",
        [node["resource_id"]],
    )
    recs = [
        {"team": t, "plan": p, "plan_id": i, "monthly_savings_usd": m, "status": s, "evidence": json.loads(e)}
        for t, p, i, m, s, e in rows
    ]
    assert [(r["team"], r["plan"]) for r in recs] == [("nlp", "primary"), ("research", "primary")]
    assert len({r["plan_id"] for r in recs}) == 2
    for r in recs:
        assert r["evidence"]["idle_hours"] == node["idle_pod_hours"][r["evidence"]["namespace"]]
        assert len(r["evidence"]["gpu_units"]) == 1
    hourly = query(
        db_path,
        'SELECT DISTINCT "EffectiveCost" FROM cost_line_items WHERE "ResourceId" = ? AND "ServiceCategory" = \'Compute\'',
        [node["resource_id"]],
    )
    assert len(hourly) == 1  # on demand: one price every hour
    days = Decimal(truth["days"])
    for r in recs:
        idle = node["idle_pod_hours"][r["evidence"]["namespace"]]
        charged = (hourly[0][0] / 4 * idle / days * Decimal("30.4375")).quantize(Decimal("0.01"))
        assert abs(Decimal(str(r["monthly_savings_usd"])) - charged) <= Decimal("0.01")
    both = plans.total(recs)
    assert both == sum(Decimal(str(r["monthly_savings_usd"])) for r in recs)
    assert "2/2 pods holding an idle GPU found, 2 of them primary plans" in printed
    assert f"{both:,.2f}/month" in printed.split("shared node:")[1].splitlines()[0]


def test_demo_azure_idle_gpus_are_found_from_their_own_bill_and_the_inventory(demo_home):
    """The idle ND96isr_H100_v5: 8 x H100 from the Azure inventory (the bill names only its size), dollars from its
    own FocusCost lines; the AKS pool's idle node attributed by its providerID (the config maps no AKS host), its
    bill lines the scale-set instance's; both in the demo's summary."""
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    truth = json.loads((home / "ground_truth.json").read_text())
    machines = {m["host"]: m for m in truth["machines"]}
    aks = [h for h, m in machines.items() if m["provider"] == "azure" and m["provider_id"]]
    config = (home / "gpufinops.toml").read_text()
    assert aks and not any(h in config for h in aks) and "nlp-nd-h100-01" in config
    for item in (p for p in truth["planted"] if p["provider"] == "azure"):
        rid = machines[item["host"]]["resource_id"]
        (current, evidence), *others = query(
            db_path, "SELECT current, evidence FROM recommendations WHERE kind = 'idle_gpu' AND resource_id = ?", [rid]
        )
        current, evidence = json.loads(current), json.loads(evidence)
        assert not others and evidence["pattern"] == "always_idle"
        billed = query(
            db_path,
            'SELECT any_value("x_GpuCount"), any_value("x_GpuModel"), sum("EffectiveCost") FROM cost_line_items '
            'WHERE "ResourceId" = ? AND "ServiceCategory" = \'Compute\'',
            [rid],
        )[0]
        assert (current["gpu_count"], current["gpu_model"]) == billed[:2] == (item["gpu_count"], item["gpu_model"])
        assert Decimal(str(evidence["idle_cost_usd"])) == billed[2].quantize(Decimal("0.01"))
        line = f"    {item['host']}: {item['instance_type']}, {item['gpu_count']} × {item['gpu_model']}, idle"
        assert line in printed
        hosts = query(db_path, "SELECT DISTINCT host FROM gpu_metrics_hourly WHERE resource_id = ?", [rid])
        assert hosts == [(item["host"],)]
    nd = next(p for p in truth["planted"] if p["host"] == "nlp-nd-h100-01")
    assert (nd["gpu_count"], nd["gpu_model"]) == (8, "H100-SXM")
    assert "  Azure: 2/2 planted idle GPUs found" in printed
