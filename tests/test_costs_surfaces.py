"""The same (metric, scope, window) gives the same number on every surface: October's GPU spend by team
on the 60-day demo read from `gpufinops costs` (table and JSON), `GET /v1/costs` (finance and a lead's token),
the MCP `costs` tool over stdio, and the dashboard's Overview (Streamlit AppTest: its spend-by-team
table and its KPI), checked against the older `GET /v1/costs/daily` rows summed over October's days;
and October's carbon per team from `carbon`, `GET /v1/carbon` and the MCP `carbon` tool."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from gpufinops.dashboard.common import money
from gpufinops.interfaces import cli
from tests.demo_cache import demo_copy
from tests.test_api import FINANCE, TOKENS, VISION, Served, make_config

pytest.importorskip("mcp", reason="the mcp extra (`.venv/bin/pip install -e '.[mcp]'`)")

from tests.mcp_fixture import FINANCE as FINANCE_ENV  # noqa: E402
from tests.mcp_fixture import call  # noqa: E402
from tests.test_mcp import over_stdio, stdio  # noqa: E402

MONTH = "2026-10"
ROW = re.compile(r"^(\S[^$]*?)\s+(-?\$[\d,]+\.\d\d)\s+[\d.]+%$")


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    """The demo as `gpufinops demo` builds it (60 days, 2026-09-02 to 2026-10-31): its warehouse. October
    is a whole month and the last 30 days are not it, so a page mixing the two windows shows."""
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=60)
    return home / "data" / "gpufinops.duckdb"


def config_path(warehouse: Path, tmp_path: Path) -> Path:
    """A config serving ``warehouse`` to the API tests' tokens (the API and the MCP server need them)."""
    make_config(tmp_path, warehouse)
    return tmp_path / "gpufinops.toml"


