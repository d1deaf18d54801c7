"""The API's token set-up and a property test of team scope.

Start-up: two ``[[api.tokens]]`` whose variables hold one value (the value would get the wider scope)
and tokens shorter than 16 characters are refused, naming the variables, never the value. Dates
outside 1970–2199 (``to=9999-12-31`` overflowed into a 500) are a 400. The property test drives the
real application in-process (Starlette's TestClient speaks ASGI to it, which lets hypothesis send
hundreds of requests in seconds; tests/test_api.py covers the same app over real HTTP with uvicorn):
whatever the query parameters and ids, a lead token never sees another team and never changes
another team's recommendations or decisions, and nothing answers 5xx.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufinops.jobs.config import ConfigError
from gpufinops.models.registry import KINDS
from tests.conftest import query
from tests.feed_fleet import realistic_recommendations
from tests.test_api import API_TOML, TOKENS, make_config

VISION = {"Authorization": f"Bearer {TOKENS['GPUFINOPS_TOKEN_VISION']}"}


def test_two_tokens_with_one_value_refuse_to_start(tmp_path, feed_template):
    from gpufinops.interfaces.api import create_app

    shared = secrets.token_urlsafe(24)
    env = {**TOKENS, "GPUFINOPS_TOKEN_VISION": shared, "GPUFINOPS_TOKEN_FINANCE": shared}
    with pytest.raises(ConfigError) as refused:
        create_app(make_config(tmp_path, feed_template), environ=env)
    message = str(refused.value)
    assert "GPUFINOPS_TOKEN_VISION holds the same token as GPUFINOPS_TOKEN_FINANCE" in message
    assert shared not in message


@pytest.mark.parametrize("value", ["qq", "short-token-15c"])
def test_a_short_token_refuses_to_start(tmp_path, feed_template, value):
    from gpufinops.interfaces.api import create_app

    with pytest.raises(
        ConfigError,
        match=r"api.tokens\[1\].token_env: the token in GPUFINOPS_TOKEN_VISION is "
        r"shorter than 16 characters",
    ) as refused:
        create_app(make_config(tmp_path, feed_template), environ={**TOKENS, "GPUFINOPS_TOKEN_VISION": value})
    assert value not in str(refused.value)


def test_the_api_command_exits_2_on_a_shared_token(tmp_path, feed_template):
    import contextlib
    import io

    from gpufinops.interfaces import cli

    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{feed_template}"\n{API_TOML}')
    err = io.StringIO()
    env = {**TOKENS, "GPUFINOPS_TOKEN_SCHEDULER": TOKENS["GPUFINOPS_TOKEN_FINANCE"]}
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        for name, value in env.items():
            mp.setenv(name, value)
        assert cli.main(["--config", str(config), "api", "--port", "1"]) == 2
    assert "GPUFINOPS_TOKEN_SCHEDULER holds the same token as GPUFINOPS_TOKEN_FINANCE" in err.getvalue()
    assert TOKENS["GPUFINOPS_TOKEN_FINANCE"] not in err.getvalue()


@pytest.fixture(scope="module")
def scoped(tmp_path_factory, feed_template):
    from gpufinops.interfaces.api import create_app

    home = tmp_path_factory.mktemp("scope")
    db = home / "gpufinops.duckdb"
    shutil.copyfile(feed_template, db)
    client = TestClient(create_app(make_config(home, db), environ=TOKENS, read_retry_s=5, write_retry_s=5))
    others = [r.id for r in realistic_recommendations() if r.team != "vision"]
    return client, db, others


def others_digest(db: Path) -> str:
    rows = query(
        db,
        "SELECT id, status, CAST(evidence AS VARCHAR) FROM recommendations WHERE team IS DISTINCT FROM "
        "'vision' ORDER BY id",
    )
    rows += query(
        db,
        "SELECT d.recommendation_id, d.decision, d.reason FROM decisions d JOIN recommendations r "
        "ON r.id = d.recommendation_id WHERE r.team IS DISTINCT FROM 'vision' ORDER BY 1, 2, 3",
    )
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.parametrize(
    "params",
    [
        {"to": "9999-12-31"},
        {"from": "0001-01-01"},
        {"to": "2026-02-30"},
        {"from": "2026-13-01"},
        {"to": "20261001"},
        {"from": "2026-10-01T00:00"},
    ],
)
def test_bad_dates_are_400_not_500(scoped, params):
    client, _, _ = scoped
    answer = client.get("/v1/costs/daily", params=params, headers=VISION)
    assert answer.status_code == 400, answer.text
    assert list(params)[0] in answer.json()["detail"]


texts = st.one_of(
    st.none(),
    st.sampled_from(
        ["vision", "research", "platform", "", "VISION", "vision ", "*", "%", "' OR 1=1 --", "vision,research"]
    ),
    st.text(max_size=20),
)
days = st.one_of(
    st.none(),
    st.dates().map(str),
    st.sampled_from(["9999-12-31", "0001-01-01", "2026-02-30", "x"]),
    st.text(max_size=12),
)


@dataclass(frozen=True)
class Asked:
    """What a lead reads with: the recommendations' filters and the costs' window (None: not sent)."""

    team: str | None
    kind: str | None
    status: str | None
    start: str | None
    end: str | None


@dataclass(frozen=True)
class Decided:
    """What a lead decides: ``decision`` on another team's finding (the ``target``-th) and on ``raw_id``."""

    target: int
    decision: str
    raw_id: str


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reads=st.builds(
        Asked,
        team=texts,
        kind=st.one_of(st.none(), st.sampled_from(list(KINDS)), st.text(max_size=12)),
        status=st.one_of(st.none(), st.sampled_from(["open", "accepted", "dismissed", "applied"]), st.text(max_size=8)),
        start=days,
        end=days,
    ),
    writes=st.builds(
        Decided,
        target=st.integers(min_value=0, max_value=10**6),
        decision=st.sampled_from(["accept", "dismiss", "apply", "", "ACCEPT"]),
        raw_id=st.text(max_size=40),
    ),
)
@pytest.mark.slow
def test_a_lead_token_never_sees_or_changes_another_team(scoped, reads, writes):
    client, db, others = scoped
    team, kind, status, start, end = reads.team, reads.kind, reads.status, reads.start, reads.end
    target, decision, raw_id = writes.target, writes.decision, writes.raw_id
    before = others_digest(db)
    params = {k: v for k, v in (("team", team), ("kind", kind), ("status", status)) if v is not None}
    answer = client.get("/v1/recommendations", params=params, headers=VISION)
    assert answer.status_code < 500, answer.text
    if answer.status_code == 200:
        assert {r["team"] for r in answer.json()} <= {"vision"}
    cost_params = {k: v for k, v in (("team", team), ("from", start), ("to", end)) if v is not None}
    costs = client.get("/v1/costs/daily", params=cost_params, headers=VISION)
    assert costs.status_code < 500, costs.text
    if costs.status_code == 200:
        assert {r["team"] for r in costs.json()} <= {"vision"}
    for rec_id in (others[target % len(others)], raw_id):
        if not rec_id:
            continue
        decided = client.post(
            f"/v1/recommendations/{quote(rec_id, safe='')}/decision",
            json={"decision": decision, "reason": "p"},
            headers=VISION,
        )
        assert decided.status_code < 500, decided.text
        if rec_id in others:
            assert decided.status_code in (404, 422)
    assert others_digest(db) == before
