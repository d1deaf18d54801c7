"""`gpufinops costs` and `GET /v1/costs` (warehouse/spend_by.py), the one window model
(warehouse/windows.py), and unit costs and carbon per week and month, on small warehouses whose every
expected figure is summed here from the line items with SQL the code does not run.
tests/test_costs_surfaces.py compares the figure across the CLI, API, MCP and dashboard on the demo."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import httpx
import pytest

from gpufinops.derived import unit_costs
from gpufinops.interfaces import cli
from gpufinops.warehouse import db, windows
from gpufinops.warehouse.queries import carbon as carbon_queries
from tests import serving_fleet as sf
from tests.carbon_fleet import build as build_carbon
from tests.test_api import FINANCE, SCHEDULER, TOKENS, VISION, Served, make_config


@pytest.fixture
def feed_warehouse(feed_warehouse):
    """The feed fleet with its ``cost_daily`` rollup, as every cost load leaves it."""
    from gpufinops.derived import rollups

    with db.writer(feed_warehouse) as con:
        rollups.refresh_cost_daily(con)
    return feed_warehouse


def run_cli(capsys, warehouse, *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["--db", str(warehouse), "costs", *args])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def by_team_sql(warehouse, start: str, end: str) -> dict[str, Decimal]:
    """Effective cost per tagged team in [start, end) straight from the line items (the feed fleet
    shares no GPU, so the allocation moves nothing)."""
    with db.reader(warehouse) as con:
        rows = con.execute(
            'SELECT coalesce("x_Team", \'(unattributed)\'), sum("EffectiveCost") FROM cost_line_items '
            'WHERE "ChargePeriodStart" >= ?::TIMESTAMPTZ AND "ChargePeriodStart" < ?::TIMESTAMPTZ GROUP BY 1',
            [start, end],
        ).fetchall()
    return {team: Decimal(str(cost)) for team, cost in rows}


# --- the window model ------------------------------------------------------------------------------


def test_a_month_is_the_calendar_month_in_utc_and_days_are_whole():
    october = windows.month("2026-10")
    assert (october.start, october.end) == (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    assert october.label == "October 2026" and october.as_dict() == {
        "label": "October 2026",
        "from": "2026-10-01",
        "to": "2026-10-31",
    }
    assert windows.month("2026-12").end == datetime(2027, 1, 1, tzinfo=UTC)
    # a date-time inside a day is that whole day: a window never starts or ends mid-day
    span = windows.days(datetime(2026, 10, 1, 23, tzinfo=UTC), datetime(2026, 10, 3, 5, tzinfo=UTC))
    assert (span.start, span.end) == (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 4, tzinfo=UTC))
    recent = windows.last_days(datetime(2026, 10, 31, 22, tzinfo=UTC), 30)
    assert recent.label.startswith("last 30 days (2026-10-02") and recent.end == datetime(2026, 11, 1, tzinfo=UTC)
    assert windows.partial_days(windows.month("2026-10"), datetime(2026, 10, 1, 23, tzinfo=UTC), None) == [
        "2026-10-01 from 23:00 UTC"
    ]
    assert windows.partial_days(october, october.start, datetime(2026, 10, 31, 23, tzinfo=UTC)) == []


@pytest.mark.parametrize("text", ["2026-13", "2026-00", "26-10", "2026-10-01", "", "2026-1\r\n", "1969-12"])
def test_a_bad_month_is_one_sentence_naming_it(text):
    with pytest.raises(windows.WindowError, match="month: not a month"):
        windows.month(text)


def test_from_after_to_and_month_with_days_are_refused():
    with pytest.raises(windows.WindowError, match="before from"):
        windows.days(datetime(2026, 10, 3, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC))
    with pytest.raises(windows.WindowError, match="not both"):
        windows.pick("2026-10", datetime(2026, 10, 3, tzinfo=UTC))


# --- gpufinops costs ------------------------------------------------------------------------------


def test_costs_by_team_equals_the_line_items_in_every_format(feed_warehouse, capsys):
    expected = by_team_sql(feed_warehouse, "2026-11-01", "2026-12-01")
    code, out, _ = run_cli(capsys, feed_warehouse, "--by", "team", "--month", "2026-11", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[-1]["team"] == "total" and Decimal(rows[-1]["cost_usd"]) == sum(expected.values())
    assert {r["team"]: Decimal(r["cost_usd"]) for r in rows[:-1]} == expected  # exact decimals
    code, out, _ = run_cli(capsys, feed_warehouse, "--by", "team", "--month", "2026-11", "--format", "json")
    body = json.loads(out)
    assert body["window"] == {"label": "November 2026", "from": "2026-11-01", "to": "2026-11-30"}
    assert body["total_usd"] == pytest.approx(float(sum(expected.values())))
    assert {r["team"]: r["cost_usd"] for r in body["rows"]} == pytest.approx({t: float(v) for t, v in expected.items()})
    code, out, _ = run_cli(capsys, feed_warehouse)  # no window: the month of the newest data, as a table
    assert code == 0 and "Effective cost by team, November 2026 (UTC)" in out
    total_line = next(line for line in out.splitlines() if line.startswith("Total"))
    assert f"${sum(expected.values()):,.2f}" in total_line


def test_one_day_and_the_other_groupings_add_up_to_the_same_total(feed_warehouse, capsys):
    expected = sum(by_team_sql(feed_warehouse, "2026-11-02", "2026-11-03").values())
    for by in ("team", "provider", "resource", "service", "gpu_model"):
        code, out, _ = run_cli(
            capsys, feed_warehouse, "--by", by, "--from", "2026-11-02", "--to", "2026-11-02", "--format", "json"
        )
        assert code == 0 and json.loads(out)["total_usd"] == pytest.approx(float(expected)), by


def test_namespaces_say_what_they_cover(feed_warehouse, capsys):
    code, out, _ = run_cli(capsys, feed_warehouse, "--by", "namespace", "--cost", "gpu", "--format", "json")
    body = json.loads(out)
    assert code == 0 and body["rows"] == [] and body["total_usd"] is None and "no spend in" in body["covers"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--month", "2026-13"], "month: not a month between 1970-01 and 2199-12: '2026-13'"),
        (["--month", "2026-10", "--to", "2026-10-02"], "--to goes with --from, not with --month"),
        (["--from", "2026-11-03", "--to", "2026-11-01"], "--to 2026-11-01 is before --from 2026-11-03"),
        (["--by", "namespace", "--cost", "billed"], "namespaces carry the allocated GPU cost only"),
    ],
)
def test_bad_windows_are_usage_errors_in_one_sentence(feed_warehouse, capsys, args, message):
    code, out, err = run_cli(capsys, feed_warehouse, *args)
    assert code == 2 and message in err and not out and "Traceback" not in err


def test_usage_errors_argparse_refuses(feed_warehouse, capsys):
    for args in (["--by", "pod"], ["--cost", "list"], ["--month", "2026-10", "--from", "2026-10-01"]):
        assert run_cli(capsys, feed_warehouse, *args)[0] == 2


def test_a_window_without_spend_says_so_never_a_zero_table(feed_warehouse, capsys):
    code, out, _ = run_cli(capsys, feed_warehouse, "--month", "2020-01")
    assert code == 0 and "no spend in this window" in out and "$0.00" not in out
    code, out, _ = run_cli(capsys, feed_warehouse, "--month", "2020-01", "--format", "csv")
    assert code == 0 and out.strip() == "team,cost_usd,share"


# --- GET /v1/costs --------------------------------------------------------------------------------


def test_the_api_gives_the_cli_figure_scoped_by_token(tmp_path, feed_warehouse, capsys):
    code, out, _ = run_cli(capsys, feed_warehouse, "--month", "2026-11", "--cost", "gpu", "--format", "json")
    from_cli = json.loads(out)
    from gpufinops.interfaces.api import create_app

    with Served(create_app(make_config(tmp_path, feed_warehouse), environ=TOKENS)) as served:
        url = f"{served.url}/v1/costs"
        finance = httpx.get(url, params={"month": "2026-11", "cost": "gpu"}, headers=FINANCE).json()
        assert finance == from_cli
        lead = httpx.get(url, params={"month": "2026-11", "cost": "gpu"}, headers=VISION).json()
        vision = next(r["cost_usd"] for r in from_cli["rows"] if r["team"] == "vision")
        assert [r["team"] for r in lead["rows"]] == ["vision"] and lead["total_usd"] == pytest.approx(vision)
        assert httpx.get(url, params={"team": "nlp"}, headers=VISION).status_code == 403
        assert httpx.get(url, headers=SCHEDULER).status_code == 403
        for bad, status, text in (
            ({"by": "pod"}, 400, "by: must be one of"),
            ({"month": "2026-13"}, 400, "month: not a month"),
            ({"month": "2026-11", "from": "2026-11-01"}, 400, "not both"),
            # a control character is refused before any route reads it, and named escaped
            ({"cost": "x\r\n"}, 422, "cost: a value holding a control character: 'x\\r\\n'"),
        ):
            answer = httpx.get(url, params=bad, headers=FINANCE)
            assert answer.status_code == status and text in answer.json()["detail"], (bad, answer.text)
        days = httpx.get(f"{served.url}/v1/costs/daily", params={"from": "2026-11-01"}, headers=FINANCE).json()
        assert from_cli["total_usd"] == pytest.approx(sum(r["gpu_cost"] for r in days))  # the older endpoint stays


# --- per week and month ----------------------------------------------------------------------------


def test_carbon_per_day_and_week_add_up_to_the_month(tmp_path):
    path = tmp_path / "wh" / "gpufinops.duckdb"
    with db.writer(path) as con:
        build_carbon(con)
    with db.reader(path) as con:
        month = carbon_queries.carbon_summary(con, by="month").to_dicts()
        weeks = carbon_queries.carbon_summary(con, by="team", period="week")
        days = carbon_queries.carbon_summary(con, by="month", period="day")
        [(total,)] = con.execute("SELECT sum(kg_co2e) FROM carbon_hourly").fetchall()
    assert sum(r["kg_co2e"] for r in month) == pytest.approx(total)
    assert float(weeks["kg_co2e"].sum()) == pytest.approx(total) and "week" in weeks.columns
    assert all(d.weekday() == 0 for d in weeks["week"])  # ISO weeks start on Monday
    assert float(days["kg_co2e"].sum()) == pytest.approx(total) and days.height >= 1


def test_unit_costs_per_month_have_one_row_per_model_and_a_total(warehouse, capsys):
    sf.warehouse_with_fleet(warehouse)
    with db.reader(warehouse) as con:
        daily = unit_costs.unit_costs(con)
        monthly = unit_costs.unit_costs(con, period="month")
        totals = unit_costs.unit_costs(con, by=unit_costs.TOTAL, period="month")
    assert monthly.height == daily.select("team", "namespace", "model").unique().height  # one month here
    assert {str(d) for d in monthly["day"]} == {"2026-11-01"}
    assert Decimal(str(totals["gpu_cost_usd"].sum())) == Decimal(str(daily["gpu_cost_usd"].sum()))
    rate = Decimal(str(totals["usd_per_1m_output_tokens"][0]))
    out_cost = Decimal(str(totals["output_cost_usd"][0]))
    assert abs(rate - out_cost * 1_000_000 / int(totals["output_tokens"][0])) < Decimal("0.000001")
    assert cli.main(["--db", str(warehouse), "unit-costs", "--period", "month"]) == 0
    text = capsys.readouterr().out
    assert "Total" in text and "and month" in text and "2026-11" in text and "2026-11-01" not in text
    assert "0.000000000" not in text  # money rounded in the table


def test_an_unknown_team_is_named_with_the_teams_there_are(feed_warehouse, capsys):
    code, out, err = run_cli(capsys, feed_warehouse, "--team", "visoin")
    assert code == 2 and not out and "--team visoin: no such team" in err and "vision" in err
