"""The dashboard (Streamlit AppTest) on the demo warehouse: every page renders, its figures are the
warehouse queries' own, a lead sees only its teams everywhere, decisions persist, and an ingest
writing in a loop neither breaks the dashboard nor is broken by it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from gpufinops.dashboard import spend_table, views
from gpufinops.dashboard.common import DEFAULT_WINDOW_DAYS, money, month_bounds, window_start
from gpufinops.ingest.core.runner import run_source
from gpufinops.kernel import labels
from gpufinops.warehouse import db, freshness, queries
from tests.conftest import FOCUS_SAMPLE, query
from tests.demo_cache import demo_copy

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
PAGES = ("overview", "team", "fleet", "unit_costs", "recommendations", "spot", "onprem", "health")
LEAD_TEAM = "vision"
AUTH = {
    "auth": "oidc",
    "users": [
        {"email": "cfo@example.com", "role": "finance"},
        {"email": "lead@example.com", "role": "lead", "teams": [LEAD_TEAM]},
    ],
    "monthly_budget_usd": 100000,
    "team_budgets": {LEAD_TEAM: 5000},
}


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory) -> Path:
    """The demo fleet (14 days), built once for the module; tests that write use a copy."""
    home = tmp_path_factory.mktemp("demo")
    printed = demo_copy(tmp_path_factory, home, days=14)
    (home / "summary.txt").write_text(printed)  # what the demo printed (tests read its totals)
    path = home / "data" / "gpufinops.duckdb"
    _add_spot_prices(path)
    return path


def _add_spot_prices(path: Path) -> None:
    """Spot price points for a type the demo bills (the demo has no spot source yet)."""
    with db.writer(path) as con:
        con.execute("""INSERT INTO spot_prices SELECT 'aws', 'us-east-1', 'us-east-1a', 'p4d.24xlarge', 'Linux/UNIX',
                       TIMESTAMPTZ '2026-10-18 00:00:00+00' + INTERVAL (i) HOUR, 9.5 + (i % 7) * 0.25
                       FROM range(0, 336, 6) t(i)""").fetchall()
        con.execute("""INSERT INTO instance_types VALUES ('aws', 'us-east-1', 'p4d.24xlarge', 'A100-40GB', 8, 40.0,
                       96, 1152.0, 32.77, 'test', now())""").fetchall()


@pytest.fixture
def writable_warehouse(demo_warehouse, tmp_path) -> Path:
    copy = tmp_path / "wh" / "gpufinops.duckdb"
    copy.parent.mkdir(parents=True)
    shutil.copy(demo_warehouse, copy)
    return copy


def make_app(monkeypatch, warehouse: Path, settings: dict | None = None, email: str | None = None):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GPUFINOPS_DB", str(warehouse))
    monkeypatch.setenv("GPUFINOPS_DASHBOARD", json.dumps(settings or {}))
    at = AppTest.from_file(str(APP), default_timeout=120)
    if email:
        at.user = {"is_logged_in": True, "email": email}
    return at


def open_page(at, page: str, view: str | None = None):
    """``page`` (its first view, or ``view``: dashboard/views.py, as a link's ?view=… opens it)."""
    if view is None:
        at.run()
        at.switch_page(f"pages/{page}.py")
    else:  # a link to the view, opened as the browser's first request
        at.switch_page(f"pages/{page}.py")
        at.query_params[views.KEY] = view
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def chart_tables(at) -> list[pa.Table]:
    """The data behind every chart on the page (Arrow streams inside the Vega-Lite elements)."""
    tables = []
    for chart in at.get("vega_lite_chart"):
        for dataset in chart.proto.datasets:
            tables.append(pa.ipc.open_stream(dataset.data.data).read_all())
    return tables


def scoped(con, teams):
    """The figures the Overview must show, from queries other than the ones the page runs."""
    as_of = queries.latest_charge_day(con, team=teams)
    start, end = month_bounds(as_of)
    totals = queries.cost_totals(con, team=teams, start=start, end=end)
    recs = queries.recommendations(con, team=teams, status="open")
    return {
        "spend": sum((Decimal(str(v)) for v in totals["effective_cost"]), Decimal(0)),
        "gpu": sum((Decimal(str(v)) for v in totals["gpu_cost"]), Decimal(0)),
        "identified": sum((Decimal(str(v)) for v in recs["monthly_savings_usd"]), Decimal(0)),
    }


# --- every page, demo mode -----------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_the_demo_banner(monkeypatch, demo_warehouse, page):
    at = open_page(make_app(monkeypatch, demo_warehouse), page)
    assert "No authentication is configured" in at.warning[0].value
    # the demo is built on a fixed calendar that ended a month before today: Data health must say so
    errors = [e.value for e in at.error]
    expected = ["Stale data: "] if page == "health" else []
    assert [e[: len("Stale data: ")] for e in errors] == expected, errors
    assert at.title[0].value


def test_health_and_overview_call_the_demo_data_stale(monkeypatch, demo_warehouse):
    """The data ends weeks before today: every time series source is stale, the prices are not."""
    with db.reader(demo_warehouse) as con:
        fresh = freshness.source_freshness(con)
    stale = set(fresh.filter(fresh["stale"])["source"].to_list())
    assert stale == {"aws_cur", "azure_cost", "gcp_billing", "gpu_metrics", "onprem"}
    at = open_page(make_app(monkeypatch, demo_warehouse), "health")
    assert all(f"**{s}**" in at.error[0].value for s in stale)
    table = at.dataframe[0].value
    assert set(table.loc[table["stale"], "source"]) == stale
    overview = open_page(make_app(monkeypatch, demo_warehouse), "overview")
    assert any(w.value.startswith("Stale data") for w in overview.warning)


def test_freshness_from_newest_rows_read_once_is_judged_against_each_render_s_now(demo_warehouse):
    """The pages keep each source's newest rows per load (the scan) and judge them against the clock on every
    render: the same table as a fresh read, and a later now makes the same rows older, then stale."""
    from datetime import timedelta

    with db.reader(demo_warehouse) as con:
        newest = freshness.newest_by_source(con)
        data_end = max(r["newest_data_at"] for r in freshness.source_freshness(con).iter_rows(named=True))
        just_after = data_end + timedelta(minutes=30)
        assert freshness.source_freshness(con, just_after, newest_rows=newest).equals(
            freshness.source_freshness(con, just_after)
        )
        later = freshness.source_freshness(con, just_after + timedelta(days=30), newest_rows=newest)
    now = freshness.source_freshness(con, just_after, newest_rows=newest)  # the connection is closed: rows suffice
    assert (later["age_hours"].drop_nulls() > now["age_hours"].drop_nulls()).all()
    assert set(freshness.stale_sources(con, just_after, newest_rows=newest)["source"]) < set(
        later.filter("stale")["source"]
    )


def test_overview_figures_are_the_warehouse_queries(monkeypatch, demo_warehouse):
    from gpufinops.models.outlook import month_outlook

    at = open_page(make_app(monkeypatch, demo_warehouse, {"monthly_budget_usd": 100000}), "overview")
    shown = metrics(at)
    with db.reader(demo_warehouse) as con:
        expected = scoped(con, None)
        as_of = queries.latest_charge_day(con)
        outlook = month_outlook(con, None)  # the one forecast every surface quotes
    assert shown["Spend this month"] == money(expected["spend"])
    assert shown["GPU spend this month"] == money(expected["gpu"])
    assert shown["Savings identified per month"] == money(expected["identified"])
    assert expected["identified"] > 0  # the demo's planted idle GPUs
    label = next(k for k in shown if k.startswith("Forecast"))
    assert outlook is not None and label == f"Forecast: {outlook.period_start:%B %Y}"
    assert shown[label] == money(outlook.forecast_usd)
    # the demo's data ends with October: a finished month forecasts what it cost, unattributed spend included
    assert outlook.complete and shown[label] == shown["Spend this month"]
    # every chart's money is the day's spend: the provider chart adds up to the window's spend
    provider_chart = next(
        t for t in chart_tables(at) if "provider" in t.column_names and "effective_cost" in t.column_names
    )
    with db.reader(demo_warehouse) as con:
        as_of = queries.latest_charge_day(con)
        window = queries.cost_totals(con, start=min(window_start(as_of, DEFAULT_WINDOW_DAYS), month_bounds(as_of)[0]))
    assert round(sum(provider_chart.column("effective_cost").to_pylist()), 2) == round(
        float(sum(Decimal(str(v)) for v in window["effective_cost"])), 2
    )


def test_fleet_and_recommendations_figures(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse), "fleet")
    with db.reader(demo_warehouse) as con:
        as_of = queries.latest_charge_day(con)
        idle = queries.idle_gpu_cost(con, start=window_start(as_of, DEFAULT_WINDOW_DAYS))
        recs = queries.recommendations(con, status="open")
    assert metrics(at)["Idle GPU cost"] == money(sum(Decimal(str(v)) for v in idle["idle_cost"]))
    at = open_page(make_app(monkeypatch, demo_warehouse), "recommendations")
    table = at.dataframe[0].value
    assert list(table["id"]) == recs["id"].to_list()  # sorted by savings, like the query
    assert [round(v, 2) for v in table["monthly_savings_usd"]] == [float(v) for v in recs["monthly_savings_usd"]]
    detail = open_page(make_app(monkeypatch, demo_warehouse), "recommendations", "Detail")
    assert len(chart_tables(detail)) >= 2  # utilisation and memory of the top finding


