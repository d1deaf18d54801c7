"""Budget → quota (models/budget_quota.py): the formula, the fill order, the floor and the stop policies."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufinops.models.budget_quota import POLICIES, ClusterDemand, Flavor, QuotaInputs, team_quota

money = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("1000000"), places=2)
rates = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("100"), places=4)
hours = st.integers(min_value=1, max_value=2208).map(Decimal)


def _inputs(amount, spent, flavors, hours_left, policy="cap", burn=None) -> QuotaInputs:
    return QuotaInputs(
        "research-gpu", "research", policy, amount, spent, hours_left, burn, "2026-10", (ClusterDemand("c1", flavors),)
    )


def _floor_div(a: Decimal, b: Decimal) -> int:
    """The expected ⌊a ÷ b⌋ through integer cents (a different route from the model's Decimal floor)."""
    scale = 10**8
    return int(a * scale) // int(b * scale) if a > 0 else 0


@settings(max_examples=300, deadline=None)
@given(amount=money, spent=money, rate=rates, hours_left=hours, policy=st.sampled_from(POLICIES[1:]))
def test_one_flavor_quota_is_the_floor_of_money_over_rate_times_hours(amount, spent, rate, hours_left, policy):
    quota = team_quota(_inputs(amount, spent, (Flavor("H100", "spot", rate),), hours_left, policy))
    (cluster,) = quota.clusters
    assert cluster.flavors[0].gpus == _floor_div(amount - spent, rate * hours_left)
    expected_stop = {"cap": None, "hold": "Hold", "drain": "HoldAndDrain"}[policy] if amount <= spent else None
    assert cluster.stop_policy == expected_stop
    for word in ("budget research-gpu", "spent", "forecast", "h left"):
        assert word in cluster.reason


@settings(max_examples=200, deadline=None)
@given(amount=money, spent=money, rate=rates, extra=rates, hours_left=hours)
def test_spot_is_filled_first_and_the_money_never_overspent(amount, spent, rate, extra, hours_left):
    flavors = (Flavor("H100", "on-demand", rate + extra), Flavor("H100", "spot", rate))
    quota = team_quota(_inputs(amount, spent, flavors, hours_left))
    by_capacity = {f.flavor.capacity: f.gpus for f in quota.clusters[0].flavors}
    assert by_capacity["spot"] == _floor_div(amount - spent, rate * hours_left)
    cost = sum(f.gpus * f.flavor.rate_usd * hours_left for f in quota.clusters[0].flavors)
    assert cost <= max(amount - spent, Decimal(0))
    assert [f.flavor.capacity for f in quota.clusters[0].flavors] == ["spot", "on-demand"]


@settings(max_examples=200, deadline=None)
@given(amount=money, spent=money, rate=rates, hours_left=hours, running=st.integers(0, 64))
def test_never_below_running_work_unless_drain(amount, spent, rate, hours_left, running):
    flavor = (Flavor("A100", "on-demand", rate, running_gpus=running),)
    for policy in ("cap", "hold"):
        gpus = team_quota(_inputs(amount, spent, flavor, hours_left, policy)).clusters[0].flavors[0].gpus
        assert gpus >= running
    drained = team_quota(_inputs(amount, spent, flavor, hours_left, "drain")).clusters[0].flavors[0]
    assert drained.gpus == drained.money_gpus == _floor_div(amount - spent, rate * hours_left)


def test_committed_capacity_is_free_up_to_its_size_then_the_paid_rate_applies():
    flavor = Flavor("H100", "on-demand", Decimal("4"), committed_gpus=8)
    quota = team_quota(_inputs(Decimal("1000"), Decimal("200"), (flavor,), Decimal("100")))
    assert quota.clusters[0].flavors[0].gpus == 8 + 2  # 8 already paid for, then ⌊800 ÷ (4 × 100)⌋
    broke = team_quota(_inputs(Decimal("1000"), Decimal("1200"), (flavor,), Decimal("100"), "hold"))
    assert broke.clusters[0].flavors[0].gpus == 8 and broke.clusters[0].stop_policy == "Hold"


def test_onprem_capacity_bounds_the_quota_and_the_rest_goes_to_the_next_flavor():
    flavors = (Flavor("H100", "onprem", Decimal("1"), capacity_gpus=4), Flavor("H100", "on-demand", Decimal("2")))
    quota = team_quota(_inputs(Decimal("5000"), Decimal("0"), flavors, Decimal("100")))
    got = {f.flavor.capacity: f.gpus for f in quota.clusters[0].flavors}
    assert got == {"onprem": 4, "on-demand": 23}  # 4 × 1 × 100 = 400; ⌊4600 ÷ 200⌋ = 23
    assert "capped at the cluster's 4" in quota.clusters[0].flavors[0].reason


def test_two_clusters_share_the_money_by_their_spend_and_never_spend_it_twice():
    inputs = QuotaInputs(
        "b",
        "t",
        "cap",
        Decimal("3000"),
        Decimal("0"),
        Decimal("10"),
        Decimal("5"),
        "2026-10",
        (
            ClusterDemand("a", (Flavor("H100", "spot", Decimal("10")),), Decimal("2")),
            ClusterDemand("b", (Flavor("H100", "spot", Decimal("10")),), Decimal("1")),
        ),
    )
    quota = team_quota(inputs)
    assert [c.gpus for c in quota.clusters] == [20, 10]
    assert quota.to_dict()["forecast_usd"] == "50.00"


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="enforce must be one of"):
        team_quota(_inputs(Decimal(1), Decimal(0), (), Decimal(1), "evict"))


def test_spend_no_scheduler_stops_is_kept_aside_but_does_not_decide_the_hold():
    base = _inputs(Decimal("1000"), Decimal("200"), (Flavor("H100", "spot", Decimal("1")),), Decimal("100"), "hold")
    kept = QuotaInputs(*[getattr(base, f) for f in base.__dataclass_fields__ if f != "reserved_usd"], Decimal("300"))
    quota = team_quota(kept).clusters[0]
    assert quota.flavors[0].gpus == 5  # ⌊(1000 − 200 − 300) ÷ (1 × 100)⌋
    assert quota.stop_policy is None and "$300.00 kept for spend without GPUs" in quota.reason
