"""Unit costs: $ per 1M input / output tokens and per 1,000 requests, recomputed independently to the cent.

The fleet (tests/serving_fleet.py) has known counters, GPU cost and, in one test, energy; every expected
figure here is computed in the test from those inputs and the documented rules (docs/unit-costs.md), with
Python Decimals, never read back from the code under test. The CLI runs as a user runs it (a subprocess);
the API in-process through Starlette's TestClient with real tokens.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gpufinops.derived import serving_costs, unit_costs
from gpufinops.warehouse import db
from tests import serving_fleet as sf
from tests.test_api import API_TOML, TOKENS, make_config

CENT = Decimal("0.01")
DOCUMENTED = (Path(__file__).resolve().parents[1] / "docs" / "unit-costs.md").read_text()


def documented_columns() -> list[str]:
    """The CSV's columns as docs/unit-costs.md promises them to users, in order."""
    listed = re.search(r"The CSV and JSON columns are `([^`]+)`", " ".join(DOCUMENTED.split()))
    assert listed, "docs/unit-costs.md no longer lists the CSV columns"
    return [name.strip() for name in listed.group(1).split(",")]


def cents(value) -> Decimal:
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def expected(input_weight: Decimal = Decimal("0.25"), split: str = "compute") -> dict[str, dict[str, Decimal]]:
    """The rules worked by hand over the fleet's rows: per model, the three unit costs."""
    groups: dict[str, dict[str, Decimal]] = {}
    pods_on_l4 = sum(1 for r in sf.SERVING if r[5] == "node-b")
    for _hour, _server, model, _ns, _pod, host, i, o, r, p, d in sf.SERVING:
        cost = sf.H100_HOUR if host == "node-a" else sf.L4_HOUR / pods_on_l4  # allocated / whole resource split
        ii, oo = Decimal(str(i)), Decimal(str(o))
        if split == "compute" and p is not None and d is not None:
            share = Decimal(str(p)) / (Decimal(str(p)) + Decimal(str(d)))
        else:
            share = input_weight * ii / (input_weight * ii + oo)
        g = groups.setdefault(
            model, {"cost": Decimal(0), "in_cost": Decimal(0), "i": Decimal(0), "o": Decimal(0), "r": Decimal(0)}
        )
        g["cost"] += cost
        g["in_cost"] += cost * share
        g["i"] += ii
        g["o"] += oo
        g["r"] += Decimal(str(r))
    return {
        m: {
            "gpu_cost_usd": g["cost"],
            "usd_per_1m_input_tokens": g["in_cost"] * 10**6 / g["i"],
            "usd_per_1m_output_tokens": (g["cost"] - g["in_cost"]) * 10**6 / g["o"],
            "usd_per_1k_requests": g["cost"] * 1000 / g["r"],
        }
        for m, g in groups.items()
    }


@pytest.fixture
def fleet(warehouse):
    sf.warehouse_with_fleet(warehouse)
    return warehouse


def by_model(frame) -> dict[str, dict]:
    return {r["model"]: r for r in frame.to_dicts()}


@pytest.mark.parametrize("split", ["compute", "weight"])
def test_unit_costs_equal_an_independent_recomputation_to_the_cent(fleet, split):
    settings = unit_costs.UnitCostSettings(split=split)
    with db.reader(fleet) as con:
        got = by_model(unit_costs.unit_costs(con, settings=settings))
    want = expected(split=split)
    assert set(got) == set(want) == {"llama-3.1-8b", "mistral-7b"}
    for model, figures in want.items():
        for column, value in figures.items():
            assert cents(got[model][column]) == cents(value), (model, column, got[model][column], value)
    assert isinstance(got["llama-3.1-8b"]["gpu_cost_usd"], Decimal)  # money stays exact at the ledger
    assert got["llama-3.1-8b"]["gpu_cost_usd"] == Decimal("8.00")  # two allocated H100 hours
    assert got["mistral-7b"]["cost_basis"] == "whole_resource" and got["llama-3.1-8b"]["cost_basis"] == "allocation"
    assert (got["llama-3.1-8b"]["team"], got["mistral-7b"]["team"]) == ("search", "support")


