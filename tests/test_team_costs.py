"""Team views read allocated cost for shared GPUs: one function (warehouse/allocation_queries.py) that the
dashboard's Team page, the weekly report, the API's ``/v1/costs/daily`` and the cost forecast all call.

The fleet is tests/test_allocation_order.py's, loaded through its ingestors: node-a (8 GPUs, tagged
``platform``, $32/h) shared by pods of vision, nlp and a notebook; node-b (1 GPU, ``research``, $2/h) with
two time-sliced processes. Expected team totals are worked out here from those facts.
"""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from gpufinops.warehouse import allocation_queries, db
from gpufinops.warehouse.scope import Scope
from tests.test_allocation_order import HOURS, play
from tests.test_api import Served, make_config
from tests.test_dashboard import make_app, metrics, open_page

NEAR = {"abs": Decimal("1e-12")}
PER_GPU_HOUR = Decimal(32) / 8
# vision: GPU 0 for 200 of 240 minutes; nlp: GPU 1 (two pods); platform: the rest of node-a (incl. the notebook,
# whose namespace has no rule) ; research: node-b
EXPECTED = {"vision": PER_GPU_HOUR * HOURS * 200 / 240, "nlp": PER_GPU_HOUR * HOURS, "research": Decimal(2) * HOURS}
EXPECTED["platform"] = Decimal(32) * HOURS - EXPECTED["vision"] - EXPECTED["nlp"]


@pytest.fixture(scope="module")
def shared_warehouse(tmp_path_factory):
    return play(tmp_path_factory.mktemp("shared"), ["bill", "dcgm", "smi"])


def test_a_team_total_includes_its_share_of_shared_nodes_and_nothing_is_lost(shared_warehouse):
    with db.reader(shared_warehouse) as con:
        daily = allocation_queries.team_spend_daily(con)
        by_report = allocation_queries.report_team_spend_daily(con, tz="Europe/Berlin")
    totals = {t: daily.filter(daily["team"] == t)["effective_cost"].sum() for t in daily["team"].unique()}
    assert set(totals) == set(EXPECTED)
    for team, expected in EXPECTED.items():
        assert totals[team] == pytest.approx(expected, **NEAR), team
    assert sum(daily["effective_cost"]) == sum(daily["tagged_cost"]) == Decimal(34) * HOURS  # conserved exactly
    unallocated = daily.filter(daily["team"] == "platform")["unallocated_gpu_cost"].sum()
    assert unallocated == pytest.approx(PER_GPU_HOUR * HOURS * (Decimal(40) / 240 + Decimal(4) / 7 + 1 + 4), **NEAR)
    assert sum(by_report["effective_cost"]) == sum(daily["effective_cost"])  # another day boundary, same money


def test_the_api_reports_allocated_and_unallocated_fields(shared_warehouse, tmp_path):
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, shared_warehouse, "")
    with Served(create_app(cfg, insecure_demo=True)) as served:
        rows = httpx.get(f"{served.url}/v1/costs/daily").json()
        vision = httpx.get(f"{served.url}/v1/costs/daily", params={"team": "vision"}).json()
    assert {
        "day",
        "provider",
        "team",
        "service",
        "billed_cost",
        "effective_cost",
        "gpu_cost",
        "allocated_gpu_cost",
        "unallocated_gpu_cost",
        "tagged_cost",
    } <= set(rows[0])
    assert sum(r["effective_cost"] for r in rows) == pytest.approx(34 * HOURS)
    assert sum(r["unallocated_gpu_cost"] for r in rows) > 0
    (row,) = vision
    assert row["effective_cost"] == pytest.approx(float(EXPECTED["vision"]))
    assert row["allocated_gpu_cost"] == row["effective_cost"] and row["billed_cost"] == 0  # no line tags it


def test_the_team_page_shows_allocated_and_unallocated_cost(monkeypatch, shared_warehouse):
    at = open_page(make_app(monkeypatch, shared_warehouse), "team", "Shared GPUs")
    at.selectbox(key="team_pick").set_value("vision").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert shown["Spend this month"] == f"${float(EXPECTED['vision']):,.2f}"
    assert shown["Shared GPUs: allocated this month"] == f"${float(EXPECTED['vision']):,.2f}"
    tables = [t.value for t in at.dataframe]
    shared = next(t for t in tables if "workload" in t.columns)
    assert list(shared["workload"]) == ["train-0"] and list(shared["basis"]) == ["Whole GPU"]
    at.selectbox(key="team_pick").set_value("platform").run()
    shown = metrics(at)
    nodes = next(t.value for t in at.dataframe if "unallocated_cost" in t.value.columns)
    assert list(nodes["resource_id"]) == ["i-0aaa"]
    assert shown["Shared GPUs: unallocated this month"] == f"${float(nodes['unallocated_cost'].sum()):,.2f}"


def test_the_finance_overview_and_a_lead_see_their_share(monkeypatch, shared_warehouse):
    settings = {
        "auth": "oidc",
        "users": [
            {"email": "cfo@example.com", "role": "finance"},
            {"email": "lead@example.com", "role": "lead", "teams": ["nlp"]},
        ],
    }
    finance = metrics(open_page(make_app(monkeypatch, shared_warehouse, settings, "cfo@example.com"), "overview"))
    assert finance["Spend this month"] == f"${34 * HOURS:,.2f}"
    lead = metrics(open_page(make_app(monkeypatch, shared_warehouse, settings, "lead@example.com"), "overview"))
    assert lead["Spend this month"] == f"${float(EXPECTED['nlp']):,.2f}"  # a team with no tagged line at all


def test_the_weekly_report_shows_allocated_and_unallocated(shared_warehouse):
    from gpufinops.jobs.report.render import render
    from gpufinops.jobs.report.weeks import parse_week

    with db.reader(shared_warehouse) as con:
        report = render(con, parse_week("2026-W45"), Scope("finance", None, "cfo"))
        lead = render(con, parse_week("2026-W45"), Scope("lead", ("vision",), "lead"))
    lines = {t.team: t for t in report.figures.teams}
    assert lines["vision"].spend == pytest.approx(EXPECTED["vision"], **NEAR)
    assert lines["vision"].allocated_gpu == lines["vision"].spend
    assert lines["platform"].unallocated_gpu == report.figures.unallocated_gpu > 0
    assert "Unallocated GPU capacity" in report.html and "Shared GPU allocated" in report.html
    assert "Unallocated GPU capacity" in report.text
    assert [t.team for t in lead.figures.teams] == ["vision"] and lead.figures.spend == pytest.approx(
        EXPECTED["vision"], **NEAR
    )