def test_spot_page_shows_spot_against_on_demand(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse), "spot")
    at.selectbox(key="spot_provider").set_value("aws").run()
    at.selectbox(key="spot_type").set_value("p4d.24xlarge").run()
    assert not at.exception
    with db.reader(demo_warehouse) as con:
        prices = queries.spot_price_history(con, "aws", "p4d.24xlarge")
    latest = prices.sort("ts").tail(1).row(0, named=True)
    assert metrics(at)["Latest spot price"] == f"{money(latest['price_usd'])}/h"
    assert metrics(at)["On-demand"] == "$32.77/h"
    assert any("price_usd" in t.column_names for t in chart_tables(at))
    bands = open_page(make_app(monkeypatch, demo_warehouse), "spot", "Interruption frequency")
    assert [s.value for s in bands.subheader] == ["Interruption frequency"] and chart_tables(bands)


def test_health_page_flags_a_failed_source(monkeypatch, writable_warehouse):
    with db.writer(writable_warehouse) as con:
        con.execute("""INSERT INTO ingest_runs (run_id, source, source_type, started_at, finished_at, status, rows, watermark,
                       error, freshness_kind, expected_lag_hours) VALUES ('r-broken', 'aws_spot', 'aws_spot_prices',
                       now(), now(), 'failed', 0, NULL, 'AccessDenied: ec2:DescribeSpotPriceHistory', 'prices', 24.0)""").fetchall()
    at = open_page(make_app(monkeypatch, writable_warehouse), "health")
    failing = next(e.value for e in at.error if e.value.startswith("Failing"))
    assert "aws_spot" in failing
    runs = at.dataframe[1].value
    assert set(runs.loc[runs["failing"], "source"]) == {"aws_spot"}