def from_cli(capsys, config: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """(team → money text from the table, the JSON answer)."""
    args = ["--config", str(config), "costs", "--by", "team", "--month", MONTH, "--cost", "gpu"]
    assert cli.main(args) == 0
    table = {m.group(1).strip(): m.group(2) for line in capsys.readouterr().out.splitlines() if (m := ROW.match(line))}
    assert cli.main([*args, "--format", "json"]) == 0
    return table, json.loads(capsys.readouterr().out)


def from_dashboard(monkeypatch, warehouse: Path) -> tuple[dict[str, str], str]:
    """(team → GPU spend text of the Overview's spend-by-team table, the GPU-spend KPI)."""
    from tests.test_dashboard import make_app, metrics, open_page

    at = open_page(make_app(monkeypatch, warehouse), "overview")
    table = next(d.value for d in at.dataframe if {"team", "gpu_cost"} <= set(d.value.columns))
    assert any(s.value == "Spend by team, October 2026" for s in at.subheader)
    return dict(zip(table["team"], table["gpu_cost"], strict=True)), metrics(at)["GPU spend this month"]


def from_mcp(config: Path, tool: str, arguments: dict[str, Any]) -> Any:
    async def work(session):
        return await call(session, tool, arguments)

    is_error, answer = anyio.run(over_stdio, stdio(config, FINANCE_ENV, env={FINANCE_ENV: TOKENS[FINANCE_ENV]}), work)
    assert not is_error, answer
    return answer


def test_october_gpu_spend_by_team_is_one_figure_on_every_surface(demo_home, tmp_path, capsys, monkeypatch):
    warehouse = demo_home
    config = config_path(warehouse, tmp_path)
    table, body = from_cli(capsys, config)
    figures = {r["team"]: r["cost_usd"] for r in body["rows"]}
    assert body["window"] == {"label": "October 2026", "from": "2026-10-01", "to": "2026-10-31"}
    assert len(figures) >= 5 and table == {
        **{t: money(v) for t, v in figures.items()},
        "Total": money(body["total_usd"]),
    }
    assert sum(figures.values()) == pytest.approx(body["total_usd"])
    from gpufinops.interfaces.api import create_app

    with Served(create_app(make_config(tmp_path, warehouse), environ=TOKENS)) as served:
        params = {"by": "team", "month": MONTH, "cost": "gpu"}
        api = httpx.get(f"{served.url}/v1/costs", params=params, headers=FINANCE).json()
        lead = httpx.get(f"{served.url}/v1/costs", params=params, headers=VISION).json()
        daily = httpx.get(
            f"{served.url}/v1/costs/daily", params={"from": "2026-10-01", "to": "2026-10-31"}, headers=FINANCE
        ).json()
    assert api == body
    assert lead["rows"] == [{"team": "vision", "cost_usd": figures["vision"], "share": 1.0}]
    summed: dict[str, Decimal] = {}
    for row in daily:  # the older endpoint's days, from the line items rather than the daily rollup
        key = row["team"] or "(unattributed)"
        summed[key] = summed.get(key, Decimal(0)) + Decimal(str(row["gpu_cost"] or 0))
    assert {t: round(float(v), 2) for t, v in summed.items() if v} == {t: round(v, 2) for t, v in figures.items()}
    mcp = from_mcp(config, "costs", {"by": "team", "month": MONTH, "cost": "gpu"})
    assert mcp == body
    shown, kpi = from_dashboard(monkeypatch, warehouse)
    assert shown == table and kpi == table["Total"]


def test_october_carbon_per_team_is_one_figure_on_every_surface(demo_home, tmp_path, capsys):
    warehouse = demo_home
    config = config_path(warehouse, tmp_path)
    assert (
        cli.main(["--config", str(config), "carbon", "--from", "2026-10-01", "--to", "2026-10-31", "--format", "json"])
        == 0
    )
    rows = {(r["month"], r["team"]): r["kg_co2e"] for r in json.loads(capsys.readouterr().out)}
    assert rows and {month for month, _ in rows} == {MONTH}
    from gpufinops.interfaces.api import create_app

    with Served(create_app(make_config(tmp_path, warehouse), environ=TOKENS)) as served:
        api = httpx.get(
            f"{served.url}/v1/carbon", params={"from": "2026-10-01", "to": "2026-10-31"}, headers=FINANCE
        ).json()
    assert {(r["month"], r["team"]): r["kg_co2e"] for r in api} == rows
    mcp = from_mcp(config, "carbon", {"start": "2026-10-01", "end": "2026-10-31"})
    assert {(r["month"], r["team"]): r["kg_co2e"] for r in mcp["rows"]} == pytest.approx(rows)


def page(monkeypatch, warehouse: Path, name: str, pick: tuple[str, str] | None = None, view: str | None = None):
    """Page ``name`` (its ``view``: dashboard/views.py), with a sidebar ``pick`` (widget key, option) made."""
    from tests.test_dashboard import make_app, open_page

    at = open_page(make_app(monkeypatch, warehouse), name, view)
    if pick is not None:
        at.selectbox(key=pick[0]).set_value(pick[1]).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def carbon_rows(at) -> dict[tuple[str, str], float]:
    frame = next(d.value for d in at.dataframe if {"month", "kg_co2e"} <= set(d.value.columns))
    return {(m, t): kg for m, t, kg in zip(frame["month"], frame["team"], frame["kg_co2e"], strict=True)}


def test_the_fleet_page_s_carbon_row_is_the_calendar_month_or_says_which_days(demo_home, tmp_path, capsys, monkeypatch):
    config = config_path(demo_home, tmp_path)
    assert (
        cli.main(["--config", str(config), "carbon", "--from", "2026-10-01", "--to", "2026-10-31", "--format", "json"])
        == 0
    )
    october = {r["team"]: r["kg_co2e"] for r in json.loads(capsys.readouterr().out)}
    at = page(monkeypatch, demo_home, "fleet", view="Energy and emissions")  # opens on the newest data's month
    assert any(c.value.startswith("Every figure on this page covers October 2026") for c in at.caption)
    shown = carbon_rows(at)
    assert {t: kg for (m, t), kg in shown.items()} == pytest.approx(october) and {m for m, _ in shown} == {MONTH}
    last30 = carbon_rows(
        page(monkeypatch, demo_home, "fleet", ("fleet_period", "Last 30 days"), "Energy and emissions")
    )
    assert {m for m, _ in last30} == {"2026-10 (02 – 31 Oct)"}  # not labelled as the whole month
    assert last30[("2026-10 (02 – 31 Oct)", "vision")] < october["vision"]


def test_the_team_page_s_kpis_and_tables_share_its_period(demo_home, monkeypatch):
    for pick, kpi in ((None, "this month"), (("team_period", "Last 30 days"), "in last 30 days")):
        at = page(monkeypatch, demo_home, "team", pick, "Shared GPUs")
        shared = next(d.value for d in at.dataframe if {"workload", "cost_usd"} <= set(d.value.columns))
        shown = {m.label: m.value for m in at.metric}
        assert shown[f"Shared GPUs: allocated {kpi}"] == money(Decimal(str(shared["cost_usd"].sum()))), pick


def test_the_unit_costs_page_starts_its_month_at_midnight(demo_home, tmp_path, capsys, monkeypatch):
    config = config_path(demo_home, tmp_path)
    at = page(monkeypatch, demo_home, "unit_costs")
    frame = at.dataframe[0].value
    first = frame[frame["day"] == frame["day"].min()]
    assert str(frame["day"].min())[:10] == "2026-10-01"
    args = ["--config", str(config), "unit-costs", "--from", "2026-10-01", "--to", "2026-10-01", "--format", "json"]
    assert cli.main(args) == 0
    whole_day = {r["model"]: r["usd_per_1m_output_tokens"] for r in json.loads(capsys.readouterr().out)}
    assert dict(zip(first["model"], first["usd_per_1m_output_tokens"], strict=True)) == pytest.approx(whole_day)


def test_october_unit_costs_per_month_are_one_figure_on_every_surface(demo_home, tmp_path, capsys):
    config = config_path(demo_home, tmp_path)
    window = ["--from", "2026-10-01", "--to", "2026-10-31"]
    assert cli.main(["--config", str(config), "unit-costs", "--period", "month", *window, "--format", "json"]) == 0
    rows = {r["model"]: r["usd_per_1m_output_tokens"] for r in json.loads(capsys.readouterr().out)}
    assert len(rows) >= 2
    from gpufinops.interfaces.api import create_app

    with Served(create_app(make_config(tmp_path, demo_home), environ=TOKENS)) as served:
        params = {"period": "month", "from": "2026-10-01", "to": "2026-10-31"}
        api = httpx.get(f"{served.url}/v1/unit-costs", params=params, headers=FINANCE).json()
    assert {r["model"]: r["usd_per_1m_output_tokens"] for r in api["rows"]} == pytest.approx(rows)
    assert [r["day"] for r in api["totals"]] == ["2026-10-01"]
    mcp = from_mcp(config, "unit_costs", {"period": "month", "start": "2026-10-01", "end": "2026-10-31"})
    assert {r["model"]: r["usd_per_1m_output_tokens"] for r in mcp["rows"]} == pytest.approx(rows)
    assert mcp["totals"] == api["totals"]


def test_another_month_on_the_overview_is_that_month_everywhere(demo_home, tmp_path, capsys, monkeypatch):
    config = config_path(demo_home, tmp_path)
    args = ["--config", str(config), "costs", "--month", "2026-09", "--cost", "gpu", "--format", "json"]
    assert cli.main(args) == 0
    september = json.loads(capsys.readouterr().out)
    at = page(monkeypatch, demo_home, "overview", ("overview_period", "September 2026"))
    shown = {m.label: m.value for m in at.metric}
    assert shown["GPU spend in September 2026"] == money(september["total_usd"])
    table = next(d.value for d in at.dataframe if {"team", "gpu_cost"} <= set(d.value.columns))
    assert dict(zip(table["team"], table["gpu_cost"], strict=True)) == {
        **{r["team"]: money(r["cost_usd"]) for r in september["rows"]},
        "Total": money(september["total_usd"]),
    }
    at = page(monkeypatch, demo_home, "overview", ("overview_period", "September 2026"), "Anomalies")
    anomalies = next((d.value for d in at.dataframe if "expected_range" in d.value.columns), None)
    assert anomalies is None or all(str(day)[:7] == "2026-09" for day in anomalies["day"])
