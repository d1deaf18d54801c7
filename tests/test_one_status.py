"""One status and one total on every surface after decisions (real DuckDB, the API over loopback).

The demo fleet is built once; one finding is dismissed and another accepted through the HTTP API, a
third marked applied through the store (what the dashboard's "Mark applied" calls). Then every surface
is read: every `recommend --format`, every `export` format, the API, the weekly report, the dashboard
and a re-run of the demo. Each must show every finding with its stored status and latest decision, and
give the same total, which leaves the dismissed and applied findings out. The surfaces' formats are
read from their registries (the parser's choices, ``jobs.export.FORMATS``): a new format is read by the
reader of its shape (JSON objects, flat CSV, a table, a scheduler YAML) without a new test.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gpufinops.interfaces import cli
from gpufinops.models import plans
from gpufinops.warehouse import db, recommendation_store
from tests.demo_cache import demo_copy
from tests.test_api import Served
from tests.test_dashboard import make_app, metrics, open_page

DECIDED_OUT = ("dismissed", "applied")


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14)
    return home


def dollars(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def printed_dollars(pattern: str, text: str) -> Decimal:
    """The amount the first group of ``pattern`` captures in ``text`` (the test fails when it is absent)."""
    found = re.search(pattern, text, re.M)
    assert found, (pattern, text[-2000:])
    return dollars(found.group(1))


def recommend_formats() -> tuple[str, ...]:
    """`recommend --format`'s choices, as the parser declares them."""
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    fmt = next(a for a in sub.choices["recommend"]._actions if "--format" in a.option_strings)
    return tuple(fmt.choices or ())


def states_of(objs) -> dict[str, tuple[str, str | None]]:
    """id -> (status, decision) of JSON objects (decision an object) or flat rows (decision a code)."""
    out = {}
    for o in objs:
        decision = o.get("decision")
        if isinstance(decision, dict):
            decision = decision["decision"]
        out[o["id"]] = (o["status"], decision or None)
    return out


def read_printed(text: str, store_states: dict) -> tuple[Decimal, dict]:
    """A printed output's total and the states it shows, by its shape."""
    stripped = text.strip()
    if stripped.startswith("["):  # JSON objects
        objs = json.loads(stripped)
        return plans.total(objs), states_of(objs)
    if stripped.startswith("id,"):  # flat CSV
        rows = list(csv.DictReader(io.StringIO(text)))
        return plans.total(rows), states_of(rows)
    if stripped.startswith("#"):  # a scheduler's YAML under its header: carries only what the total counts
        total = printed_dollars(r"plan total: \$([\d,.]+)/month", text)
        carried = {rid for rid in store_states if rid in text}
        return total, {rid: store_states[rid] for rid in carried}
    # a table: the total line, and the row of each finding (its id and status on the row's first line)
    total = printed_dollars(r"^total: \$([\d,.]+)/month", text)
    shown = {}
    for line in text.splitlines():
        for rid, (_status, decision) in store_states.items():
            if rid in line:
                found = [s for s in ("open", "accepted", "dismissed", "applied") if f" {s} " in f" {line} "]
                shown[rid] = (found[0] if found else None, decision)
    return total, shown