def test_dashboard_without_a_warehouse_says_what_to_do(monkeypatch, tmp_path):
    at = open_page(make_app(monkeypatch, tmp_path / "missing.duckdb"), "overview")
    assert "does not exist yet" in at.error[0].value


def test_dashboard_shows_spend_of_a_focus_sample(monkeypatch, focus_registry, warehouse):
    run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(FOCUS_SAMPLE)})
    at = open_page(make_app(monkeypatch, warehouse), "overview")
    with db.reader(warehouse) as con:
        expected = scoped(con, None)
    assert metrics(at)["Spend this month"] == money(expected["spend"])
    at.switch_page("pages/health.py").run()
    health = at.dataframe[1].value
    assert list(health["source"]) == ["focus"] and list(health["last_status"]) == ["Succeeded"]  # by its label


# --- roles -----------------------------------------------------------------------------------------


# every page, and each other view of a page (dashboard/views.py) by its ?view=…
SCREENS = [(page, None) for page in PAGES] + [(p, v) for p, names in views.PAGES.items() for v in names[1:]]


@pytest.mark.parametrize("page, view", SCREENS, ids=[f"{p}-{v}" if v else p for p, v in SCREENS])
def test_a_lead_never_sees_another_team(monkeypatch, demo_warehouse, page, view):
    at = open_page(make_app(monkeypatch, demo_warehouse, AUTH, "lead@example.com"), page, view)
    assert not at.warning or "No authentication" not in at.warning[0].value
    assert "lead@example.com (lead)" in at.caption[0].value
    for table in chart_tables(at):
        if "team" in table.column_names:
            assert set(table.column("team").to_pylist()) <= {LEAD_TEAM}, page
    for frame in at.dataframe:
        value = frame.value
        if "team" in value.columns:  # the Overview's spend-by-team table ends with its total row
            assert set(value["team"]) - {spend_table.TOTAL} <= {LEAD_TEAM}, page
    if page == "overview" and view is None:
        with db.reader(demo_warehouse) as con:
            expected = scoped(con, [LEAD_TEAM])
            everyone = scoped(con, None)
        assert metrics(at)["Spend this month"] == money(expected["spend"]) != money(everyone["spend"])
        assert metrics(at)["Savings identified per month"] == money(expected["identified"])
    if page == "team":
        assert at.selectbox(key="team_pick").options == [LEAD_TEAM]
    if (page, view) == ("fleet", "Unattributed"):
        assert "finance sees them" in " ".join(c.value for c in at.caption)
    if (page, view) == ("recommendations", None):
        table = at.dataframe[0].value
        assert len(table) >= 1 and set(table["team"]) == {LEAD_TEAM}


