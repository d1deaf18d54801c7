"""One forecast (models.outlook): a finished period forecasts exactly its actual with a zero-width
interval, scope "all" includes spend without a team, and the same (scope, period, as-of) gives the same
number on every surface: the budget alert (and its context line the demo prints), the API's alerts, the
weekly report and the dashboard. Real DuckDB; the API over loopback."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import httpx
import pytest

from gpufinops.kernel.labels import NO_TEAM
from gpufinops.models import alert_rules
from gpufinops.models.alerts import AlertSettings
from gpufinops.models.budgets import Budget, BudgetScope
from gpufinops.models.forecast import cost_forecast
from gpufinops.models.outlook import month_outlook, period_outlook
from gpufinops.warehouse import db
from tests.alert_fleet import Resource, spend_lines

SEP, OCT, NOV = date(2026, 9, 1), date(2026, 10, 1), date(2026, 11, 1)
WEEKDAYS = [1.2, 1.2, 1.1, 1.1, 1.0, 0.7, 0.7]
ORPHAN_PER_DAY = 30.0  # the machine without a team tag


def fleet(path, until: date) -> None:
    """Two teams and one machine without a team, from Sep 1 to ``until`` (exclusive)."""
    days = (until - SEP).days
    with db.writer(path) as con:
        spend_lines(con, "vision", SEP, days, 900.0, weekday_factors=WEEKDAYS, source="aws-v")
        spend_lines(con, "research", SEP, days, 2000.0, weekday_factors=WEEKDAYS, source="aws-r")
        spend_lines(con, None, SEP, days, ORPHAN_PER_DAY, resource=Resource("i-orphan", tags={}), source="aws-o")


def exact(con, start: date, end: date, team_clause: str = "TRUE") -> Decimal:
    [(value,)] = con.execute(
        f'SELECT sum("EffectiveCost") FROM cost_line_items WHERE "ChargePeriodStart" >= ? '
        f'AND "ChargePeriodStart" < ? AND {team_clause}',
        [datetime.combine(start, datetime.min.time(), UTC), datetime.combine(end, datetime.min.time(), UTC)],
    ).fetchall()
    return Decimal(value).quantize(Decimal("0.01"))


def test_a_finished_month_forecasts_its_actual_with_a_zero_width_interval(warehouse):
    fleet(warehouse, NOV)
    with db.reader(warehouse) as con:
        found = period_outlook(con, BudgetScope(), OCT, NOV, now=datetime(2026, 11, 1, 5, tzinfo=UTC))
        actual = exact(con, OCT, NOV)
        outcome = alert_rules.budget_rule(
            con,
            AlertSettings(budgets=(Budget("fleet", Decimal(1), forecast=True, thresholds=(0.5,)),)),
            datetime(2026, 11, 1, 5, tzinfo=UTC),
        )
    assert found is not None and found.complete
    assert found.actual_usd == found.forecast_usd == found.lower_usd == found.upper_usd == actual
    assert actual > 31 * (900 + 2000) * 0.9  # every team's October
    [alert] = outcome.alerts
    assert alert.period == "2026-10" and alert.details["forecast"]["complete"]
    assert alert.details["forecast"]["forecast"] == alert.details["spent_usd"] == float(actual)
    assert alert.details["forecast"]["lower"] == alert.details["forecast"]["upper"] == float(actual)
    assert f"forecast ${actual:,.2f} (complete" in outcome.context["fleet"]  # what the demo prints


def test_scope_all_includes_the_cost_of_a_machine_without_a_team(warehouse):
    fleet(warehouse, date(2026, 10, 20))
    with db.reader(warehouse) as con:
        every = month_outlook(con, None)
        teams = month_outlook(con, ["vision", "research"])
        series = cost_forecast(con, as_of=date(2026, 10, 20))
        orphan_known = exact(con, OCT, date(2026, 10, 20), '"x_Team" IS NULL')
    assert every is not None and teams is not None and not every.complete
    assert every.first_unknown_day == date(2026, 10, 20)
    assert every.actual_usd - teams.actual_usd == orphan_known == Decimal(19 * ORPHAN_PER_DAY).quantize(Decimal("0.01"))
    # the whole month of the team-less machine (31 days × $30), known days and forecast ones
    assert every.forecast_usd - teams.forecast_usd == pytest.approx(Decimal(31 * ORPHAN_PER_DAY), rel=0.02)
    unattributed = series.filter(series["team"].is_null() & (series["horizon"] == "month_end"))
    assert unattributed.height == 1 and unattributed["actual_to_date_usd"][0] == pytest.approx(float(orphan_known))
    assert every.lower_usd < every.forecast_usd < every.upper_usd


@pytest.mark.parametrize("until", [NOV, date(2026, 10, 20)], ids=["finished month", "month under way"])
def test_one_number_for_one_scope_period_and_as_of_on_every_surface(warehouse, tmp_path, until):
    from gpufinops.dashboard import spend
    from gpufinops.interfaces import cli
    from gpufinops.interfaces.api import create_app
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs.report.figures import collect
    from gpufinops.jobs.report.weeks import week_of
    from gpufinops.warehouse.scope import Scope
    from tests.test_api import Served

    fleet(warehouse, until)
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{warehouse}"\n\n[[budgets]]\nname = "fleet"\namount = 1\nperiod = "month"\n'
        "thresholds = [0.5]\nforecast = true\n"
    )
    now = datetime.combine(until, datetime.min.time(), UTC) + timedelta(hours=5)
    assert cli.main(["--config", str(config), "alerts", "run", "--now", now.isoformat(), "--no-send"]) == 0
    with db.reader(warehouse) as con:
        found = month_outlook(con, None)
        assert found is not None and found.period_start == OCT and found.complete == (until == NOV)
        numbers = {"outlook": found.forecast_usd}
        dashboard = spend.load(con, None, 30)
        numbers["dashboard"] = spend.forecast_month_end(dashboard)[1]
        assert spend.forecast_view(dashboard.forecast, dashboard.outlook)["forecast_usd"][0] == float(
            found.forecast_usd
        )
        last_day = datetime.combine(until - timedelta(days=1), datetime.min.time(), UTC)
        report = collect(con, week_of(last_day), Scope("finance", actor="test"), "UTC")
        numbers["weekly report"] = report.forecast["forecast_usd"]
        assert NO_TEAM in {line.team for line in report.teams}  # the one name of spend without a team
        outcome = alert_rules.budget_rule(
            con, AlertSettings(budgets=(Budget("fleet", Decimal(1), forecast=True, thresholds=(0.5,)),)), now
        )
        numbers["budget"] = Decimal(str(outcome.alerts[0].details["forecast"]["forecast"]))
    cfg = config_mod.load(str(config), environ={})
    with Served(create_app(cfg, insecure_demo=True, environ={})) as api:
        alerts = httpx.get(f"{api.url}/v1/alerts", params={"rule": "budget"}, timeout=30).json()
    assert len(alerts) == 1 and alerts[0]["period"] == "2026-10"
    numbers["api /v1/alerts"] = Decimal(str(alerts[0]["details"]["forecast"]["forecast"]))
    assert set(numbers.values()) == {found.forecast_usd}, numbers
    if until == NOV:
        assert found.forecast_usd == found.actual_usd == found.lower_usd == found.upper_usd
        assert report.forecast["complete"] and dashboard.outlook.complete
    else:
        assert found.forecast_usd > found.actual_usd
