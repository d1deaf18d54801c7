"""idle_gpu on hand-built resource-hours: runs, patterns, pricing from the line items, gaps unknown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import polars as pl

from gpufinops.models import idle

START = datetime(2026, 9, 7, tzinfo=UTC)  # a Monday


def hours(resource: str, utils: list[float | None], cost: str = "10.00", gpu_count: int = 8) -> list[dict]:
    return [
        {
            "resource_id": resource,
            "hour": START + timedelta(hours=i),
            "provider": "AWS",
            "team": "t",
            "region": "us-east-1",
            "instance_type": "p4d.24xlarge",
            "gpu_model": "A100-40GB",
            "gpu_count": gpu_count,
            "pricing_category": "Standard",
            "effective_cost": Decimal(cost),
            "gpus_reporting": None if u is None else gpu_count,
            "util_max": u,
            "util_mean": u,
            "util_p95": u,
            "mem_used_max_mib": None if u is None else 1024.0,
            "mem_total_mib": 40960.0,
        }
        for i, u in enumerate(utils)
    ]


def frame(*resources: list[dict]) -> pl.DataFrame:
    rows = [r for res in resources for r in res]
    return pl.DataFrame(rows, schema_overrides={"effective_cost": pl.Decimal(38, 15)})


def test_always_idle_is_priced_from_its_line_items():
    recs = idle.recommend(frame(hours("i-idle", [1.0] * (21 * 24)), hours("i-busy", [90.0] * (21 * 24))))
    assert [r.resource_id for r in recs] == ["i-idle"]
    rec = recs[0]
    assert rec.evidence["pattern"] == "always_idle" and rec.evidence["idle_hours"] == 504
    assert rec.evidence["idle_cost_usd"] == Decimal("5040.00")
    assert rec.monthly_savings_usd == Decimal("7305.00")  # $240/day × 30.4375 days
    assert rec.proposed["gpu_count"] == 0 and rec.provider == "aws"
    assert 0.9 <= rec.confidence <= 1.0


def test_idle_nights_and_weekends_is_a_schedule():
    utils = []
    for h in range(14 * 24):
        t = START + timedelta(hours=h)
        working = t.weekday() < 5 and 9 <= t.hour < 18
        utils.append(70.0 if working else 0.5)
    rec = idle.recommend(frame(hours("i-dev", utils, gpu_count=1)))[0]
    assert rec.evidence["pattern"] == "idle_off_hours"
    idle_hours = sum(1 for u in utils if u < 5)
    assert rec.evidence["idle_hours"] == idle_hours
    assert rec.evidence["idle_cost_usd"] == Decimal(idle_hours * 10)


def test_the_nightly_trough_of_a_busy_service_is_not_a_schedule():
    """A serving replica dipping under 5 % for 3 hours each night (its time-of-day trough): 42 of ~230
    off-hours idle; a schedule would have to stop it through its busy evenings and weekends too."""
    utils = [3.0 if 2 <= (START + timedelta(hours=h)).hour < 5 else 30.0 for h in range(14 * 24)]
    assert idle.recommend(frame(hours("i-trough", utils, gpu_count=1))) == []
    dev = [
        70.0 if (t := START + timedelta(hours=h)).weekday() < 5 and 9 <= t.hour < 18 else 0.5 for h in range(14 * 24)
    ]
    assert [r.evidence["pattern"] for r in idle.recommend(frame(hours("i-dev", dev, gpu_count=1)))] == [
        "idle_off_hours"
    ]


def test_short_pauses_and_gaps_are_not_idle():
    pauses = ([80.0] * 5 + [1.0] * 2) * 48  # 2-hour pauses between jobs: under the run length
    gaps = [None] * (14 * 24)  # no metrics at all: unknown, never idle
    assert idle.recommend(frame(hours("i-pauses", pauses), hours("i-nometrics", gaps))) == []


def test_a_gap_breaks_an_idle_run():
    utils = ([1.0, 1.0, None, 1.0, 1.0] + [80.0] * 5) * 60
    assert idle.recommend(frame(hours("i-gappy", utils))) == []


def test_ids_are_stable_and_low_savings_dropped():
    data = frame(hours("i-idle", [1.0] * 48, cost="0.02"))
    assert idle.recommend(data) == []  # $0.02/h idle = $14.61/month: under the $25 floor
    data = frame(hours("i-idle", [1.0] * 48))
    assert idle.recommend(data)[0].id == idle.recommend(data)[0].id


def test_a_terminated_resource_has_nothing_to_release():
    """Idle for 9 days, then terminated 12 days before the data ends: gone, not a finding (found by the
    independent fleet generator of `gpufinops evaluate`)."""
    gone = hours("i-gone", [1.0] * (9 * 24))
    live = hours("i-live", [90.0] * (21 * 24))
    assert idle.recommend(frame(gone, live)) == []
    assert [r.resource_id for r in idle.recommend(frame(hours("i-gone", [1.0] * (21 * 24)), live))] == ["i-gone"]
