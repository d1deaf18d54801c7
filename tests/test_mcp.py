"""`gpufinops mcp` through the official SDK's own client: over stdio against the real command in a
subprocess (``mcp.client.stdio``), over streamable HTTP against the server on a loopback port
(``mcp.client.streamable_http``), on the API tests' warehouse (tests/feed_fleet.py's cost lines and
findings) with shared-GPU allocation rows, budgets and the alerts `alerts run` raised on them.

Every tool is listed and called; a lead token never sees another team in any tool's answer, a
scheduler token reads recommendations and plans but no costs, a wrong or missing token is refused.
Every wait is bounded (``anyio.fail_after``, subprocess timeouts)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.feed_fleet import FLEET, HOURS, START
from tests.test_api import API_TOML, TOKENS

pytest.importorskip("mcp", reason="the mcp extra (`.venv/bin/pip install -e '.[mcp]'`)")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

FINANCE, VISION, SCHEDULER = TOKENS  # the variables' names
GPUFINOPS = str(Path(sys.executable).parent / "gpufinops")
WAIT_S = 60  # the longest any one exchange may take on a loaded 2-core machine
BUDGETS_TOML = """
[[budgets]]
name = "vision-gpus"
amount = 2000
scope = { teams = ["vision"] }

[[budgets]]
name = "nlp-gpus"
amount = 500
scope = { teams = ["nlp"] }

[[budgets]]
name = "fleet"
amount = 100000
"""
TEAMS = {team for team, *_ in FLEET}


@pytest.fixture(scope="module")
def home(tmp_path_factory, feed_template) -> Path:
    """A config and warehouse: the feed fleet, vision's node i-0vision0001 shared with an nlp pod (its
    idle share unallocated), the cost rollup refreshed, budgets configured and their alerts raised."""
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs.alerts import run as alerts_run
    from gpufinops.warehouse import db, rollups

    home = tmp_path_factory.mktemp("mcp")
    warehouse = home / "gpufinops.duckdb"
    shutil.copyfile(feed_template, warehouse)
    with db.writer(warehouse) as con:
        rows = [
            (START + timedelta(hours=h), team, pod, share, Decimal(cost), basis, method)
            for h in range(HOURS)
            for team, pod, share, cost, basis, method in (
                ("vision", "vision-train-0", 0.5, "1.3725", "timeslice", "presence"),
                ("nlp", "nlp-embed-0", 0.25, "0.68625", "timeslice", "presence"),
                ("vision", None, 0.25, "0.68625", "unallocated", "idle"),
            )
        ]
        con.executemany(
            """INSERT INTO gpu_allocation_hourly (hour, resource_id, provider, host, gpu_uuid, namespace, pod,
               team, share, cost_usd, basis, method, source, owner_team, service)
               VALUES (?, 'i-0vision0001', 'AWS', 'ip-10-0-0-1', 'GPU-0001', ?, ?, ?, ?, ?, ?, ?, 'dcgm', 'vision',
                       'Compute')""",
            [
                (hour, team, pod, team, share, cost, basis, method)
                for hour, team, pod, share, cost, basis, method in rows
            ],
        )
        rollups.refresh_cost_daily(con)
    config = home / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n{API_TOML}{BUDGETS_TOML}')
    cfg = config_mod.load(str(config), environ={})
    alerts_run.run(cfg, now=START + timedelta(hours=HOURS), send=False)
    return config


def config_of(home: Path):
    from gpufinops.jobs import config as config_mod

    return config_mod.load(str(home), environ={})


CALLS: dict[str, dict[str, Any]] = {  # every tool, with arguments that exercise it
    "costs_daily": {},
    "gpu_allocation": {},
    "recommendations": {"status": "open"},
    "plans": {},
    "alerts": {"status": "all"},
    "budgets": {},
}


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None) -> tuple[bool, Any]:
    """(is_error, the structured answer or the error text)."""
    result = await session.call_tool(name, arguments or {})
    if result.is_error:
        return True, " ".join(getattr(c, "text", "") for c in result.content)
    return False, result.structured_content


def teams_in(answer: Any) -> set[str]:
    """Every team an answer names, wherever it sits (a row's team, an alert's teams, a budget's scope)."""
    found: set[str] = set()
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("team", "owner_team") and isinstance(value, str):
                found.add(value)
            elif key == "teams" and isinstance(value, list):
                found |= {v for v in value if isinstance(v, str)}
            elif key == "effective_cost_by_team" and isinstance(value, dict):
                found |= set(value)
            else:
                found |= teams_in(value)
    elif isinstance(answer, list):
        for value in answer:
            found |= teams_in(value)
    return found


def stdio(home: Path, token_env: str | None, *extra: str, env: dict[str, str] | None = None):
    args = ["--config", str(home), "mcp", *(["--token-env", token_env] if token_env else []), *extra]
    environ = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), **(env or {})}
    return StdioServerParameters(command=GPUFINOPS, args=args, env=environ)


async def over_stdio(params: StdioServerParameters, work) -> Any:
    with anyio.fail_after(WAIT_S):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


async def every_tool(session: ClientSession) -> dict[str, Any]:
    tools = await session.list_tools()
    answers: dict[str, Any] = {"tools": {t.name: t for t in tools.tools}}
    for name, arguments in CALLS.items():
        answers[name] = await call(session, name, arguments)
    answers["nlp_costs"] = await call(session, "costs_daily", {"team": "nlp"})
    answers["bad_day"] = await call(session, "costs_daily", {"start": "2026-13-01"})
    return answers