def test_a_view_opened_by_its_link_and_left_for_another_page_opens_that_page_s_first_view(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse), "team", "Forecast")
    assert [s.value for s in at.subheader] == ["Forecast"]  # the link's view, and only it, is drawn
    at.query_params.clear()  # the sidebar's link to another page carries no ?view=
    at.switch_page("pages/overview.py").run()
    assert "Forecast" not in [s.value for s in at.subheader]  # the Team page's open view is not the Overview's
    assert any(s.value.startswith("Spend by team") for s in at.subheader)


def test_finance_sees_every_team(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse, AUTH, "CFO@example.com"), "team")
    with db.reader(demo_warehouse) as con:
        assert at.selectbox(key="team_pick").options == queries.cost_teams(con)
    assert len(at.selectbox(key="team_pick").options) > 1


@pytest.mark.parametrize("email, shown", [(None, "Sign in"), ("stranger@example.com", "Access denied")])
def test_no_role_no_data(monkeypatch, demo_warehouse, email, shown):
    at = make_app(monkeypatch, demo_warehouse, AUTH, email)
    if email is None:
        at.user = {"is_logged_in": False}
    at.run()
    assert not at.exception
    texts = [e.value for e in at.error] + [b.label for b in at.button]
    assert any(shown in t for t in texts)
    assert not at.metric and not at.dataframe and not at.get("vega_lite_chart")


# --- decisions -------------------------------------------------------------------------------------


def test_a_decision_is_recorded_with_who_and_why(monkeypatch, writable_warehouse):
    at = open_page(make_app(monkeypatch, writable_warehouse, AUTH, "lead@example.com"), "recommendations", "Detail")
    rec_id = detailed_id(at)  # the detail opens on the top finding
    shown_before = int(metrics(at)["Shown"].split(" of ")[0])
    at.radio(key="decision_choice").set_value("Dismiss")
    at.button[0].click().run()  # no reason: refused
    assert any("Say why" in e.value for e in at.error)
    assert query(writable_warehouse, "SELECT count(*) FROM decisions")[0][0] == 0
    at.radio(key="decision_choice").set_value("Dismiss")
    at.text_input(key="decision_reason").input("nightly batch, needed for the release")
    at.button[0].click().run()
    assert not at.exception and any("Recorded: dismiss" in s.value for s in at.success)
    # the same run shows it: the dismissed finding has left the open/accepted list and its count
    assert int(metrics(at)["Shown"].split(" of ")[0]) == shown_before - 1
    detailed = [c.value for c in at.caption if c.value.startswith("risk: ")]  # the next finding's, if any is left
    assert not any(text.endswith(f" id {rec_id}") for text in detailed), detailed
    listed = open_page(make_app(monkeypatch, writable_warehouse, AUTH, "lead@example.com"), "recommendations")
    assert rec_id not in set(listed.dataframe[0].value["id"])
    rows = query(
        writable_warehouse,
        "SELECT d.decision, d.reason, d.actor, r.status, r.team FROM decisions d "
        "JOIN recommendations r ON r.id = d.recommendation_id WHERE d.recommendation_id = ?",
        [rec_id],
    )
    assert rows == [("dismiss", "nightly batch, needed for the release", "lead@example.com", "dismissed", LEAD_TEAM)]


