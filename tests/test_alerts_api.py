"""`GET /v1/alerts` over real HTTP on loopback: scoped like the costs (finance every alert, a lead its
teams' only, a scheduler none), filters validated, ETag / 304; and the dashboard's Overview and Team
pages show the open alerts the viewer may see (Streamlit AppTest)."""

from __future__ import annotations

from datetime import date

import httpx
import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.alerts import run as alerts_run
from tests.alert_fleet import add_spend, at, write_config
from tests.test_api import API_TOML, TOKENS, Served
from tests.test_dashboard import make_app, open_page
from tests.toml_config import budget

BUDGETS = "\n".join([budget("vision-gpu", 10000, ["vision"]), budget("nlp", 5000, ["nlp"]), budget("fleet", 20000)])


@pytest.fixture(scope="module")
def alerted(tmp_path_factory) -> config_mod.Config:
    """Open alerts of vision (77 % of its budget), nlp (over budget) and the whole fleet (over 50 %)."""
    tmp_path = tmp_path_factory.mktemp("alerts")
    config = write_config(tmp_path, budgets=BUDGETS, alerts="email = false")
    cfg = config_mod.load(config)
    add_spend(cfg.warehouse_path, "vision", date(2026, 10, 1), 14, 550.0, source="v")
    add_spend(cfg.warehouse_path, "nlp", date(2026, 10, 1), 14, 400.0, source="n")
    assert alerts_run.run(cfg, now=at(date(2026, 10, 15))).ok
    return cfg


@pytest.fixture
def api(tmp_path, alerted):
    from gpufinops.interfaces.api import create_app

    path = tmp_path / "api.toml"
    path.write_text(f'[warehouse]\npath = "{alerted.warehouse_path}"\n{API_TOML}')
    with Served(create_app(config_mod.load(path, environ={}), environ=TOKENS)) as served:
        yield served.url


def auth(env: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[env]}"}


def test_alerts_are_scoped_like_costs(api):
    finance = httpx.get(f"{api}/v1/alerts", headers=auth("GPUFINOPS_TOKEN_FINANCE"))
    assert finance.status_code == 200
    assert {a["scope"] for a in finance.json()} == {"vision-gpu", "nlp", "fleet"}
    lead = httpx.get(f"{api}/v1/alerts", headers=auth("GPUFINOPS_TOKEN_VISION")).json()
    assert lead and {a["scope"] for a in lead} == {"vision-gpu"} and all(a["teams"] == ["vision"] for a in lead)
    assert [a["threshold"] for a in lead] == ["0.75", "0.5"]  # the worse first
    assert (
        httpx.get(f"{api}/v1/alerts", params={"team": "nlp"}, headers=auth("GPUFINOPS_TOKEN_VISION")).status_code == 403
    )
    assert httpx.get(f"{api}/v1/alerts", headers=auth("GPUFINOPS_TOKEN_SCHEDULER")).status_code == 403
    assert httpx.get(f"{api}/v1/alerts").status_code == 401
    nlp = httpx.get(f"{api}/v1/alerts", params={"team": "nlp"}, headers=auth("GPUFINOPS_TOKEN_FINANCE")).json()
    assert {a["scope"] for a in nlp} == {"nlp"} and nlp[0]["severity"] == "critical"


def test_alert_objects_filters_and_etag(api):
    finance = auth("GPUFINOPS_TOKEN_FINANCE")
    first = httpx.get(f"{api}/v1/alerts", params={"rule": "budget"}, headers=finance)
    obj = first.json()[0]
    assert obj["rule_label"] == "Budget" and obj["severity_label"] in ("Info", "Warning", "Critical")
    assert [k for k in obj if not k.endswith("_label")] == [
        "id",
        "rule",
        "scope",
        "period",
        "threshold",
        "severity",
        "status",
        "teams",
        "title",
        "summary",
        "value_usd",
        "limit_usd",
        "details",
        "resolution",
        "opened_at",
        "evaluated_at",
        "closed_at",
    ]
    assert isinstance(obj["value_usd"], float) and obj["opened_at"].endswith("Z") and obj["details"]["budget"]
    again = httpx.get(
        f"{api}/v1/alerts", params={"rule": "budget"}, headers={**finance, "If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
    assert httpx.get(f"{api}/v1/alerts", params={"status": "resolved"}, headers=finance).json() == []
    assert httpx.get(f"{api}/v1/alerts", params={"status": "gone"}, headers=finance).status_code == 400
    assert httpx.get(f"{api}/v1/alerts", params={"rule": "weather"}, headers=finance).status_code == 400


def _app(monkeypatch, cfg: config_mod.Config, email: str):
    section = {
        "auth": "oidc",
        "users": [
            {"email": "cfo@example.com", "role": "finance"},
            {"email": "lead@example.com", "role": "lead", "teams": ["vision"]},
        ],
        "budgets": [b.to_dict() for b in cfg.alerts.settings.budgets],
    }
    return make_app(monkeypatch, cfg.warehouse_path, section, email)


def _shown_alerts(at) -> list[str]:
    frames = [d.value for d in at.dataframe if "summary" in d.value.columns and "rule" in d.value.columns]
    return [t for f in frames for t in f["title"].to_list()]


def test_the_overview_and_team_pages_show_the_open_alerts_in_scope(monkeypatch, alerted):
    finance = open_page(_app(monkeypatch, alerted, "cfo@example.com"), "overview")  # the KPIs and the alerts line
    titles = _shown_alerts(open_page(_app(monkeypatch, alerted, "cfo@example.com"), "overview", "Alerts"))
    assert (
        any("fleet" in t for t in titles) and any("nlp" in t for t in titles) and any("vision-gpu" in t for t in titles)
    )
    assert any("open alert(s)" in w.value for w in finance.warning)
    assert next(m.delta for m in finance.metric if m.label == "Spend this month").endswith(" under budget")
    assert any(c.value == "budget $20,000.00" for c in finance.caption)  # the budget in its caption: never cut off
    lead = open_page(_app(monkeypatch, alerted, "lead@example.com"), "overview")
    listed = _shown_alerts(open_page(_app(monkeypatch, alerted, "lead@example.com"), "overview", "Alerts"))
    assert listed and all("vision-gpu" in t for t in listed)
    assert next(m.delta for m in lead.metric if m.label == "Spend this month").endswith(" under budget")
    assert any(c.value == "budget $10,000.00" for c in lead.caption)  # the budget in its caption: never cut off
    team = open_page(_app(monkeypatch, alerted, "cfo@example.com"), "team", "Alerts")
    assert team.subheader and any(s.value.startswith("Open alerts of") for s in team.subheader)
    assert _shown_alerts(team) and all(t.startswith("Budget nlp") for t in _shown_alerts(team))  # the first team