def test_every_surface_shows_the_stored_status_and_one_total(demo_home, monkeypatch, capsys, tmp_path):
    from gpufinops.interfaces.api import create_app
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs import demo
    from gpufinops.jobs import export as export_mod
    from gpufinops.jobs.report.figures import collect
    from gpufinops.jobs.report.weeks import week_of
    from gpufinops.warehouse import queries, recommendation_read
    from gpufinops.warehouse.scope import Scope

    config = str(demo_home / "gpufinops.toml")
    warehouse = demo_home / "data" / "gpufinops.duckdb"
    monkeypatch.setenv("COLUMNS", "400")  # every table column, the ids included
    with db.reader(warehouse) as con:
        before = recommendation_read.load(con)
    total_before = plans.total(before)
    primaries = [o for o in before if o["plan"] == "primary" and o["monthly_savings_usd"] > 0]
    assert len(primaries) >= 3, "the demo must find at least three plans"
    dismissed, accepted, applied = primaries[0], primaries[1], primaries[2]

    cfg = config_mod.load(config, environ={})
    with Served(create_app(cfg, insecure_demo=True, environ={})) as api:
        for rec, decision in ((dismissed, "dismiss"), (accepted, "accept")):
            answer = httpx.post(
                f"{api.url}/v1/recommendations/{rec['id']}/decision",
                json={"decision": decision, "reason": f"test: {decision}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["decision"]["decision"] == decision and answer.json()["decision"]["reason"]
        with db.writer(warehouse) as con:  # the dashboard's "Mark applied" (the API offers accept / dismiss)
            recommendation_store.record_decision(con, applied["id"], "apply", "done", "test")

        with db.reader(warehouse) as con:
            stored = recommendation_read.load(con)
        truth = states_of(stored)
        assert truth[dismissed["id"]] == ("dismissed", "dismiss")
        assert truth[accepted["id"]] == ("accepted", "accept")
        assert truth[applied["id"]] == ("applied", "apply")
        expected = plans.total(stored)
        left_out = plans.left_out(stored)
        assert {o["id"] for o in left_out} >= {dismissed["id"], applied["id"]}
        gone = sum((Decimal(str(r["monthly_savings_usd"])) for r in (dismissed, applied)), Decimal(0))
        assert expected == total_before - gone
        assert expected < total_before

        totals: dict[str, Decimal] = {}
        shown: dict[str, dict] = {}
        api_objs = httpx.get(f"{api.url}/v1/recommendations", timeout=30).json()
        savings = httpx.get(f"{api.url}/v1/savings", timeout=30).json()
        totals["api /v1/savings"] = Decimal(str(savings["monthly_savings_usd"])).quantize(Decimal("0.01"))
        assert savings["left_out_by_decision"] == len(left_out)
        totals["api /v1/recommendations"], shown["api"] = plans.total(api_objs), states_of(api_objs)

    for fmt in recommend_formats():  # each run re-runs the models: the decisions must survive them
        capsys.readouterr()
        assert cli.main(["--config", config, "recommend", "--format", fmt]) == 0
        text = capsys.readouterr().out
        totals[f"recommend {fmt}"], shown[f"recommend {fmt}"] = read_printed(text, truth)
        if fmt == "table":
            line = re.search(r"left out of the total because of decisions: (\d+) finding", text)
            assert line and int(line.group(1)) == len(left_out), text[-800:]
    for fmt in export_mod.FORMATS:
        capsys.readouterr()
        assert cli.main(["--config", config, "export", fmt]) == 0
        out = capsys.readouterr().out
        if out.lstrip().startswith("{"):  # the storage export: its own kinds' plans and what they save
            document = json.loads(out)
            storage = [o for o in stored if plans.family(o["kind"]) == "storage"]
            assert storage and Decimal(str(document["monthly_savings_usd"])) == plans.total(storage), fmt
            decided = {dismissed["id"], applied["id"]}  # it names resources, not findings: never a decided one's
            assert all(o["resource_id"] not in out for o in storage if o["id"] in decided), fmt
            continue
        totals[f"export {fmt}"], shown[f"export {fmt}"] = read_printed(out, truth)
        if fmt != "json":  # what a scheduler carries out: never a dismissed or applied finding
            assert not {dismissed["id"], applied["id"]} & set(shown[f"export {fmt}"]), fmt

    with db.reader(warehouse) as con:
        report = collect(con, week_of(queries.latest_charge_day(con)), Scope("finance", actor="test"), "UTC")
    totals["weekly report"] = report.open_savings
    shown["weekly report"] = {
        r["id"]: (r["status"], r["decision"]) for r in report.open_recommendations
    }  # only findings still to act on
    assert not {dismissed["id"], applied["id"]} & set(shown["weekly report"])

    at = open_page(make_app(monkeypatch, warehouse), "recommendations")  # default filter: open and accepted
    totals["dashboard recommendations"] = dollars(metrics(at)["Monthly savings shown"].removesuffix("/month")[1:])
    at.multiselect(key="recs_status").set_value(["open", "accepted", "dismissed", "applied"]).run()
    table = at.dataframe[0].value
    from gpufinops.kernel.labels import label

    code_of = {label(c, "status"): c for c in ("open", "accepted", "dismissed", "applied")}  # the page shows labels
    shown["dashboard"] = {
        rid: (code_of[status], None if decision in (None, "", "—") else decision)  # a missing value is "—"
        for rid, status, decision in zip(table["id"], table["status"], table["decision"])
    }
    overview = metrics(open_page(make_app(monkeypatch, warehouse), "overview"))
    totals["dashboard overview (identified + accepted)"] = sum(
        (dollars(overview[f"Savings {k} per month"].lstrip("$")) for k in ("identified", "accepted")), Decimal(0)
    )

    out = io.StringIO()  # the demo again, on the same home: the warehouse (and its decisions) stays
    assert demo.run(demo_home, days=14, out=out) == 0
    printed = out.getvalue()
    totals["demo summary"] = printed_dollars(r"Savings: \$([\d,.]+)/month", printed)
    assert f"left out of the total because of decisions: {len(left_out)} finding(s)" in printed

    assert set(totals.values()) == {expected}, totals
    for surface, states in shown.items():
        assert states, surface
        wrong = {rid: (state, truth[rid]) for rid, state in states.items() if state != truth[rid]}
        assert not wrong, (surface, wrong)
    for surface in ("api", "recommend json", "recommend csv", "recommend table", "export json", "dashboard"):
        assert {dismissed["id"], accepted["id"], applied["id"]} <= set(shown[surface]), surface