def detailed_id(at) -> str:
    """The id of the finding the Detail view shows (its caption ends with it)."""
    return next(c.value for c in at.caption if c.value.startswith("risk: ")).rsplit(" id ", 1)[1]


def test_no_decision_is_preselected(monkeypatch, writable_warehouse):
    at = open_page(make_app(monkeypatch, writable_warehouse, AUTH, "lead@example.com"), "recommendations", "Detail")
    assert at.radio(key="decision_choice").value is None  # not "Accept": a click records nothing unchosen
    at.button[0].click().run()
    assert any("Choose a decision" in e.value for e in at.error)
    assert query(writable_warehouse, "SELECT count(*) FROM decisions")[0][0] == 0


@pytest.mark.parametrize(
    ("budget", "word", "colour"), [(10_000_000, "under budget", "GREEN"), (1, "over budget", "RED")]
)
def test_a_budget_delta_reads_good_or_bad_by_colour_and_word_not_an_arrow(
    monkeypatch, demo_warehouse, budget, word, colour
):
    from streamlit.proto.Metric_pb2 import Metric

    at = open_page(make_app(monkeypatch, demo_warehouse, {"monthly_budget_usd": budget}), "overview")
    spend = next(m for m in at.metric if m.label == "Spend this month")
    assert spend.delta.endswith(word)
    assert Metric.MetricDirection.Name(spend.proto.direction) == "NONE"  # no arrow: "up" would read as growth
    assert Metric.MetricColor.Name(spend.proto.color) == colour


# --- concurrency -----------------------------------------------------------------------------------

INGEST_LOOP = """
import sys
from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
registry = Registry(); registry.register(FocusFiles)
for i in range(int(sys.argv[3])):
    result = run_source(registry, sys.argv[1], "focus", "focus_files", {"path": sys.argv[2]}, full_refresh=True)
    print("ingest", i, result.status, flush=True)
"""


