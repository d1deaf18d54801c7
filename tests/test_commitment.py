"""commitment: the steady baseline, its pricing from the catalogue or the fleet's own commitments,
break-even utilisation, and the demo's planted truth."""

from __future__ import annotations

import numpy as np
import pytest

from gpufinops.models import commitment
from gpufinops.warehouse import db
from tests import demo_cache
from tests.cost_lines import AWS, GCP, START, Machine, Price, add_machine, add_metrics, add_price, workhours
from tests.demo_cache import assert_findings_match_truth

DAYS = 28
ALWAYS = range(DAYS * 24)
OD, C1, C3 = 3.673385, 2.31420704, 1.28591008  # a2-highgpu-1g us-central1 $/h (pricing.yml; CUD $/month / 730)


@pytest.fixture
def con(warehouse):
    with db.writer(warehouse) as c:
        yield c


def gcp_machine(con, rid: str, hours, team: str = "recsys") -> None:
    add_machine(
        con,
        rid,
        hours=hours,
        machine=Machine(provider=GCP, region="us-central1", instance_type="a2-highgpu-1g", gpu_count=1),
        team=team,
        price=Price(OD),
        tags={"workload": "online_inference"},
    )


def gcp_prices(con, with_3y: bool = True) -> None:
    add_price(con, "gcp", "us-central1", "a2-highgpu-1g", "on_demand", OD)
    add_price(con, "gcp", "us-central1", "a2-highgpu-1g", "commit_1y", C1)
    if with_3y:
        add_price(con, "gcp", "us-central1", "a2-highgpu-1g", "commit_3y", C3)


def test_baseline_is_a_low_percentile_in_whole_machines():
    usage = np.array([3] * 95 + [2] * 5)
    assert commitment.baseline(usage, 10) == 3  # 5 % of hours at 2: p10 still 3
    assert commitment.baseline(np.array([3] * 85 + [1] * 15), 10) == 1
    assert commitment.baseline(np.array([0] * 50 + [4] * 50), 10) == 0


def test_savings_charge_the_commitment_for_its_unused_hours():
    usage = np.array([2, 2, 1, 0])
    # covered 2: replaces 5 on-demand machine-hours, pays 8 committed machine-hours
    assert commitment.savings_over_window(usage, 2, 10.0, 6.0) == pytest.approx(5 * 10.0 - 8 * 6.0)


def test_steady_machines_are_priced_from_the_catalogue_with_break_even(con):
    gcp_prices(con)
    gcp_machine(con, "vm-a", ALWAYS)
    gcp_machine(con, "vm-b", ALWAYS)
    gcp_machine(con, "vm-c", workhours(DAYS))  # not steady: above the baseline
    recs, withheld = commitment.recommend(con)
    assert len(recs) == 1 and not withheld
    r = recs[0]
    assert r.evidence["group"] == "commitment/gcp/us-central1/a2-highgpu-1g/recsys" and r.resource_id == "vm-a"
    assert r.evidence["steady_resources"] == ["vm-a", "vm-b"] and r.evidence["resources"] == ["vm-a", "vm-b", "vm-c"]
    assert r.evidence["baseline_machines"] == 2 and r.proposed["machines"] == 2
    assert float(r.monthly_savings_usd) == pytest.approx(2 * (OD - C1) * commitment.HOURS_PER_MONTH, abs=0.02)
    assert r.evidence["break_even_utilisation"] == pytest.approx(C1 / OD, abs=1e-4)
    assert float(r.evidence["monthly_savings_3y_usd"]) == pytest.approx(
        2 * (OD - C3) * commitment.HOURS_PER_MONTH, abs=0.02
    )
    assert "catalogue" in r.evidence["commitment_price_source"]
    assert r.id == commitment.recommend(con)[0][0].id


def test_idle_hours_are_not_a_baseline(con):
    gcp_prices(con)
    gcp_machine(con, "vm-idle", ALWAYS)
    add_metrics(con, "vm-idle", hours=ALWAYS, util_max=1.0)
    gcp_machine(con, "vm-busy", ALWAYS)
    add_metrics(con, "vm-busy", hours=ALWAYS, util_max=60.0)
    r = commitment.recommend(con)[0][0]
    assert (
        r.evidence["baseline_machines"] == 1 and r.evidence["resources"] == ["vm-busy"] and r.resource_id == "vm-busy"
    )