def test_finance_over_stdio_lists_and_answers_every_tool(home):
    from gpufinops.jobs import mcp_tools

    got = anyio.run(over_stdio, stdio(home, FINANCE, env={FINANCE: TOKENS[FINANCE]}), every_tool)
    assert set(got["tools"]) == set(CALLS) == set(mcp_tools.registry())
    assert all(t.annotations.read_only_hint and t.description for t in got["tools"].values())
    assert all(not got[name][0] for name in CALLS), {n: got[n] for n in CALLS if got[n][0]}
    costs = got["costs_daily"][1]
    assert {r["team"] for r in costs["rows"]} == TEAMS
    assert len({r["day"] for r in costs["rows"]}) == HOURS // 24
    # the figures are the API's: the same allocation-aware daily rows, summed
    from gpufinops.jobs.api import _cost_rows
    from gpufinops.warehouse import db

    with db.reader(config_of(home).warehouse_path) as con:
        api_total = sum(r["effective_cost"] for r in _cost_rows(con, None, None, None))
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
    from gpufinops.jobs import cli

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


class Served:
    """The HTTP app under uvicorn in a thread on a free loopback port (its lifespan runs the SDK's
    session manager)."""

    def __init__(self, app) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def http(home):
    from gpufinops.jobs import mcp_server

    with Served(mcp_server.http_app(config_of(home), environ=TOKENS)) as served:
        yield served.url


async def over_http(url: str, token: str | None, work) -> Any:
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with anyio.fail_after(WAIT_S):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=WAIT_S) as client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)


def test_http_scopes_each_token(http):
    finance = anyio.run(over_http, http, TOKENS[FINANCE], every_tool)
    assert all(not finance[name][0] for name in CALLS)
    assert teams_in(finance["costs_daily"][1]) == TEAMS
    lead = anyio.run(over_http, http, TOKENS[VISION], every_tool)
    assert all(teams_in(lead[name][1]) <= {"vision"} for name in CALLS)
    assert lead["nlp_costs"][0] and lead["nlp_costs"][1].endswith("team: this token may not see team 'nlp'")
    scheduler = anyio.run(over_http, http, TOKENS[SCHEDULER], every_tool)
    assert scheduler["costs_daily"][0] and not scheduler["plans"][0]


@pytest.mark.parametrize("token", [None, "not-a-configured-token-at-all"])
def test_http_refuses_a_missing_or_wrong_token(http, token):
    import httpx2
    from mcp.shared.exceptions import MCPError

    with pytest.raises(BaseExceptionGroup) as refused:  # the SDK's client fails the handshake on the 401
        anyio.run(over_http, http, token, lambda s: s.list_tools())
    leaves = list(refused.value.exceptions)
    while any(isinstance(e, BaseExceptionGroup) for e in leaves):
        leaves = [x for e in leaves for x in (e.exceptions if isinstance(e, BaseExceptionGroup) else [e])]
    assert any(isinstance(e, MCPError) and "error response" in str(e) for e in leaves), leaves
    answer = httpx2.post(
        http,
        headers={"Authorization": f"Bearer {token}"} if token else {},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        timeout=WAIT_S,
    )
    assert answer.status_code == 401
    assert token is None or token not in answer.text


def test_http_refuses_to_start_without_tokens_unless_insecure_demo(tmp_path, home):
    from gpufinops.jobs import mcp_server
    from gpufinops.jobs.config import ConfigError

    bare = tmp_path / "gpufinops.toml"
    bare.write_text(f'[warehouse]\npath = "{config_of(home).warehouse_path}"\n')
    with pytest.raises(ConfigError, match="refuses to start without them"):
        mcp_server.http_app(config_of(bare), environ={})
    run = subprocess.run(
        [GPUFINOPS, "--config", str(bare), "mcp", "--transport", "http", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert run.returncode == 2 and "no [[api.tokens]] configured" in run.stderr
    with Served(mcp_server.http_app(config_of(bare), insecure_demo=True, environ={})) as served:
        answer = anyio.run(over_http, served.url, None, lambda s: call(s, "costs_daily", {"team": "search"}))
    assert not answer[0] and teams_in(answer[1]) == {"search"}


def test_json_answers_are_plain(home):
    """NaN and ±inf become null, Decimal a number, times ISO-8601 UTC: an answer always serialises."""
    from datetime import UTC, date, datetime

    from gpufinops.jobs.mcp_tools import plain

    value = plain({"a": float("nan"), "b": [float("inf"), -float("inf")], "c": Decimal("1.5")})
    assert value == {"a": None, "b": [None, None], "c": 1.5}
    assert plain(datetime(2026, 11, 1, 6, tzinfo=UTC)) == "2026-11-01T06:00:00Z"
    assert plain(date(2026, 11, 1)) == "2026-11-01"
    json.dumps(value, allow_nan=False)


def test_stdio_insecure_demo_without_tokens_serves_finance_scope(tmp_path, home):
    bare = tmp_path / "gpufinops.toml"
    bare.write_text(f'[warehouse]\npath = "{config_of(home).warehouse_path}"\n')
    got = anyio.run(over_stdio, stdio(bare, None, "--insecure-demo"), lambda s: call(s, "costs_daily"))
    assert not got[0] and teams_in(got[1]) == TEAMS