def test_an_ingest_in_a_loop_and_the_dashboard_do_not_break_each_other(monkeypatch, writable_warehouse):
    loops = 12
    writer = subprocess.Popen(
        [sys.executable, "-c", INGEST_LOOP, str(writable_warehouse), str(FOCUS_SAMPLE), str(loops)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    renders = 0
    try:
        at = make_app(monkeypatch, writable_warehouse)
        at.run()
        while writer.poll() is None or renders < len(PAGES):
            page = PAGES[renders % len(PAGES)]
            at.switch_page(f"pages/{page}.py").run()
            assert not at.exception, (page, [e.value for e in at.exception])
            # the only error a page may show is Data health's: the demo's calendar ended weeks ago
            errors = [e.value for e in at.error if not (page == "health" and e.value.startswith("Stale data: "))]
            assert not errors, (page, errors)
            renders += 1
    finally:
        out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert out.count(" succeeded") == loops, out
    assert renders >= len(PAGES)
    ran = query(writable_warehouse, "SELECT count(*) FROM ingest_runs WHERE source = 'focus' AND status = 'succeeded'")
    assert ran[0][0] == loops


# --- access configuration ------------------------------------------------------------------------


BAD_SECTIONS = [
    ('auth = "ldap"', "dashboard.auth"),
    ('auth = "header"\n[[dashboard.users]]\nemail = "a@example.com"\nrole = "finance"', "dashboard.header"),
    ('auth = "oidc"', "dashboard.users"),
    ('auth = "oidc"\n[[dashboard.users]]\nemail = "a@example.com"\nrole = "admin"', "dashboard.users[0].role"),
    ('auth = "oidc"\n[[dashboard.users]]\nemail = "a@example.com"\nrole = "lead"', "dashboard.users[0].teams"),
    ('auth = "oidc"\n[[dashboard.users]]\nemail = "nobody"\nrole = "finance"', "dashboard.users[0].email"),
    ("monthly_budget_usd = -5", "dashboard.monthly_budget_usd"),
    ("colour = 'blue'", "dashboard.colour"),
]


@pytest.mark.parametrize(("section", "key"), BAD_SECTIONS)
def test_a_bad_dashboard_config_names_the_key(tmp_path, section, key):
    from gpufinops.jobs import config
    from gpufinops.jobs.config import ConfigError

    path = tmp_path / "gpufinops.toml"
    path.write_text(f"[dashboard]\n{section}\n")
    with pytest.raises(ConfigError, match=re.escape(key)):
        config.load(path, environ={})


@pytest.mark.parametrize(("section", "key"), BAD_SECTIONS)
def test_a_hand_started_dashboard_refuses_what_the_loader_refuses(tmp_path, section, key):
    """The JSON the Streamlit process reads is parsed by the section's own declarations: a section the
    loader refuses fails closed there too, with the same sentence."""
    import tomllib

    from gpufinops.dashboard import access
    from gpufinops.jobs import config
    from gpufinops.jobs.config import ConfigError

    path = tmp_path / "gpufinops.toml"
    path.write_text(f"[dashboard]\n{section}\n")
    with pytest.raises(ConfigError) as loaded:
        config.load(path, environ={})
    handed = json.dumps(tomllib.loads(path.read_text())["dashboard"])
    with pytest.raises(ValueError, match=re.escape(key)) as refused:
        access.settings_from_env({access.ENV_SETTINGS: handed})
    assert str(refused.value) == str(loaded.value)


def test_the_cli_hands_the_validated_section_to_streamlit(tmp_path, monkeypatch):
    from gpufinops.interfaces import dashboard_cmd
    from gpufinops.jobs import config
    from gpufinops.jobs.config import ConfigError

    path = tmp_path / "gpufinops.toml"
    path.write_text(
        '[dashboard]\nauth = "header"\nheader = "X-Forwarded-Email"\n'
        '[[dashboard.users]]\nemail = "lead@example.com"\nrole = "lead"\nteams = ["vision"]\n'
    )
    cfg = config.load(path, environ={})
    cmd, env, listen = dashboard_cmd.command(cfg, 8599, environ={})
    assert json.loads(env["GPUFINOPS_DASHBOARD"])["users"][0]["teams"] == ["vision"]
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1" == listen  # header mode: behind the proxy only
    with pytest.raises(ConfigError, match="loopback"):
        dashboard_cmd.command(cfg, 8599, host="0.0.0.0", environ={})


@pytest.mark.parametrize(
    "section, host, listen",
    [
        ("", None, "127.0.0.1"),  # no auth: this machine only
        ("", "0.0.0.0", "0.0.0.0"),  # asked for (and warned about)
        (
            'auth = "oidc"\n[[dashboard.users]]\nemail = "a@example.com"\nrole = "finance"\n',
            None,
            None,
        ),  # every interface
    ],
)
def test_the_dashboard_binds_loopback_unless_sign_in_is_configured(tmp_path, section, host, listen):
    from gpufinops.interfaces import dashboard_cmd
    from gpufinops.jobs import config

    path = tmp_path / "gpufinops.toml"
    path.write_text(f"[dashboard]\n{section}")
    cmd, _, chosen = dashboard_cmd.command(config.load(path, environ={}), 8599, host=host, environ={})
    assert chosen == listen
    assert ("--server.address" in cmd) == (listen is not None)


def test_identity_comes_only_from_the_configured_header():
    from gpufinops.dashboard import access

    settings = access.settings_from(
        {
            "auth": "header",
            "header": "X-Forwarded-Email",
            "users": [{"email": "Lead@Example.com", "role": "lead", "teams": ["vision"]}],
        }
    )
    email = access.identity(settings, headers={"X-Forwarded-Email": " lead@example.com "})
    assert access.scope_for(settings, email).teams == ("vision",)
    assert access.identity(settings, headers={"X-Forwarded-User": "lead@example.com"}) is None
    with pytest.raises(access.AccessDenied):
        access.scope_for(settings, None)
    with pytest.raises(access.AccessDenied):
        access.scope_for(settings, "someone@example.com")


def test_every_recommendation_kind_has_a_detail_view(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse), "recommendations", "Detail")
    at.multiselect(key="recs_status").set_value(["open", "accepted", "dismissed", "applied"]).run()
    options = at.selectbox(key="recs_detail").options
    with db.reader(demo_warehouse) as con:
        kinds = {labels.label(k, "kind") for k in queries.recommendations(con)["kind"]}  # by their labels
    shown = int(metrics(at)["Shown"].split(" of ")[0])
    assert len(options) == shown and {o.split(" · ")[1] for o in options} == kinds
    for option in options:
        at.selectbox(key="recs_detail").set_value(option).run()
        assert not at.exception, (option, [e.value for e in at.exception])
        assert at.subheader[0].value.startswith(option.split(" · ")[0])
        assert len(at.table) >= 2  # current → proposed, the evidence


def test_every_total_of_the_demo_is_the_same_number(monkeypatch, demo_warehouse, writable_warehouse, tmp_path, capsys):
    """One number for one thing: the demo summary, `recommend`, the dashboard, the weekly report, the
    API and the JSON export all give the savings of primary and step objects, each resource once."""
    import re

    from fastapi.testclient import TestClient

    from gpufinops.interfaces import cli
    from gpufinops.interfaces.api import create_app
    from gpufinops.jobs.config import load as load_config
    from gpufinops.jobs.report.figures import collect
    from gpufinops.jobs.report.weeks import week_of
    from gpufinops.models import plans
    from gpufinops.warehouse import recommendation_read
    from gpufinops.warehouse.scope import Scope

    def dollars(text: str) -> Decimal:
        return Decimal(text.replace(",", ""))

    printed = (demo_warehouse.parent.parent / "summary.txt").read_text()
    with db.reader(demo_warehouse) as con:  # the demo's own run, before anything else touched it
        as_demo_stored = plans.total(recommendation_read.load(con, status="open"))
    assert dollars(re.search(r"Savings: \$([\d,.]+)/month", printed).group(1)) == as_demo_stored
    assert cli.main(["--db", str(writable_warehouse), "recommend"]) == 0
    footer = re.search(r"total: \$([\d,.]+)/month", capsys.readouterr().out)
    figures = {"recommend": dollars(footer.group(1))}
    at = open_page(make_app(monkeypatch, writable_warehouse), "overview")
    figures["dashboard"] = dollars(metrics(at)["Savings identified per month"].lstrip("$"))
    with db.reader(writable_warehouse) as con:
        stored = recommendation_read.load(con, status="open")
        as_of = queries.latest_charge_day(con)
        report = collect(con, week_of(as_of), Scope("finance", actor="test"), "UTC")
    figures["weekly report"] = report.open_savings
    figures["export json"] = plans.total(stored)
    cfg_path = tmp_path / "gpufinops.toml"
    cfg_path.write_text(f'[warehouse]\npath = "{writable_warehouse}"\n')
    with TestClient(create_app(load_config(str(cfg_path), environ={}), insecure_demo=True, environ={})) as client:
        figures["api"] = Decimal(str(client.get("/v1/savings").json()["monthly_savings_usd"])).quantize(Decimal("0.01"))
    assert len(set(figures.values())) == 1, figures
    assert figures["recommend"] > 0
    alternatives = [r for r in stored if r["plan"] == "alternative"]
    assert figures["recommend"] == plans.total(r for r in stored if r["plan"] != "alternative")
    assert sum(Decimal(str(r["monthly_savings_usd"])) for r in stored) >= figures["recommend"]
    assert {r["plan"] for r in stored} <= {"primary", "step", "alternative"} and alternatives is not None


def test_onprem_page_shows_the_comparison_and_keep_verdicts_are_not_recommendations(monkeypatch, demo_warehouse):
    at = open_page(make_app(monkeypatch, demo_warehouse), "onprem")
    table = at.dataframe[0].value
    with db.reader(demo_warehouse) as con:
        facts = queries.onprem_comparison(con)
        recs = queries.recommendations(con)
    assert len(table) == facts.height > 0 and "keep on-prem" in set(table["verdict"])
    # keeping the cluster is a fact: never in the recommendation list, its counts or its exports
    assert recs.filter((recs["kind"] == "onprem_vs_cloud") & (recs["monthly_savings_usd"] == 0)).is_empty()


# --- the process -----------------------------------------------------------------------------------


def _start_dashboard(config: Path, tmp_path: Path):
    """`gpufinops dashboard` on a free loopback port, in its own session; (process, url) once healthy."""
    import socket
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "dashboard.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpufinops"), "--config", str(config), "dashboard", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, (tmp_path / "dashboard.log").read_text()
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                return proc, port
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the dashboard did not come up"
        time.sleep(0.3)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_the_streamlit_child_ends_with_gpufinops_dashboard(demo_warehouse, tmp_path, how):
    """A signal to `gpufinops dashboard` alone (not its process group) ends the Streamlit child too:
    SIGTERM / SIGINT are forwarded, and a SIGKILL (nothing can be forwarded) reaches it through
    PR_SET_PDEATHSIG. The port is free afterwards."""
    import signal
    import time

    import psutil

    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{demo_warehouse}"\n')
    proc, port = _start_dashboard(config, tmp_path)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert children, "streamlit runs as a child process"
    streamlit = children[0]
    assert "gpufinops.dashboard.server" in " ".join(streamlit.cmdline())
    assert streamlit.pid != proc.pid and os.getpgid(streamlit.pid) != os.getpgid(proc.pid)  # its own group
    os.kill(proc.pid, getattr(signal, how))
    proc.wait(timeout=30)
    gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline() for p in alive]
    deadline = time.monotonic() + 10
    while not _port_free(port):
        assert time.monotonic() < deadline, f"port {port} still held"
        time.sleep(0.2)