def test_the_input_weight_moves_cost_between_input_and_output_never_the_total(fleet):
    with db.reader(fleet) as con:
        light = by_model(unit_costs.unit_costs(con, settings=unit_costs.UnitCostSettings("weight", 0.1)))
        heavy = by_model(unit_costs.unit_costs(con, settings=unit_costs.UnitCostSettings("weight", 1.0)))
    for model in light:
        assert light[model]["gpu_cost_usd"] == heavy[model]["gpu_cost_usd"]
        assert light[model]["usd_per_1m_input_tokens"] < heavy[model]["usd_per_1m_input_tokens"]
        assert light[model]["input_cost_usd"] + light[model]["output_cost_usd"] == light[model]["gpu_cost_usd"]
    want = expected(Decimal("1.0"), "weight")["mistral-7b"]["usd_per_1m_input_tokens"]
    assert cents(heavy["mistral-7b"]["usd_per_1m_input_tokens"]) == cents(want)


def test_groupings_sum_the_same_money(fleet):
    with db.reader(fleet) as con:
        frames = {by: unit_costs.unit_costs(con, by=by) for by in ("model", "team", "namespace")}
        scoped = unit_costs.unit_costs(con, team="support")
        one = unit_costs.unit_costs(con, model="llama-3.1-8b")
    totals = {by: sum(f["gpu_cost_usd"].to_list()) for by, f in frames.items()}
    assert totals == {"model": Decimal("10.00"), "team": Decimal("10.00"), "namespace": Decimal("10.00")}
    assert frames["team"]["namespace"].null_count() == frames["team"].height  # grouped by team only
    assert scoped["team"].to_list() == ["support"] and one["model"].to_list() == ["llama-3.1-8b"]


def test_kwh_and_co2e_come_from_carbon_hourly_and_say_why_when_no_power_was_measured(fleet):
    with db.reader(fleet) as con:
        before = unit_costs.unit_costs(con)
        assert unit_costs.carbon_note(con) == unit_costs.NO_CARBON
    assert before["kwh"].null_count() == before.height
    with db.writer(fleet) as con:  # derived/carbon.py's rows, set here: one per allocation row, or resource-hour
        con.execute("DELETE FROM carbon_hourly")
        con.execute(
            "INSERT INTO carbon_hourly BY NAME SELECT hour, resource_id, gpu_uuid, mig_instance, namespace, pod, "
            "team, 0.7 AS kwh, 0.28 AS kg_co2e, 'measured' AS energy_basis FROM gpu_allocation_hourly"
        )
        con.execute(
            "INSERT INTO carbon_hourly BY NAME SELECT CAST(? AS TIMESTAMPTZ) AS hour, 'i-l4' AS resource_id, "
            "'GPU-l4' AS gpu_uuid, 'support' AS team, 0.072 AS kwh, 0.03 AS kg_co2e, 'measured' AS energy_basis",
            [sf.START],
        )
        serving_costs.recompute_all(con)  # (carbon_hourly edited by hand: recomputed as a load's carbon step would)
    with db.reader(fleet) as con:
        got = by_model(unit_costs.unit_costs(con))
        assert unit_costs.carbon_note(con) is None
    assert round(got["llama-3.1-8b"]["kwh"], 6) == 1.4 and round(got["llama-3.1-8b"]["kg_co2e"], 6) == 0.56
    assert round(got["mistral-7b"]["kwh"], 6) == 0.072 and round(got["mistral-7b"]["kg_co2e"], 6) == 0.03


def test_settings_are_checked_naming_the_key():
    assert unit_costs.UnitCostSettings.from_config(None) == unit_costs.UnitCostSettings("compute", 0.25)
    for section, key in (
        ({"split": "tokens"}, "unit_costs.split"),
        ({"input_weight": -1}, "unit_costs.input_weight"),
        ({"input_weight": float("nan")}, "unit_costs.input_weight"),
        ({"input_weight": True}, "unit_costs.input_weight"),
        ({"ratio": 1}, "unit_costs.ratio"),
    ):
        with pytest.raises(ValueError, match=key.replace(".", r"\.")):
            unit_costs.UnitCostSettings.from_config(section)


