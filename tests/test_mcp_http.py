"""`gpufinops mcp --transport http` through the SDK's streamable HTTP client (``mcp.client.streamable_http``)
against the server under uvicorn on a loopback port: each token's scope, a missing or wrong token
refused with 401, no start without tokens unless --insecure-demo, hostile arguments refused by name.
Every wait is bounded (``anyio.fail_after``, client and thread timeouts)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

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
from tests.test_api import TOKENS, Served

pytest.importorskip("mcp", reason="the mcp extra (`.venv/bin/pip install -e '.[mcp]'`)")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402


@pytest.fixture(scope="module")
def home(tmp_path_factory, feed_template) -> Path:
    return build_home(tmp_path_factory.mktemp("mcp"), feed_template)


def serve_mcp(app) -> Served:
    """The HTTP app under uvicorn on a loopback port (its lifespan runs the SDK's session manager)."""
    return Served(app, path="/mcp", lifespan="on", start_s=WAIT_S)


@pytest.fixture(scope="module")
def http(home):
    from gpufinops.interfaces import mcp_server

    with serve_mcp(mcp_server.http_app(config_of(home), environ=TOKENS)) as served:
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
    from gpufinops.interfaces import mcp_server
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
    with serve_mcp(mcp_server.http_app(config_of(bare), insecure_demo=True, environ={})) as served:
        answer = anyio.run(over_http, served.url, None, lambda s: call(s, "costs_daily", {"team": "search"}))
    assert not answer[0] and teams_in(answer[1]) == {"search"}


HOSTILE: list[tuple[str, dict[str, Any], str]] = [  # (tool, arguments, what the refusal names)
    ("costs_daily", {"start": "2026-11-02", "end": "2026-11-01"}, "end: 2026-11-01 is before start"),
    ("costs_daily", {"start": "9999-99-99"}, "start: not a date"),
    ("costs_daily", {"end": "2026-11-01\r\nX-Injected: 1"}, "end: not a date"),
    ("gpu_allocation", {"limit": -1}, "limit: must be between 1 and 500"),
    ("gpu_allocation", {"limit": 10**12}, "limit: must be between 1 and 500"),
    ("recommendations", {"kind": "idle_gpu'; DROP TABLE recommendations; --"}, "kind: unknown kind"),
    ("recommendations", {"status": "\x00"}, "status: unknown status"),
    ("alerts", {"rule": "nope"}, "rule: unknown rule"),
    ("plans", {"limit": "many"}, "limit"),
]


def test_hostile_arguments_are_refused_in_one_sentence_and_a_lead_stays_in_scope(http):
    """Wrong types, reversed windows, CR/LF, NUL and SQL in arguments: each call an error naming the
    argument, the session still answering; for a lead, every team argument but its own is refused."""

    async def work(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, (name, arguments, _) in enumerate(HOSTILE):
            out[f"hostile{i}"] = await call(session, name, arguments)
        for team in [*TEAMS, "VISION", "vision\r\n", "", "\x00", "' OR 1=1 --"]:
            for name in CALLS:
                if name != "budgets" or team:  # budgets: a team filter, like every other tool's
                    out[f"{name}:{team!r}"] = await call(session, name, {"team": team})
        out["after"] = await call(session, "costs_daily")
        return out

    got = anyio.run(over_http, http, TOKENS[VISION], work)
    for i, (name, _arguments, message) in enumerate(HOSTILE):
        is_error, text = got[f"hostile{i}"]
        assert is_error and message in text and "Traceback" not in text, (name, text)
    for key, (is_error, answer) in got.items():
        if key.startswith(tuple(CALLS)) and not key.endswith("'vision'"):
            assert is_error and "may not see team" in answer, (key, answer)
        elif key.endswith("'vision'"):
            assert not is_error and teams_in(answer) <= {"vision"}, (key, answer)
    assert not got["after"][0] and teams_in(got["after"][1]) == {"vision"}
