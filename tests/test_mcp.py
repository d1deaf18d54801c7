"""`gpufinops mcp` through the official SDK's own client over stdio (``mcp.client.stdio``) against the
real command in a subprocess, on tests/mcp_fixture.py's warehouse (the API tests' cost lines and
findings with shared-GPU allocation rows, budgets and their alerts); tests/test_mcp_http.py covers
streamable HTTP.

Every tool is listed and called; a lead token never sees another team in any tool's answer, a
scheduler token reads recommendations and plans but no costs, a wrong or missing token is refused.
Every wait is bounded (``anyio.fail_after``, subprocess timeouts)."""

from __future__ import annotations

import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.feed_fleet import HOURS
from tests.mcp_fixture import (
    CALLS,
    FINANCE,
    GPUFINOPS,
    SCHEDULER,
    TEAMS,
    VISION,
    WAIT_S,
    build_home,
    call,
    config_of,
    every_tool,
    teams_in,
)
from tests.test_api import TOKENS

pytest.importorskip("mcp", reason="the mcp extra (`.venv/bin/pip install -e '.[mcp]'`)")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


@pytest.fixture(scope="module")
def home(tmp_path_factory, feed_template) -> Path:
    return build_home(tmp_path_factory.mktemp("mcp"), feed_template)


def stdio(home: Path, token_env: str | None, *extra: str, env: dict[str, str] | None = None):
    args = ["--config", str(home), "mcp", *(["--token-env", token_env] if token_env else []), *extra]
    environ = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), **(env or {})}
    return StdioServerParameters(command=GPUFINOPS, args=args, env=environ)


async def over_stdio(params: StdioServerParameters, work) -> Any:
    with anyio.fail_after(WAIT_S):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def test_finance_over_stdio_lists_and_answers_every_tool(home):
    from gpufinops.interfaces import mcp_tools

    got = anyio.run(over_stdio, stdio(home, FINANCE, env={FINANCE: TOKENS[FINANCE]}), every_tool)
    assert set(got["tools"]) == set(CALLS) == set(mcp_tools.registry())
    assert all(t.annotations.read_only_hint and t.description for t in got["tools"].values())
    assert all(not got[name][0] for name in CALLS), {n: got[n] for n in CALLS if got[n][0]}
    costs = got["costs_daily"][1]
    assert {r["team"] for r in costs["rows"]} == TEAMS
    assert len({r["day"] for r in costs["rows"]}) == HOURS // 24
    # the figures are the API's: the same allocation-aware daily rows, summed
    from gpufinops.interfaces.api_costs import cost_rows
    from gpufinops.warehouse import db

    with db.reader(config_of(home).warehouse_path) as con:
        api_total = sum(r["effective_cost"] for r in cost_rows(con, None, None, None))
    assert sum(costs["effective_cost_by_team"].values()) == pytest.approx(api_total)
    allocation = got["gpu_allocation"][1]
    assert {(r["team"], r["workload"]) for r in allocation["workloads"]["rows"]} == {
        ("vision", "vision-train-0"),
        ("nlp", "nlp-embed-0"),
    }
    assert allocation["unallocated"]["rows"][0]["unallocated_cost"] == pytest.approx(0.68625 * HOURS)
    recs = got["recommendations"][1]["rows"]
    assert recs and all(r["status"] == "open" and "decision" in r for r in recs)
    plans = got["plans"][1]
    assert plans["monthly_savings_usd"] > 0 and all(p["actions"] for p in plans["rows"])
    assert {a["rule"] for a in got["alerts"][1]["rows"]} >= {"budget"}
    budgets = {b["name"]: b for b in got["budgets"][1]["budgets"]}
    assert set(budgets) == {"vision-gpus", "nlp-gpus", "fleet"}
    assert budgets["nlp-gpus"]["share_spent"] > 1 and budgets["nlp-gpus"]["current_period"] == "2026-11"
    assert {r["team"] for r in got["nlp_costs"][1]["rows"]} == {"nlp"}
    assert got["bad_day"][0] and "start: not a date" in got["bad_day"][1]
    # spend for the period: the allocation-aware daily rows' GPU cost, summed; money as numbers
    spend = got["costs"][1]
    assert spend["window"]["label"] == "November 2026" and {r["team"] for r in spend["rows"]} == TEAMS
    with db.reader(config_of(home).warehouse_path) as con:
        gpu_total = sum(r["gpu_cost"] for r in cost_rows(con, None, None, None))
    assert spend["total_usd"] == pytest.approx(gpu_total)
    assert all(isinstance(b["amount"], float) for b in got["budgets"][1]["budgets"])
    storage = got["storage_findings"][1]
    from gpufinops.models import registry

    storage_kinds = {k for k in registry.KINDS if registry.spec(k).family == "storage"}
    assert set(storage["kinds"]) == storage_kinds and len(storage_kinds) >= 3  # none in this feed: the demo's
    assert storage["rows"] == [] and storage["monthly_savings_usd"] == 0
    assert got["unit_costs"][1]["rows"] == [] and got["carbon"][1]["rows"] == []  # no serving, no power here


