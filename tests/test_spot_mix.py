"""spot_mix: the rules that never bend, expected-cost pricing, unpriced handling, the demo's planted truth."""

from __future__ import annotations

import random

import pytest

from gpufinops.models import spot_backtest, spot_mix
from gpufinops.warehouse import db
from tests import demo_cache
from tests.cost_lines import GCP, Machine, Price, add_band, add_machine
from tests.demo_cache import assert_findings_match_truth

DAYS = 21
ALWAYS = range(DAYS * 24)
G5_WEST = Machine(region="us-west-2", instance_type="g5.12xlarge", gpu_model="A10G", gpu_count=4)
G6 = Machine(instance_type="g6.xlarge", gpu_model="L4", gpu_count=1)
S = spot_mix.SpotMixSettings()


@pytest.fixture
def con(warehouse):
    with db.writer(warehouse) as c:
        yield c


# ---- the rules -------------------------------------------------------------------------------------


def test_uncheckpointed_long_jobs_never_go_to_spot():
    share, reason = spot_mix.eligibility("training", False, False, longest_run_hours=500, replicas=1, s=S)
    assert share == 0 and "does not checkpoint" in reason
    share, _ = spot_mix.eligibility("training", True, False, longest_run_hours=500, replicas=1, s=S)
    assert share == 1.0
    share, reason = spot_mix.eligibility("batch_inference", False, False, longest_run_hours=2, replicas=1, s=S)
    assert share == 1.0 and reason is None  # short restartable runs lose little


def test_latency_critical_serving_keeps_an_on_demand_floor():
    share, reason = spot_mix.eligibility("online_inference", False, True, longest_run_hours=500, replicas=1, s=S)
    assert share == 0 and "on-demand floor" in reason
    assert spot_mix.eligibility("online_inference", True, True, 500, 2, S)[0] == 0  # two replicas: too few
    for replicas in range(2, 12):
        share, _ = spot_mix.eligibility("online_inference", True, True, 500, replicas, S)
        on_demand = round((1 - share) * replicas)
        assert on_demand >= 1 and on_demand >= replicas * S.spot_serving_floor_share


def test_notebooks_never_go_to_spot():
    assert spot_mix.eligibility("notebook", True, False, 3, 5, S)[0] == 0


def test_random_fleets_never_break_the_rules(con):
    rng = random.Random(5)
    add_band(con, "us-east-1", "g5.12xlarge", 1, 11, 60)
    kinds = []
    for n in range(40):
        workload = rng.choice(["training", "batch_inference", "online_inference", "notebook", None])
        tags = {"team": "t", "workload": workload, "checkpointing": rng.choice(["true", "false", None])}
        if rng.random() < 0.3:
            tags["latency_critical"] = rng.choice(["true", "false"])
        runs = rng.choice([ALWAYS, [h for h in ALWAYS if h % 24 < rng.randint(1, 8)]])
        add_machine(
            con,
            f"i-{n}",
            hours=runs,
            machine=Machine(instance_type="g5.12xlarge", gpu_model="A10G", gpu_count=4),
            team=f"team{n % 3}",
            price=Price(5.672),
            tags={k: v for k, v in tags.items() if v is not None},
        )
        kinds.append(tags)
    recs, _ = spot_mix.recommend(con)
    assert recs, "some of 40 random workloads must qualify"
    for r in recs:
        ev = r.evidence
        assert ev["workload"] != "notebook"
        if not ev["checkpointing"] and not ev["latency_critical"]:
            assert ev["longest_run_hours"] <= S.spot_max_uncheckpointed_run_hours
        if ev["latency_critical"]:
            assert r.proposed["on_demand_share"] > 0 and ev["replicas"] >= 2
        assert r.monthly_savings_usd > 0


# ---- pricing ------------------------------------------------------------------------------------------


def test_expected_cost_uses_the_advisor_band_and_checkpoint_tags(con):
    add_band(con, "us-east-1", "p4d.24xlarge", 2, 16, 67)
    tags = {
        "team": "nlp",
        "workload": "training",
        "checkpointing": "true",
        "checkpoint_interval_min": "120",
        "restart_overhead_min": "30",
    }
    add_machine(con, "i-ckpt", hours=ALWAYS, tags=tags)
    add_machine(con, "i-nockpt", hours=ALWAYS, tags={**tags, "checkpointing": "false"})
    recs, withheld = spot_mix.recommend(con)
    assert [r.resource_id for r in recs] == ["i-ckpt"] and not withheld
    r = recs[0]
    lost = 120 / 60 / 2 + 30 / 60
    rework = 0.16 * lost / spot_mix.HOURS_PER_MONTH
    monthly = 21.957642 * 24 * spot_mix.DAYS_PER_MONTH
    assert r.evidence["hours_lost_per_interruption"] == pytest.approx(lost)
    assert float(r.monthly_savings_usd) == pytest.approx(monthly * (1 - 0.33 * (1 + rework)), abs=0.01)
    assert r.proposed["pricing"] == "spot" and r.current["pricing"] == "on_demand"
    assert r.id == spot_mix.recommend(con)[0][0].id  # stable across runs


