"""The same (metric, scope, window) gives the same number on every surface: October's GPU spend by team
on the demo read from `gpufinops costs` (table and JSON), `GET /v1/costs` (finance and a lead's token),
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
    """The demo (14 days, ending 2026-10-31): its warehouse."""
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14)
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
