"""Cost forecast and anomalies: weekday profiles, intervals, a planted spike explained by its line item."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from gpufinops.models import forecast
from gpufinops.warehouse import db

START = datetime(2026, 8, 3, tzinfo=UTC)  # a Monday


def insert_lines(con, rows: list[dict]) -> None:
    """Daily cost lines with the few columns the forecast reads."""
    con.executemany(
        'INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "x_Team", "ProviderName", '
        '"ResourceId", "ServiceName", "SkuId", "ChargeDescription", "ChargeCategory", "EffectiveCost", '
        '"BilledCost") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        [
            [
                r["start"],
                r["start"] + timedelta(days=1),
                r["team"],
                r.get("provider", "Amazon Web Services, Inc."),
                r["resource"],
                "Amazon Elastic Compute Cloud",
                r.get("sku", "SKU1"),
                r.get("desc", "g5 running"),
                "Usage",
                r["cost"],
                r["cost"],
            ]
            for r in rows
        ],
    )


def weekly_rows(
    team: str, days: int, weekday_usd: float, weekend_usd: float, noise: float, seed: int, resource: str = "i-base"
) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(days):
        start = START + timedelta(days=d)
        base = weekday_usd if start.weekday() < 5 else weekend_usd
        rows.append(
            {"start": start, "team": team, "resource": resource, "cost": round(base * (1 + rng.normal(0, noise)), 6)}
        )
    return rows


@pytest.fixture
def con(warehouse):
    with db.writer(warehouse) as c:
        yield c


def test_weekday_profile_is_learnt_and_next_month_is_inside_the_interval(con):
    insert_lines(
        con, weekly_rows("vision", 63, 1000.0, 400.0, 0.02, seed=1) + weekly_rows("nlp", 63, 200.0, 200.0, 0.02, seed=2)
    )
    out = forecast.cost_forecast(con)
    assert set(out["team"]) == {"vision", "nlp"} and set(out["provider"]) == {"aws"}
    assert set(out["horizon"]) == {"month_end", "next_month"}
    as_of = (START + timedelta(days=63)).date()  # the day after the data
    nxt = out.filter((out["team"] == "vision") & (out["horizon"] == "next_month")).row(0, named=True)
    first = forecast._next_month(as_of)
    month_days = [first + timedelta(days=i) for i in range((forecast._next_month(first) - first).days)]
    truth = sum(1000.0 if d.weekday() < 5 else 400.0 for d in month_days)
    assert nxt["month"] == first
    assert nxt["lower_usd"] <= truth <= nxt["upper_usd"]
    assert abs(nxt["forecast_usd"] - truth) / truth < 0.03  # the weekday mix is priced, not a flat mean
    flat = 700.0 * len(month_days)
    assert abs(nxt["forecast_usd"] - truth) < abs(flat - truth) or abs(flat - truth) < 0.01 * truth
    assert nxt["lower_usd"] < nxt["forecast_usd"] < nxt["upper_usd"]


def test_month_end_adds_actuals_to_date_and_respects_as_of_and_teams(con):
    insert_lines(
        con, weekly_rows("vision", 63, 100.0, 100.0, 0.0, seed=3) + weekly_rows("nlp", 63, 50.0, 50.0, 0.0, seed=4)
    )
    as_of = datetime(2026, 9, 15, 12, tzinfo=UTC)
    out = forecast.cost_forecast(con, teams=["vision"], as_of=as_of)
    assert set(out["team"]) == {"vision"}
    row = out.filter(out["horizon"] == "month_end").row(0, named=True)
    assert row["month"] == date(2026, 9, 1)
    assert row["actual_to_date_usd"] == pytest.approx(14 * 100.0)  # 1–14 September, known
    assert row["forecast_usd"] == pytest.approx(30 * 100.0, rel=1e-6)  # the rest at the flat level
    assert row["lower_usd"] >= row["actual_to_date_usd"]
    nxt = out.filter(out["horizon"] == "next_month").row(0, named=True)
    assert nxt["actual_to_date_usd"] == 0.0 and nxt["month"] == date(2026, 10, 1)
    assert nxt["upper_usd"] - nxt["lower_usd"] > row["upper_usd"] - row["lower_usd"]  # further is less certain


def test_interval_of_a_sum_grows_with_the_horizon():
    fit = forecast.SeriesFit(np.ones(7), alpha=0.3, level=100.0, sigma=10.0, history_days=60)
    widths = [forecast.sum_interval_halfwidth(fit, list(range(1, h + 1))) for h in (1, 7, 30)]
    assert widths[0] == pytest.approx(forecast.Z80 * 10.0)
    assert widths[0] < widths[1] < widths[2]


def test_a_planted_spike_is_found_with_the_line_item_that_caused_it(con):
    rows = weekly_rows("vision", 56, 1000.0, 400.0, 0.02, seed=5)
    spike_day = START + timedelta(days=40)
    rows.append(
        {
            "start": spike_day,
            "team": "vision",
            "resource": "i-runaway",
            "sku": "SKU-P5",
            "desc": "p5.48xlarge On Demand",
            "cost": 1320.96,
        }
    )
    insert_lines(con, rows)
    out = forecast.cost_anomalies(con)
    assert out["day"].to_list() == [spike_day.date()]
    row = out.row(0, named=True)
    assert row["direction"] == "spike" and row["cost_usd"] > row["upper_usd"]
    items = json.loads(row["top_line_items"])
    assert items[0]["resource_id"] == "i-runaway" and items[0]["delta_usd"] == pytest.approx(1320.96)
    # the reported window filters days, the expectation still learns from everything before it
    assert forecast.cost_anomalies(con, start=spike_day + timedelta(days=1)).is_empty()


def test_a_stopped_machine_is_a_drop_and_the_new_level_is_then_normal(con):
    rows = weekly_rows("nlp", 56, 300.0, 300.0, 0.01, seed=6)
    rows += [r | {"resource": "i-a3", "cost": 2000.0} for r in weekly_rows("nlp", 30, 0, 0, 0, seed=7)]
    insert_lines(con, rows)
    out = forecast.cost_anomalies(con, teams=["nlp"])
    assert not out.is_empty() and set(out["direction"]) == {"drop"}
    stop = (START + timedelta(days=30)).date()
    assert out["day"].min() == stop and out["day"].max() <= stop + timedelta(days=1)  # a shift, not 26 anomalies
    assert json.loads(out["top_line_items"][0])[0]["resource_id"] == "i-a3"


def test_short_history_claims_no_anomaly(con):
    rows = weekly_rows("vision", 10, 100.0, 100.0, 0.0, seed=8)
    rows[-1]["cost"] = 5000.0
    insert_lines(con, rows)
    assert forecast.cost_anomalies(con).is_empty()


def test_backtest_beats_seasonal_naive_on_a_noisy_weekly_series(con):
    insert_lines(
        con,
        weekly_rows("vision", 70, 1000.0, 400.0, 0.08, seed=9) + weekly_rows("nlp", 70, 500.0, 500.0, 0.08, seed=10),
    )
    q = forecast.quality(con)
    assert q["points"] > 0 and q["series"] == 2
    assert 0 < q["model_mape_pct"] < q["seasonal_naive_mape_pct"]
    # averaging a week of noise instead of copying one day: about 1/sqrt(2) of the naive error or better
    assert q["model_mape_pct"] < 0.85 * q["seasonal_naive_mape_pct"]


def test_backtest_refuses_too_little_history(con):
    insert_lines(con, weekly_rows("vision", 20, 100.0, 100.0, 0.0, seed=11))
    with pytest.raises(ValueError, match="not enough history"):
        forecast.quality(con)


def test_empty_warehouse_gives_empty_frames_with_the_columns(con):
    assert forecast.cost_forecast(con).columns[:8] == [
        "month",
        "team",
        "provider",
        "horizon",
        "actual_to_date_usd",
        "forecast_usd",
        "lower_usd",
        "upper_usd",
    ]
    assert forecast.cost_anomalies(con).columns == list(forecast.ANOMALY_COLUMNS)


def test_a_partly_loaded_last_day_is_not_taken_for_a_drop(con):
    rows = weekly_rows("vision", 42, 240.0, 240.0, 0.01, seed=12)
    insert_lines(con, rows)
    partial = START + timedelta(days=42)
    con.execute(
        'INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "x_Team", "ProviderName", '
        '"ResourceId", "ChargeCategory", "EffectiveCost", "BilledCost") VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        [partial, partial + timedelta(hours=3), "vision", "Amazon Web Services, Inc.", "i-base", "Usage", 30.0, 30.0],
    )  # the export has reached 03:00 of the last day
    assert forecast.cost_anomalies(con).is_empty()
    out = forecast.cost_forecast(con)
    assert out["history_days"].to_list() == [42, 42]