def test_the_server_compiles_every_page_before_its_first_reader():
    """The warm-up puts app.py and every page into Streamlit's own script cache (the same cache, keyed by
    the paths app.py names), so no page's first reader waits for its magic rewrite and compile."""
    from types import SimpleNamespace

    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    from gpufinops.dashboard import server

    cache = ScriptCache()
    server.warm_page_scripts(SimpleNamespace(_script_cache=cache))
    scripts = [APP, *sorted((APP.parent / "pages").glob("*.py"))]
    assert {Path(p).name for p in cache._cache} >= {"app.py", *(f"{page}.py" for page in PAGES)}
    for script in scripts:  # a later run finds the compiled code (the cache's fast path), not a recompile
        code = cache._cache[os.path.abspath(script)]
        assert code.co_filename == os.path.abspath(script)
        assert cache.get_bytecode(str(script)) is code
    server.warm_page_scripts(SimpleNamespace())  # a Streamlit without the cache: nothing to do, no error


def test_the_warm_up_reads_what_the_recommendations_and_team_pages_read(monkeypatch, demo_warehouse):
    """After the server's warm-up, the first render of the Recommendations page (its list, withheld findings,
    the finding it details by default, that resource's utilisation, its decisions) and of the Team page (its
    list) reads none of them from the warehouse again: the warm-up asks with the pages' own arguments."""
    import streamlit as st

    from gpufinops.dashboard import common, server

    st.cache_data.clear()
    names = (
        "recommendations",
        "withheld_findings",
        "dashboard_recommendation",
        "decisions_log",
        "resource_utilisation",
    )
    calls: list[str] = []
    for name in names:

        def counted(*args, _read=getattr(queries, name), _name=name, **kwargs):
            calls.append(_name)
            return _read(*args, **kwargs)

        monkeypatch.setattr(queries, name, counted)
    monkeypatch.setenv("GPUFINOPS_DB", str(demo_warehouse))
    with db.reader(demo_warehouse) as con:
        server.warm_pages(con)
    assert set(calls) == set(names), calls  # the demo's top finding has a resource and a utilisation series
    calls.clear()
    for page, view in (("recommendations", None), ("team", "Recommendations")):
        at = open_page(make_app(monkeypatch, demo_warehouse), page, view)
        assert at.dataframe, page
    assert calls == [], calls
    assert common.db_path() == demo_warehouse