def test_a_lead_over_stdio_never_sees_another_team(home):
    got = anyio.run(over_stdio, stdio(home, VISION, env={VISION: TOKENS[VISION]}), every_tool)
    for name in CALLS:
        is_error, answer = got[name]
        assert not is_error, (name, answer)
        assert teams_in(answer) <= {"vision"}, (name, teams_in(answer))
    assert teams_in(got["costs_daily"][1]) == {"vision"}
    assert {b["name"] for b in got["budgets"][1]["budgets"]} == {"vision-gpus"}  # not the fleet's
    assert all("node_gpu_cost" not in r for r in got["gpu_allocation"][1]["unallocated"]["rows"])
    assert got["nlp_costs"][0] and got["nlp_costs"][1].endswith("team: this token may not see team 'nlp'")


def test_a_scheduler_reads_recommendations_and_plans_but_no_costs(home):
    got = anyio.run(over_stdio, stdio(home, SCHEDULER, env={SCHEDULER: TOKENS[SCHEDULER]}), every_tool)
    for name in CALLS:
        is_error, answer = got[name]
        if name in ("recommendations", "plans"):
            assert not is_error and answer["rows"], (name, answer)
        elif name in ("storage_findings", "withheld_findings"):  # findings, no money spent
            assert not is_error, (name, answer)
        else:
            assert is_error and "reads recommendations and plans only, not costs" in answer, (name, answer)


@pytest.mark.parametrize(
    ("token_env", "env", "message"),
    [
        ("MY_TOKEN", {"MY_TOKEN": "y" * 32}, "the token in MY_TOKEN is not one of the configured [[api.tokens]]"),
        ("MY_TOKEN", {"MY_TOKEN": "y" * 32, VISION: TOKENS[VISION]}, "the token in MY_TOKEN is not one of the"),
        (VISION, {VISION: "short-token"}, f"the token in {VISION} is shorter than 16 characters"),
        (VISION, {}, f"environment variable {VISION} is not set"),
        (None, {}, "--token-env: name the environment variable"),
    ],
)
def test_a_wrong_token_over_stdio_refuses_to_start(home, token_env, env, message, monkeypatch, capsys):
    """In-process (the command's own main): exit 2 before any protocol byte, the value never echoed."""
    from gpufinops.interfaces import cli

    for name in TOKENS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = ["--config", str(home), "mcp", *(["--token-env", token_env] if token_env else [])]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert message in err and out == ""  # nothing on the protocol's channel
    assert all(value not in err for value in (*env.values(), *TOKENS.values()))


def test_your_own_variable_holding_a_configured_token_gets_its_scope(home):
    """The client's environment holds the user's token under any name; the configured entry that holds
    the same value (its variable set in the same environment) gives the scope."""
    env = {"MY_TOKEN": TOKENS[VISION], VISION: TOKENS[VISION]}
    got = anyio.run(over_stdio, stdio(home, "MY_TOKEN", env=env), lambda s: call(s, "costs_daily", {"team": "nlp"}))
    assert got[0] and got[1].endswith("team: this token may not see team 'nlp'")


# ---- streamable HTTP ----------------------------------------------------------------------------


def test_stdio_insecure_demo_without_tokens_serves_finance_scope(tmp_path, home):
    bare = tmp_path / "gpufinops.toml"
    bare.write_text(f'[warehouse]\npath = "{config_of(home).warehouse_path}"\n')
    got = anyio.run(over_stdio, stdio(bare, None, "--insecure-demo"), lambda s: call(s, "costs_daily"))
    assert not got[0] and teams_in(got[1]) == TEAMS


def test_json_answers_are_plain(home):
    """NaN and ±inf become null, Decimal a number, times ISO-8601 UTC: an answer always serialises."""
    from datetime import UTC, date, datetime

    from gpufinops.interfaces.mcp_tools import plain

    value = plain({"a": float("nan"), "b": [float("inf"), -float("inf")], "c": Decimal("1.5")})
    assert value == {"a": None, "b": [None, None], "c": 1.5}
    assert plain(datetime(2026, 11, 1, 6, tzinfo=UTC)) == "2026-11-01T06:00:00Z"
    assert plain(date(2026, 11, 1)) == "2026-11-01"
    json.dumps(value, allow_nan=False)


def test_without_the_sdk_the_command_names_the_extra(home, monkeypatch, capsys):
    from gpufinops.interfaces import cli

    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError, as when not installed
    assert cli.main(["--config", str(home), "mcp", "--insecure-demo"]) == 1
    err = capsys.readouterr().err
    assert "install the 'mcp' extra" in err and ".venv/bin/pip install -e '.[mcp]'" in err
