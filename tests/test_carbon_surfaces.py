"""`gpufinops carbon` and `GET /v1/carbon`: the one read model, scoped, in table, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest

from gpufinops.interfaces import carbon_cmd, cli
from gpufinops.warehouse import db
from gpufinops.warehouse.queries import carbon as carbon_queries
from tests.carbon_fleet import build
from tests.test_api import FINANCE, SCHEDULER, TOKENS, VISION, Served, make_config


@pytest.fixture
def carbon_warehouse(tmp_path):
    path = tmp_path / "wh" / "gpufinops.duckdb"
    with db.writer(path) as con:
        build(con)
    return path


def test_the_cli_choices_are_the_read_models():
    assert carbon_cmd.BY == carbon_queries.BY


def test_carbon_cli_formats(carbon_warehouse, capsys):
    assert cli.main(["--db", str(carbon_warehouse), "carbon", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    with db.reader(carbon_warehouse) as con:
        [(total,)] = con.execute("SELECT sum(kg_co2e) FROM carbon_hourly").fetchall()
    assert sum(r["kg_co2e"] or 0 for r in rows) == pytest.approx(total)
    assert {r["team"] for r in rows} == {"ml", "vision"}
    ml = next(r for r in rows if r["team"] == "ml")
    assert ml["withheld_gpu_hours"] == 8  # i-dark: billed, never measured
    assert cli.main(["--db", str(carbon_warehouse), "carbon", "--by", "resource", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["resource_id"] for r in table} == {"i-aws", "i-gcp", "i-dark", "i-noregion"}
    assert cli.main(["--db", str(carbon_warehouse), "carbon", "--by", "month"]) == 0
    text = capsys.readouterr().out
    assert "2026-11" in text and "withheld, not estimated" in text and "eGRID2023" in text
    assert cli.main(["--db", str(carbon_warehouse), "carbon", "--from", "2026-11-03", "--to", "2026-11-02"]) == 2


def test_carbon_api_is_scoped(tmp_path, carbon_warehouse):
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, carbon_warehouse)
    with Served(create_app(cfg, environ=TOKENS)) as served:
        url = served.url
        everyone = httpx.get(f"{url}/v1/carbon", headers=FINANCE).json()
        assert {r["team"] for r in everyone} == {"ml", "vision"}
        lead = httpx.get(f"{url}/v1/carbon", params={"by": "resource"}, headers=VISION).json()
        assert {r["team"] for r in lead} == {"vision"} and all(r["kg_co2e"] > 0 for r in lead)
        assert httpx.get(f"{url}/v1/carbon", params={"team": "ml"}, headers=VISION).status_code == 403
        assert httpx.get(f"{url}/v1/carbon", headers=SCHEDULER).status_code == 403
        assert httpx.get(f"{url}/v1/carbon", params={"by": "x"}, headers=FINANCE).status_code == 400
        one = httpx.get(f"{url}/v1/carbon", params={"from": "2026-11-02", "to": "2026-11-02"}, headers=FINANCE)
        assert one.status_code == 200 and one.json()
        none = httpx.get(f"{url}/v1/carbon", params={"from": "2026-12-01"}, headers=FINANCE).json()
        assert none == []


@pytest.mark.parametrize(
    "page, heading", [("team", "Energy and emissions"), ("fleet", "Energy and emissions per team")]
)
def test_dashboard_pages_show_energy_and_emissions(monkeypatch, carbon_warehouse, page, heading):
    from tests.test_dashboard import make_app, open_page

    at = open_page(make_app(monkeypatch, carbon_warehouse), page, "Energy and emissions")  # the page's view of them
    assert heading in [s.value for s in at.subheader]
    shown = {m.label: m.value for m in at.metric}
    assert shown["Emissions"].endswith("kg CO₂e") and shown["GPU-hours withheld"] == "8"
    assert any("withheld, not estimated" in c.value for c in at.caption)


def test_weekly_report_shows_energy_and_emissions_per_team_in_scope(carbon_warehouse):
    from gpufinops.jobs.report.render import render
    from gpufinops.jobs.report.weeks import parse_week
    from gpufinops.warehouse.scope import Scope

    week = parse_week("2026-W45")
    with db.reader(carbon_warehouse) as con:
        everyone = render(con, week, Scope("finance"))
        lead = render(con, week, Scope("lead", ("vision",)))
        [(total,)] = con.execute("SELECT sum(kg_co2e) FROM carbon_hourly").fetchall()
    assert sum(c["kg_co2e"] or 0 for c in everyone.figures.carbon) == pytest.approx(total)
    assert "Energy and emissions" in everyone.html and "Energy and emissions" in everyone.text
    assert "withheld" in everyone.text and everyone.figures.carbon_withheld_gpu_hours == 8
    assert [c["team"] for c in lead.figures.carbon] == ["vision"]


def test_a_period_the_window_cuts_is_labelled_with_the_days_it_covers(carbon_warehouse, capsys, tmp_path):
    """--from/--to inside a month (or a week): the row says which of its days it covers, in the table, the
    JSON and the API; a window that holds the whole period leaves its label alone."""
    from gpufinops.interfaces.api import create_app

    def table(*args: str) -> str:
        assert cli.main(["--db", str(carbon_warehouse), "carbon", "--by", "month", *args]) == 0
        return capsys.readouterr().out

    assert "2026-11 (02 – 03 Nov)" in table("--from", "2026-11-02", "--to", "2026-11-03")
    assert "2026-11 (01 – 02 Nov)" in table("--to", "2026-11-02")
    whole = table("--from", "2026-11-01", "--to", "2026-11-30")
    assert "2026-11 " in whole and "2026-11 (" not in whole
    assert "2026-11-02 (02 Nov only)" in table("--period", "week", "--from", "2026-10-30", "--to", "2026-11-02")
    assert cli.main(["--db", str(carbon_warehouse), "carbon", "--from", "2026-11-02", "--format", "json"]) == 0
    assert {r["period_label"] for r in json.loads(capsys.readouterr().out)} == {"2026-11 (02 – 30 Nov)"}
    cfg = make_config(tmp_path, carbon_warehouse)
    with Served(create_app(cfg, environ=TOKENS)) as served:
        rows = httpx.get(f"{served.url}/v1/carbon", params={"to": "2026-11-05"}, headers=FINANCE).json()
    assert {r["period_label"] for r in rows} == {"2026-11 (01 – 05 Nov)"}