def test_the_fleets_own_spot_price_beats_the_advisor(con):
    add_band(con, "us-west-2", "g5.12xlarge", 4, 100, 70)
    add_machine(
        con,
        "i-spot",
        hours=ALWAYS,
        machine=G5_WEST,
        price=Price(2.2688, list_rate=5.672, pricing="Dynamic"),
        tags={"workload": "training"},
    )
    add_machine(
        con,
        "i-od",
        hours=ALWAYS,
        machine=G5_WEST,
        price=Price(5.672),
        tags={"workload": "training", "checkpointing": "true"},
    )
    rec = spot_mix.recommend(con)[0][0]
    assert rec.resource_id == "i-od" and rec.evidence["spot_ratio"] == pytest.approx(0.4)
    assert "paid by the fleet" in rec.evidence["spot_price_source"]
    assert rec.evidence["interruptions_per_month"] == 1.0  # band ">20%": its upper edge


def test_no_spot_price_is_withheld_as_unpriced_never_zero(con):
    add_machine(
        con,
        "vm-1",
        hours=ALWAYS,
        machine=Machine(provider=GCP, region="us-central1", instance_type="a2-highgpu-8g"),
        tags={"workload": "training", "checkpointing": "true"},
    )
    recs, withheld = spot_mix.recommend(con)
    assert recs == []
    assert [(w.kind, w.resource_id, w.reason) for w in withheld] == [("spot_mix", "vm-1", "unpriced")]
    assert (
        withheld[0].detail.startswith("unpriced") and "gcp_catalog" in withheld[0].source_hint
    )  # a GCP machine: its own catalogue


def test_thin_evidence_is_withheld(con):
    add_band(con, "us-east-1", "p4d.24xlarge", 2, 16, 67)
    add_machine(con, "i-new", hours=range(3 * 24), tags={"workload": "training", "checkpointing": "true"})
    recs, withheld = spot_mix.recommend(con)
    assert recs == [] and "too little evidence" in withheld[0].detail and withheld[0].reason == "thin_evidence"


def test_serving_replicas_get_a_partial_share(con):
    add_band(con, "us-east-1", "g6.xlarge", 0, 5, 49)
    for n in range(4):
        add_machine(
            con,
            f"i-serve-{n}",
            hours=ALWAYS,
            machine=G6,
            team="speech",
            price=Price(0.8048),
            tags={"workload": "online_inference"},
        )
    recs, _ = spot_mix.recommend(con)
    assert len(recs) == 4
    assert {r.proposed["spot_share"] for r in recs} == {0.5} and {r.proposed["pricing"] for r in recs} == {"spot_mix"}
    add_machine(
        con,
        "i-lonely",
        hours=ALWAYS,
        machine=G6,
        team="nlp",
        price=Price(0.8048),
        tags={"workload": "online_inference"},
    )
    assert "i-lonely" not in {r.resource_id for r in spot_mix.recommend(con)[0]}


# ---- the demo and the real history -----------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    return demo_cache.demo_home(tmp_path_factory, "demo-spot", days=21, seed=11)


def test_demo_spot_mix_findings_match_the_planted_truth(demo_home):
    truth = demo_cache.ground_truth(demo_home)
    planted = {p["resource_id"]: p for p in truth["planted"] if p["kind"] == "spot_mix"}
    assert_findings_match_truth(
        demo_home,
        planted,
        "SELECT resource_id, monthly_savings_usd FROM recommendations WHERE kind = 'spot_mix'",
    )


def test_backtest_on_the_real_gcp_history_is_computed():
    result = spot_backtest.backtest(step_weeks=8)
    assert result["decision_points"] >= 3 and result["series"] > 500
    assert result["realised_savings_usd"] > 0 and result["on_demand_usd"] > result["realised_savings_usd"]
    # the promise made from the forecast stays close to what the later prices delivered
    assert abs(result["prediction_error_pct"]) < 10
    assert result["spot_decisions"] > 0
