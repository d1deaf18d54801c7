"""The alert rules as pure functions over a warehouse: budgets against the very numbers the forecast
model and the line items give, the forecast alert before the actual one, anomalies with the line
items that moved, idle GPUs priced from their bill (and from their recent rate while the bill is
late, in either arrival order), stale data per episode; and how a re-evaluation opens, resolves,
expires and supersedes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import polars as pl
import pytest

from gpufinops.models import alert_rules
from gpufinops.models.alerts import Alert, AlertSettings, RuleOutcome, plan
from gpufinops.models.budgets import Budget, BudgetScope, monthly_budget_for, period_bounds
from gpufinops.models.forecast import cost_forecast, period_forecast
from gpufinops.warehouse import alerts_store, db
from tests.alert_fleet import Resource, metric_rows, spend_lines

UTC = UTC
SEP = date(2026, 9, 1)
WEEKDAYS = [1.2, 1.2, 1.1, 1.1, 1.0, 0.7, 0.7]
GCP = "Google Cloud"


def ts(day: date, hour: int = 0) -> datetime:
    return datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=hour)


@pytest.fixture
def spend(warehouse):
    """Six weeks of weekday-shaped spend (Sep 1 – Oct 12) for two teams on two clouds."""
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", SEP, 42, 900.0, weekday_factors=WEEKDAYS, source="aws-v")
        spend_lines(
            con,
            "research",
            SEP,
            42,
            2000.0,
            weekday_factors=WEEKDAYS,
            source="aws-r",
            resource=Resource(gpu_model="H100-SXM", tags={"team": "research", "project": "llm"}),
        )
        spend_lines(
            con,
            "research",
            date(2026, 9, 20),
            23,
            300.0,
            resource=Resource("gce-1", provider=GCP, gpu_model=None, tags={"team": "research", "project": "search"}),
            source="gcp",
        )
    return warehouse


def budget_alerts(con, *budgets: Budget, now: datetime = ts(date(2026, 10, 13), 5)) -> RuleOutcome:
    return alert_rules.budget_rule(con, AlertSettings(budgets=budgets), now)


def stored_open(alerts: list[Alert]) -> list[dict]:
    """The rows the alert store holds for these alerts while they are open (what ``plan`` reads)."""
    return [
        {
            "alert_id": a.id,
            "rule": a.rule,
            "scope": a.scope,
            "period": a.period,
            "threshold": a.threshold,
            "status": "open",
        }
        for a in alerts
    ]


def test_a_budgets_forecast_is_the_forecast_models_own_number(spend):
    with db.reader(spend) as con:
        out = budget_alerts(
            con,
            Budget("all", Decimal(10_000_000), forecast=True, thresholds=(1e-6,)),
            Budget(
                "vision", Decimal(10_000_000), scope=BudgetScope(teams=("vision",)), forecast=True, thresholds=(1e-6,)
            ),
            Budget("q4", Decimal(10_000_000), period="quarter", forecast=True, thresholds=(1e-6,)),
        )
        month_end = {}
        for name, teams in (("all", None), ("vision", ["vision"])):
            rows = cost_forecast(con, teams=teams, as_of=date(2026, 10, 13))
            month_end[name] = rows.filter(pl.col("horizon") == "month_end")["forecast_usd"].sum()
        quarter = period_forecast(
            con, period_start=date(2026, 10, 1), period_end=date(2027, 1, 1), as_of=date(2026, 10, 13)
        )["forecast_usd"].sum()
    forecasts = {a.scope: a.details["forecast"] for a in out.alerts}
    assert forecasts["all"]["forecast"] == round(month_end["all"], 2)  # what the Overview shows
    assert forecasts["vision"]["forecast"] == round(month_end["vision"], 2)  # what the Team page shows
    assert forecasts["q4"]["forecast"] == round(quarter, 2) > 2.5 * month_end["all"]
    assert {a.period for a in out.alerts} == {"2026-10", "2026-Q4"}


def test_period_forecast_of_a_month_is_cost_forecasts_month_end(spend):
    with db.reader(spend) as con:
        month = cost_forecast(con, as_of=date(2026, 10, 13)).filter(pl.col("horizon") == "month_end")
        same = period_forecast(
            con, period_start=date(2026, 10, 1), period_end=date(2026, 11, 1), as_of=date(2026, 10, 13)
        )
    assert month.drop("horizon").equals(same.drop("horizon"))


def test_the_forecast_alerts_before_the_actual_and_is_superseded_when_spend_arrives(spend):
    budget = Budget(
        "vision", Decimal(40_000), scope=BudgetScope(teams=("vision",)), forecast=True, thresholds=(0.25, 0.5, 0.75)
    )
    with db.reader(spend) as con:
        first = budget_alerts(con, budget)
    by_threshold = {a.threshold: a.rule for a in first.alerts}
    # $10,6xx of October spent (26 %); the month-end forecast (~$27k, 68 %) passes 50 % first
    assert by_threshold == {"0.25": "budget", "0.5": "budget_forecast"}
    forecast_alert = next(a for a in first.alerts if a.rule == "budget_forecast")
    assert "forecast" in forecast_alert.summary and forecast_alert.teams == ("vision",)
    rows = stored_open(first.alerts)
    with db.writer(spend) as con:
        spend_lines(con, "vision", date(2026, 10, 13), 12, 900.0, source="aws-v2")  # actual passes 50 %
    with db.reader(spend) as con:
        later = budget_alerts(con, budget, now=ts(date(2026, 10, 25), 5))
    change = plan(rows, [later])
    assert {a.threshold: a.rule for a in later.alerts}["0.5"] == "budget"
    assert [(s, r) for _, s, r in change.closed] == [("superseded", "the actual spend reached the threshold")]
    assert {a.threshold for a in change.opened} >= {"0.5"}


def test_budget_scopes_sum_exactly_what_the_line_items_hold(spend):
    budgets = [
        Budget("gcp", Decimal(1), scope=BudgetScope(providers=("gcp",)), thresholds=(1e-9,)),
        Budget("h100", Decimal(1), scope=BudgetScope(gpu_models=("H100-SXM",)), thresholds=(1e-9,)),
        Budget("llm", Decimal(1), scope=BudgetScope(tags=(("project", ("llm", "nope")),)), thresholds=(1e-9,)),
        Budget(
            "research-aws", Decimal(1), scope=BudgetScope(teams=("research",), providers=("aws",)), thresholds=(1e-9,)
        ),
    ]
    checks = {
        "gcp": "\"ProviderName\" = 'Google Cloud'",
        "h100": "\"x_GpuModel\" = 'H100-SXM'",
        "llm": "json_extract_string(\"Tags\", '$.project') = 'llm'",
        "research-aws": "\"x_Team\" = 'research' AND \"ProviderName\" LIKE 'Amazon%'",
    }
    with db.reader(spend) as con:
        out = budget_alerts(con, *budgets)
        for name, where in checks.items():
            expected = con.execute(
                f'SELECT sum("EffectiveCost") FROM cost_line_items WHERE {where} AND '
                "\"ChargePeriodStart\" >= '2026-10-01' AND \"ChargePeriodStart\" < '2026-11-01'"
            ).fetchall()[0][0]
            [alert] = [a for a in out.alerts if a.scope == name]
            assert alert.value_usd == expected and expected > 0, name


def test_a_finished_period_expires_silently_and_short_history_withholds_the_forecast(warehouse):
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", date(2026, 10, 29), 3, 1000.0)
    budget = Budget("vision", Decimal(2000), scope=BudgetScope(teams=("vision",)), forecast=True)
    with db.reader(warehouse) as con:
        october = budget_alerts(con, budget, now=ts(date(2026, 11, 1), 2))
    assert any("forecast withheld: 3 day(s) of cost history" in n for n in october.notes)
    assert {a.threshold for a in october.alerts} == {"0.5", "0.75", "0.9", "1"}
    rows = stored_open(october.alerts)
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", date(2026, 11, 1), 1, 100.0, source="nov")
    with db.reader(warehouse) as con:
        november = budget_alerts(con, budget, now=ts(date(2026, 11, 2), 2))
    change = plan(rows, [november])
    assert november.alerts == [] and {s for _, s, _ in change.closed} == {"expired"}


def test_a_spike_is_an_anomaly_with_the_line_items_that_moved(warehouse):
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", SEP, 30, 1000.0, weekday_factors=WEEKDAYS)
        spend_lines(con, "research", SEP, 30, 1000.0, source="r")
        spend_lines(con, "vision", date(2026, 9, 29), 1, 6000.0, resource=Resource("i-runaway"), source="runaway")
        spend_lines(con, "research", date(2026, 9, 30), 1, -900.0, source="r-credit")  # a drop
    settings = AlertSettings()
    with db.reader(warehouse) as con:
        spikes = alert_rules.anomaly_rule(con, settings, ts(date(2026, 10, 1), 6))
        both = alert_rules.anomaly_rule(
            con, AlertSettings(anomaly_directions=("spike", "drop")), ts(date(2026, 10, 1), 6)
        )
    [spike] = spikes.alerts
    assert (spike.scope, spike.period, spike.threshold, spike.teams) == (
        "vision/aws",
        "2026-09-29",
        "spike",
        ("vision",),
    )
    assert spike.details["top_line_items"][0]["resource_id"] == "i-runaway" and "i-runaway" in spike.summary
    assert spike.value_usd > spike.limit_usd
    assert {a.threshold for a in both.alerts} == {"spike", "drop"}


def test_anomalies_need_history_and_say_so(warehouse):
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", SEP, 9, 1000.0)
        spend_lines(con, "vision", date(2026, 9, 10), 1, 9000.0, source="spike")
    with db.reader(warehouse) as con:
        out = alert_rules.anomaly_rule(con, AlertSettings(), ts(date(2026, 9, 11), 3))
    assert out.alerts == [] and any("needs 14" in n for n in out.notes)


IDLE = AlertSettings(idle_min_hours=6, idle_min_cost_usd=Decimal(50))
OCT1 = ts(date(2026, 10, 1))


def idle_alerts(con, now=ts(date(2026, 10, 3), 6), settings=IDLE) -> RuleOutcome:
    return alert_rules.idle_burn_rule(con, settings, now)


def test_an_idle_resource_burning_money_is_priced_from_its_bill(warehouse):
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", OCT1.date(), 2, 240.0, resource=Resource("i-idle"))  # $10/h, 48 h
        metric_rows(con, "i-idle", "vision", OCT1, 30, 85.0)  # busy until 06:00 day 2
        metric_rows(con, "i-idle", "vision", OCT1 + timedelta(hours=30), 18, 1.0)  # then idle 18 h
        spend_lines(con, "vision", OCT1.date(), 2, 240.0, resource=Resource("i-cheap"), source="cheap")
        metric_rows(con, "i-cheap", "vision", OCT1 + timedelta(hours=44), 4, 0.0)  # idle, only 4 h
        spend_lines(con, "research", OCT1.date(), 2, 240.0, resource=Resource("i-gone"), source="gone")
        metric_rows(con, "i-gone", "research", OCT1, 40, 0.0)  # stopped reporting
    with db.reader(warehouse) as con:
        out = idle_alerts(con)
    [alert] = out.alerts
    assert alert.scope == "i-idle" and alert.period == "2026-10-02T06:00:00+00:00"
    assert alert.details["idle_hours"] == 18 and alert.value_usd == Decimal("180.00")
    assert alert.details["unbilled_hours"] == 0 and alert.teams == ("vision",)


def test_idle_hours_the_bill_does_not_hold_yet_are_priced_at_the_recent_rate_in_either_order(warehouse):
    # metrics first: 10 idle hours, the bill covers 6 of them
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", OCT1.date(), 1, 240.0, resource=Resource("i-late"))  # $10/h to 24:00
        metric_rows(con, "i-late", "vision", OCT1, 18, 90.0)
        metric_rows(con, "i-late", "vision", OCT1 + timedelta(hours=18), 10, 0.5)  # 18:00 – 04:00
    with db.reader(warehouse) as con:
        early = idle_alerts(con)
    [a] = early.alerts
    assert a.details["billed_hours"] == 6 and a.details["unbilled_hours"] == 4 and a.value_usd == Decimal("100.00")
    assert "not billed yet" in a.summary
    # the bill arrives (at a higher rate than estimated): the same alert, its cost now all billed
    with db.writer(warehouse) as con:
        con.execute("DELETE FROM cost_line_items")
        spend_lines(con, "vision", OCT1.date(), 2, 300.0, resource=Resource("i-late"))
    with db.reader(warehouse) as con:
        billed = idle_alerts(con)
    [b] = billed.alerts
    assert b.id == a.id and b.details["unbilled_hours"] == 0 and b.value_usd == Decimal("125.00")
    change = plan(stored_open([a]), [billed])
    assert change.opened == [] and [x.id for x in change.refreshed] == [a.id]


def test_a_missing_hour_ends_an_idle_run_and_an_unpriced_resource_is_withheld(warehouse):
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", OCT1.date(), 2, 240.0, resource=Resource("i-gap"))
        metric_rows(con, "i-gap", "vision", OCT1, 20, 0.0)  # idle 00:00 – 20:00
        metric_rows(con, "i-gap", "vision", OCT1 + timedelta(hours=21), 9, 0.0)  # gap at 20:00, idle 9 h
        metric_rows(con, "i-nobill", "research", OCT1, 30, 0.0)
    with db.reader(warehouse) as con:
        out = idle_alerts(con, now=ts(date(2026, 10, 2), 8))
    [alert] = out.alerts
    assert alert.details["idle_hours"] == 9 and alert.period == "2026-10-01T21:00:00+00:00"
    assert any("i-nobill" in n and "no GPU cost lines" in n for n in out.notes)


def test_stale_data_is_one_alert_per_episode_and_resolves_when_data_catches_up(warehouse):
    now = ts(date(2026, 10, 17), 4)
    with db.writer(warehouse) as con:
        spend_lines(con, "vision", date(2026, 10, 1), 14, 100.0, source="aws")  # data ends Oct 15 00:00
        con.execute(
            "INSERT INTO ingest_runs (run_id, source, source_type, started_at, finished_at, status, rows, "
            "watermark, error, freshness_kind, expected_lag_hours) "
            "VALUES ('r1', 'aws', 'aws_cur', ?, ?, 'succeeded', 1, NULL, NULL, 'cost', 24.0)",
            [now, now],
        )
        first = alert_rules.stale_data_rule(con, AlertSettings(), now)
        [alert] = first.alerts
        assert alert.scope == "aws" and alert.period == "2026-10-17T04:00:00+00:00" and alert.teams == ()
        assert "stale" in alert.summary
        route = lambda teams: [("email", "finance@example.com")]  # noqa: E731
        group_of = lambda rule, scope, period, teams: Alert(rule, scope, period, "", "info", "", "", teams=teams).group  # noqa: E731
        alerts_store.reconcile(con, lambda rows: plan(rows, [first]), route, group_of, now)
        later = alert_rules.stale_data_rule(con, AlertSettings(), now + timedelta(hours=5))
        assert [a.id for a in later.alerts] == [alert.id]  # the same episode, not a new alert
        spend_lines(con, "vision", date(2026, 10, 15), 2, 100.0, source="aws")  # data now ends Oct 17 00:00
        caught_up = alert_rules.stale_data_rule(con, AlertSettings(), now + timedelta(hours=6))
        changes = alerts_store.reconcile(
            con, lambda rows: plan(rows, [caught_up]), route, group_of, now + timedelta(hours=6)
        )
    assert caught_up.alerts == [] and [(a, s) for a, s, _ in changes["closed"]] == [(alert.id, "resolved")]


def test_a_rule_that_could_not_run_leaves_its_alerts_alone():
    rows = [
        {
            "alert_id": "a1",
            "rule": "anomaly",
            "scope": "x",
            "period": "2026-10-01",
            "threshold": "spike",
            "status": "open",
        }
    ]
    assert plan(rows, [RuleOutcome("anomaly", ("anomaly",), complete=False)]).closed == []
    assert plan(rows, [RuleOutcome("anomaly", ("anomaly",))]).closed[0][1] == "resolved"


def test_budget_periods_and_the_dashboards_monthly_budget():
    assert period_bounds(date(2026, 11, 30), "quarter") == (date(2026, 10, 1), date(2027, 1, 1), "2026-Q4")
    assert period_bounds(date(2026, 2, 3), "quarter")[2] == "2026-Q1"
    assert period_bounds(date(2026, 12, 31), "month") == (date(2026, 12, 1), date(2027, 1, 1), "2026-12")
    budgets = [
        Budget("all", Decimal(100)),
        Budget("v", Decimal(10), scope=BudgetScope(teams=("vision",))),
        Budget("r", Decimal(20), scope=BudgetScope(teams=("research",))),
        Budget("vr", Decimal(5), scope=BudgetScope(teams=("vision", "research"))),
        Budget("vq", Decimal(99), period="quarter", scope=BudgetScope(teams=("vision",))),
    ]
    assert monthly_budget_for(budgets, None) == 100
    assert monthly_budget_for(budgets[1:], None) == 30
    assert monthly_budget_for(budgets, ["vision"]) == 10
    assert monthly_budget_for(budgets, ["vision", "research"]) == 35