def test_an_idle_mig_gpu_is_judged_by_its_engine_activity(con):
    """MIG instances report engine activity, not GPU utilisation: an idle MIG GPU is not a steady baseline,
    a busy one is, and a machine with neither measure still counts as used."""
    gcp_prices(con)
    for rid, activity in (("vm-mig-idle", 0.01), ("vm-mig-busy", 0.45), ("vm-unmeasured", None)):
        gcp_machine(con, rid, ALWAYS)
        if activity is not None:
            con.execute(
                "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, mig_instance, resource_id, sm_active_mean) "
                "SELECT ?::TIMESTAMPTZ + to_hours(h), ?, '3g.20gb/1', ?, ? FROM unnest(?::BIGINT[]) t(h)",
                [START, f"GPU-{rid}", rid, activity, list(ALWAYS)],
            )
    r = commitment.recommend(con)[0][0]
    assert r.evidence["baseline_machines"] == 2
    assert r.evidence["steady_resources"] == ["vm-mig-busy", "vm-unmeasured"]


def test_without_a_price_the_group_is_withheld_as_unpriced(con):
    add_machine(
        con, "i-g5", hours=ALWAYS, machine=Machine(instance_type="g5.12xlarge"), team="recsys", price=Price(5.672)
    )
    recs, withheld = commitment.recommend(con)
    assert recs == [] and withheld[0].reason == "unpriced" and withheld[0].detail.startswith("unpriced")


def test_the_fleets_own_commitment_rate_prices_a_group_without_catalogue(con):
    # two alike g4dn.xlarge of platform's: one on demand, one under the fleet's own commitment
    for rid, price in (("i-od", Price(0.526)), ("i-ri", Price(0.32612, list_rate=0.526, pricing="Committed"))):
        g4dn = Machine(provider=AWS, instance_type="g4dn.xlarge")
        add_machine(con, rid, hours=ALWAYS, machine=g4dn, team="platform", price=price)
    r = commitment.recommend(con)[0][0]
    assert r.evidence["break_even_utilisation"] == pytest.approx(0.62)
    assert "fleet's own" in r.evidence["commitment_price_source"] and r.confidence < 0.9
    assert float(r.monthly_savings_usd) == pytest.approx(0.526 * 0.38 * commitment.HOURS_PER_MONTH, abs=0.02)


def test_short_history_is_withheld(con):
    gcp_prices(con)
    gcp_machine(con, "vm-new", range(5 * 24))
    recs, withheld = commitment.recommend(con)
    assert recs == [] and "too short" in withheld[0].detail and withheld[0].reason == "short_history"
    # 5 days of the 14 needed: the fix is time, said in days (not "add a utilisation source")
    assert withheld[0].source_hint == "9 more days of history" and "9 more days" in withheld[0].detail


def test_workloads_moving_to_spot_are_not_committed(con):
    from tests.cost_lines import add_band

    add_band(con, "us-east-1", "p4d.24xlarge", 2, 16, 67)
    add_price(con, "aws", "us-east-1", "p4d.24xlarge", "on_demand", 21.957642)
    add_price(con, "aws", "us-east-1", "p4d.24xlarge", "commit_1y", 13.6)
    add_machine(con, "i-train", hours=ALWAYS, tags={"workload": "training", "checkpointing": "true"})
    assert commitment.recommend(con)[0] == []
    add_machine(con, "i-serve", hours=ALWAYS, tags={"workload": "online_inference"})
    assert [r.evidence["resources"] for r in commitment.recommend(con)[0]] == [["i-serve"]]


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    return demo_cache.demo_home(tmp_path_factory, "demo-commit", days=21, seed=7)


def test_demo_commitments_match_the_planted_truth(demo_home):
    truth = demo_cache.ground_truth(demo_home)
    planted = {p["resource_id"]: p for p in truth["commitments"]}
    assert all(p["kind"] == "commitment" for p in planted.values())
    assert not [p for p in truth["planted"] if p["kind"] == "commitment"]  # not waste: its own list
    # the model's own saving (a plan step's monthly_savings_usd is re-priced after the steps before it)
    assert_findings_match_truth(
        demo_home,
        planted,
        "SELECT resource_id, CAST(json_extract(evidence, '$.standalone_monthly_savings_usd') "
        "AS DECIMAL(18, 2)) FROM recommendations WHERE kind = 'commitment'",
    )


def test_provider_codes_map_each_name_as_provider_code_does():
    import polars as pl

    from gpufinops.models.frames import provider_codes
    from gpufinops.models.recommendation import provider_code

    names = [AWS, GCP, "Microsoft", None, "", "onprem", "Acme Cloud", AWS]
    rows = pl.DataFrame({"provider": names}, schema={"provider": pl.Utf8})
    assert rows.select(provider_codes(rows, "provider"))["provider"].to_list() == [provider_code(n) for n in names]
    empty = rows.clear()
    assert empty.select(provider_codes(empty, "provider")).is_empty()