def _cli(fleet, *args: str, capsys=None) -> subprocess.CompletedProcess:
    """``gpufinops --db … unit-costs ARGS``: in a subprocess, or in-process (the same ``main``) with ``capsys``."""
    argv = ["--db", str(fleet), "unit-costs", *args]
    if capsys is None:
        return subprocess.run(
            [sys.executable, "-m", "gpufinops.interfaces.cli", *argv], capture_output=True, text=True, timeout=120
        )
    from gpufinops.interfaces.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)


def test_the_cli_formats(fleet, tmp_path, capsys):
    table = _cli(fleet)  # once as a user runs it
    assert table.returncode == 0, table.stderr
    assert "llama-3.1-8b" in table.stdout and "no measured GPU power" in table.stderr
    cli = functools.partial(_cli, capsys=capsys)
    as_csv = cli(fleet, "--format", "csv", "--from", "2026-11-02", "--to", "2026-11-02")
    assert as_csv.returncode == 0, as_csv.stderr
    records = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert list(records[0]) == documented_columns()
    row = {r["model"]: r for r in records}["llama-3.1-8b"]
    assert (row["input_tokens"], row["requests"], cents(row["usd_per_1m_output_tokens"])) == (
        "4000000",
        "3000",
        Decimal("6.40"),
    )
    as_json = cli(fleet, "--format", "json", "--by", "team", "--out", str(tmp_path / "out" / "unit.json"))
    assert as_json.returncode == 0, as_json.stderr
    teams = {r["team"]: r for r in json.loads((tmp_path / "out" / "unit.json").read_text())}
    assert set(teams) == {"search", "support"} and teams["support"]["gpu_cost_usd"] == 2.0
    empty = cli(fleet, "--from", "2027-01-01")  # a window after the counters: says so, blames no source
    assert empty.returncode == 0 and "in this window: they cover 2026-11-02" in empty.stdout
    assert "source" not in empty.stdout
    misspelt = cli(fleet, "--model", "Mistral")  # which filter matched nothing, and the models there are
    assert misspelt.returncode == 0 and "no model named 'Mistral'" in misspelt.stdout
    assert "llama-3.1-8b" in misspelt.stdout and "source" not in misspelt.stdout
    for bad in (["--by", "pod"], ["--from", "2026-11-03", "--to", "2026-11-01"], ["--format", "xml"]):
        assert cli(fleet, *bad).returncode == 2


def test_the_api_keeps_each_token_to_its_scope(fleet, tmp_path):
    from gpufinops.interfaces.api import create_app

    lead = API_TOML.replace('teams = ["vision"]', 'teams = ["search"]')
    client = TestClient(create_app(make_config(tmp_path, fleet, lead), environ=TOKENS, read_retry_s=5))

    def get(token: str, **params) -> object:
        return client.get("/v1/unit-costs", params=params, headers={"Authorization": f"Bearer {TOKENS[token]}"})

    finance = get("GPUFINOPS_TOKEN_FINANCE")
    assert finance.status_code == 200
    body = finance.json()
    assert {r["team"] for r in body["rows"]} == {"search", "support"} and body["carbon_note"] == unit_costs.NO_CARBON
    seen = get("GPUFINOPS_TOKEN_VISION")  # the lead of "search"
    assert seen.status_code == 200 and {r["team"] for r in seen.json()["rows"]} == {"search"}
    assert {r["cost_basis_label"] for r in body["rows"]} == {"Allocated GPU share", "Whole resource"}
    assert get("GPUFINOPS_TOKEN_VISION", team="support").status_code == 403
    assert get("GPUFINOPS_TOKEN_SCHEDULER").status_code == 403
    assert get("GPUFINOPS_TOKEN_FINANCE", model="mistral-7b").json()["rows"][0]["usd_per_1k_requests"] == 2.0
    for params in (
        {"from": "2026-13-01"},
        {"to": "9999-12-31"},
        {"by": "pod"},
        {"from": "2026-11-03", "to": "2026-11-01"},
    ):
        assert get("GPUFINOPS_TOKEN_FINANCE", **params).status_code == 400
    assert client.get("/v1/unit-costs").status_code == 401


def test_the_dashboard_shows_unit_costs_on_its_page_and_the_team_page(monkeypatch, fleet):
    from tests.test_dashboard import make_app, open_page

    at = open_page(make_app(monkeypatch, fleet), "unit_costs")
    assert at.title[0].value == "Unit costs"
    shown = at.dataframe[0].value
    assert set(shown["model"]) == {"llama-3.1-8b", "mistral-7b"}
    assert round(float(shown[shown["model"] == "llama-3.1-8b"]["usd_per_1m_output_tokens"].iloc[0]), 2) == 6.40
    assert any("no measured GPU power" in c.value for c in at.caption)
    lead = make_app(
        monkeypatch,
        fleet,
        {"auth": "oidc", "users": [{"email": "l@example.com", "role": "lead", "teams": ["support"]}]},
        email="l@example.com",
    )
    scoped = open_page(lead, "unit_costs").dataframe[0].value
    assert set(scoped["team"]) == {"support"}


def test_the_weekly_report_shows_each_scope_its_unit_costs(fleet):
    from gpufinops.jobs.report.render import render
    from gpufinops.jobs.report.weeks import parse_week
    from gpufinops.warehouse.scope import Scope

    week = parse_week("2026-W45")  # the week of the fleet's Monday
    with db.reader(fleet) as con:
        finance = render(con, week, Scope("finance"))
        lead = render(con, week, Scope("lead", ("support",)))
    assert "Unit costs of serving" in finance.html and "Unit costs of serving" in finance.text
    assert "$0.80 per 1M input, $6.40 per 1M output, $2.67 per 1,000 requests" in finance.html
    assert "llama-3.1-8b" in finance.text and "mistral-7b" in finance.text
    assert "llama-3.1-8b" not in lead.html and "llama-3.1-8b" not in lead.text and "mistral-7b" in lead.text


def test_a_gpu_type_move_shows_its_effect_in_dollars_per_million_tokens(fleet):
    from gpufinops.models import token_costs
    from gpufinops.models.recommendation import Recommendation
    from tests.feed_fleet import Subject, _rec

    def finding(kind: str, resource: str) -> Recommendation:
        """A finding halving the monthly cost of ``resource``, search's, over a one-day window."""
        halved = ({"monthly_cost_usd": 2920.0}, {"monthly_cost_usd": 1460.0}, "1460")
        return _rec(kind, Subject("search", "aws", resource, None), *halved, {"window_days": 1})

    recs = [
        finding("gpu_type", "i-h100"),
        finding("quantization", "i-l4"),
        finding("idle_gpu", "i-h100"),
        finding("gpu_type", "i-none"),
    ]
    with db.reader(fleet) as con:
        token_costs.annotate(con, recs)
    tokens_h100 = Decimal(4_000_000 + 750_000) * Decimal("30.4375")  # one day's tokens, per month
    assert recs[0].evidence["served_tokens_per_month"] == int(tokens_h100)
    assert cents(recs[0].evidence["usd_per_1m_tokens_current"]) == cents(Decimal(2920) * 10**6 / tokens_h100)
    assert cents(recs[0].evidence["usd_per_1m_tokens_proposed"]) == cents(Decimal(1460) * 10**6 / tokens_h100)
    tokens_l4 = Decimal(800_000 + 400_000) * Decimal("30.4375")
    assert cents(recs[1].evidence["usd_per_1m_tokens_saved"]) == cents(Decimal(1460) * 10**6 / tokens_l4)
    assert "usd_per_1m_tokens_current" not in recs[2].evidence  # not a move of GPU type or precision
    assert "usd_per_1m_tokens_current" not in recs[3].evidence  # serves no tokens


def test_a_month_the_window_cuts_is_labelled_with_its_days(fleet, capsys):
    """`unit-costs --period month` names the month, and where --from/--to cut it the days it covers: a row
    of 2026-11-02 alone is not November's unit cost."""
    cut = _cli(fleet, "--period", "month", "--by", "team", "--from", "2026-11-02", "--to", "2026-11-02", capsys=capsys)
    assert cut.returncode == 0, cut.stderr
    assert "2026-11 (02 Nov only)" in cut.stdout and "2026-11-01" not in cut.stdout, cut.stdout
    whole = _cli(fleet, "--period", "month", "--by", "team", capsys=capsys)
    assert "2026-11 " in whole.stdout and "2026-11 (" not in whole.stdout, whole.stdout
