"""`gpufinops api` over real HTTP on loopback (uvicorn on a free port, httpx as the client): bearer
tokens, roles and team scoping on recommendations and costs, decisions persisted, ETag / 304."""

from __future__ import annotations

import logging
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Literal

import httpx
import pytest
import uvicorn

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.config import ConfigError
from gpufinops.warehouse import recommendation_read
from tests.conftest import query
from tests.feed_fleet import FLEET, HOURS, START, realistic_recommendations

TOKENS = {
    "GPUFINOPS_TOKEN_FINANCE": secrets.token_urlsafe(24),
    "GPUFINOPS_TOKEN_VISION": secrets.token_urlsafe(24),
    "GPUFINOPS_TOKEN_SCHEDULER": secrets.token_urlsafe(24),
}
API_TOML = """
[[api.tokens]]
token_env = "GPUFINOPS_TOKEN_FINANCE"
role = "finance"
name = "finance-bot"

[[api.tokens]]
token_env = "GPUFINOPS_TOKEN_VISION"
role = "lead"
teams = ["vision"]
name = "vision-lead"

[[api.tokens]]
token_env = "GPUFINOPS_TOKEN_SCHEDULER"
role = "scheduler"
"""


def make_config(tmp_path: Path, warehouse: Path, text: str = API_TOML) -> config_mod.Config:
    path = tmp_path / "gpufinops.toml"
    path.write_text(f'[warehouse]\npath = "{warehouse}"\n{text}')
    return config_mod.load(str(path), environ={})


class Served:
    """The app under uvicorn in a thread, on a socket bound to a free loopback port; ``url`` ends in
    ``path``; ``lifespan`` "on" runs the app's startup and shutdown (the MCP app's session manager)."""

    def __init__(self, app, *, path: str = "", lifespan: Literal["on", "off"] = "off", start_s: float = 30) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}{path}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.start_s = start_s

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + self.start_s
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def api(tmp_path, feed_warehouse) -> Iterator[tuple[str, Path]]:
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, feed_warehouse)
    with Served(create_app(cfg, environ=TOKENS)) as served:
        yield served.url, feed_warehouse


def auth(env: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[env]}"}


FINANCE, VISION, SCHEDULER = (auth(e) for e in TOKENS)


def test_no_token_or_a_bad_one_is_401_and_never_echoed(api, caplog):
    url, _ = api
    caplog.set_level(logging.DEBUG, logger="gpufinops")
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"  # liveness needs no token
    for path in ("/v1/recommendations", "/v1/costs/daily"):
        r = httpx.get(url + path)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    wrong = TOKENS["GPUFINOPS_TOKEN_FINANCE"][:-1] + ("A" if TOKENS["GPUFINOPS_TOKEN_FINANCE"][-1] != "A" else "B")
    for header in (f"Bearer {wrong}", f"Basic {TOKENS['GPUFINOPS_TOKEN_FINANCE']}", "Bearer"):
        r = httpx.get(f"{url}/v1/recommendations", headers={"Authorization": header})
        assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
        assert wrong not in r.text and TOKENS["GPUFINOPS_TOKEN_FINANCE"] not in r.text
    r = httpx.post(f"{url}/v1/recommendations/x/decision", json={"decision": "accept"})
    assert r.status_code == 401
    assert not any(t in caplog.text for t in TOKENS.values())


def test_recommendations_are_scoped_by_role_and_team(api):
    url, _ = api
    every = {r.team for r in realistic_recommendations()}
    finance = httpx.get(f"{url}/v1/recommendations", headers=FINANCE).json()
    assert {o["team"] for o in finance} == every
    assert len(finance) == len(realistic_recommendations())
    assert {o["team"] for o in httpx.get(f"{url}/v1/recommendations", headers=SCHEDULER).json()} == every
    lead = httpx.get(f"{url}/v1/recommendations", headers=VISION).json()
    assert lead and {o["team"] for o in lead} == {"vision"}
    assert httpx.get(f"{url}/v1/recommendations", params={"team": "vision"}, headers=VISION).json() == lead
    r = httpx.get(f"{url}/v1/recommendations", params={"team": "nlp"}, headers=VISION)
    assert r.status_code == 403 and "nlp" not in str([o for o in lead])
    spot = httpx.get(f"{url}/v1/recommendations", params={"kind": "spot_mix"}, headers=SCHEDULER).json()
    assert {o["kind"] for o in spot} == {"spot_mix"}
    assert len(spot) == sum(r.kind == "spot_mix" for r in realistic_recommendations())
    assert httpx.get(f"{url}/v1/recommendations", params={"kind": "nonsense"}, headers=FINANCE).status_code == 400
    assert httpx.get(f"{url}/v1/recommendations", params={"status": "dismissed"}, headers=FINANCE).json() == []


def test_recommendation_objects_follow_the_contract(api):
    url, _ = api
    stored = {r.id: r for r in realistic_recommendations()}
    for obj in httpx.get(f"{url}/v1/recommendations", headers=FINANCE).json():
        rec = stored[obj["id"]]
        assert obj["kind_label"] and obj["status_label"] == "Open"  # labels beside the codes (additive)
        assert [k for k in obj if not k.endswith("_label")] == list(recommendation_read.FIELDS)  # the read model's
        assert isinstance(obj["monthly_savings_usd"], float)  # money as a JSON number
        assert Decimal(str(obj["monthly_savings_usd"])) == rec.monthly_savings_usd
        assert obj["current"] == rec.to_dict()["current"] and obj["proposed"] == rec.to_dict()["proposed"]
        assert obj["created_at"] == rec.to_dict()["created_at"] and obj["status"] == "open"


def test_costs_are_scoped_and_closed_to_the_scheduler(api):
    url, warehouse = api
    rows = httpx.get(f"{url}/v1/costs/daily", headers=FINANCE).json()
    assert {r["team"] for r in rows} == {t for t, *_ in FLEET}
    total = sum(r["effective_cost"] for r in rows)
    [(expected,)] = query(warehouse, 'SELECT sum("EffectiveCost") FROM cost_line_items')
    assert total == pytest.approx(float(expected))
    lead = httpx.get(f"{url}/v1/costs/daily", headers=VISION).json()
    assert lead and {r["team"] for r in lead} == {"vision"}
    [(vision_cost,)] = query(
        warehouse, """SELECT sum("EffectiveCost") FROM cost_line_items WHERE "x_Team" = 'vision'"""
    )
    assert sum(r["effective_cost"] for r in lead) == pytest.approx(float(vision_cost))
    assert httpx.get(f"{url}/v1/costs/daily", params={"team": "nlp"}, headers=VISION).status_code == 403
    assert httpx.get(f"{url}/v1/costs/daily", headers=SCHEDULER).status_code == 403
    first_day = START.date().isoformat()
    one_day = httpx.get(f"{url}/v1/costs/daily", params={"from": first_day, "to": first_day}, headers=FINANCE).json()
    assert {r["day"] for r in one_day} == {first_day}  # `to` is inclusive: the whole day
    assert len({r["day"] for r in rows}) == HOURS // 24
    assert httpx.get(f"{url}/v1/costs/daily", params={"from": "yesterday"}, headers=FINANCE).status_code == 400


def test_decisions_are_persisted_and_scoped(api):
    url, warehouse = api
    recs = {r.kind: r for r in realistic_recommendations()}
    vision_id, nlp_id = recs["idle_gpu"].id, recs["gpu_count"].id
    r = httpx.post(
        f"{url}/v1/recommendations/{vision_id}/decision",
        headers=VISION,
        json={"decision": "accept", "reason": "stopping it Friday"},
    )
    assert r.status_code == 200 and r.json()["status"] == "accepted" and r.json()["id"] == vision_id
    assert query(
        warehouse, "SELECT decision, reason, actor FROM decisions WHERE recommendation_id = ?", [vision_id]
    ) == [("accept", "stopping it Friday", "vision-lead")]
    assert query(warehouse, "SELECT status FROM recommendations WHERE id = ?", [vision_id]) == [("accepted",)]
    # another team's finding is as unknown as a missing one
    other = httpx.post(f"{url}/v1/recommendations/{nlp_id}/decision", headers=VISION, json={"decision": "dismiss"})
    missing = httpx.post(
        f"{url}/v1/recommendations/idle_gpu-0000/decision", headers=VISION, json={"decision": "dismiss"}
    )
    assert other.status_code == missing.status_code == 404
    assert query(warehouse, "SELECT status FROM recommendations WHERE id = ?", [nlp_id]) == [("open",)]
    assert (
        httpx.post(
            f"{url}/v1/recommendations/{nlp_id}/decision", headers=SCHEDULER, json={"decision": "accept"}
        ).status_code
        == 403
    )
    assert (
        httpx.post(
            f"{url}/v1/recommendations/{nlp_id}/decision", headers=FINANCE, json={"decision": "apply"}
        ).status_code
        == 422
    )
    r = httpx.post(
        f"{url}/v1/recommendations/{nlp_id}/decision",
        headers=FINANCE,
        json={"decision": "dismiss", "reason": "needs 8 GPUs for the Q1 run"},
    )
    assert r.json()["status"] == "dismissed"
    assert query(warehouse, "SELECT actor FROM decisions WHERE recommendation_id = ?", [nlp_id]) == [("finance-bot",)]
    accepted = httpx.get(f"{url}/v1/recommendations", params={"status": "accepted"}, headers=SCHEDULER).json()
    assert [o["id"] for o in accepted] == [vision_id]


def test_etag_lets_a_poller_fetch_only_changes(api):
    url, _ = api
    first = httpx.get(f"{url}/v1/recommendations", headers=SCHEDULER)
    etag = first.headers["etag"]
    again = httpx.get(f"{url}/v1/recommendations", headers={**SCHEDULER, "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert httpx.get(f"{url}/v1/recommendations", headers={**SCHEDULER, "If-None-Match": '"stale"'}).status_code == 200
    # a lead's narrower view is a different body, so a different tag
    assert httpx.get(f"{url}/v1/recommendations", headers=VISION).headers["etag"] != etag
    rec_id = realistic_recommendations()[0].id
    httpx.post(f"{url}/v1/recommendations/{rec_id}/decision", headers=FINANCE, json={"decision": "accept"})
    changed = httpx.get(f"{url}/v1/recommendations", headers={**SCHEDULER, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    costs = httpx.get(f"{url}/v1/costs/daily", headers=FINANCE)
    assert (
        httpx.get(f"{url}/v1/costs/daily", headers={**FINANCE, "If-None-Match": costs.headers["etag"]}).status_code
        == 304
    )


def hold_write_lock(warehouse: Path, seconds: float) -> subprocess.Popen:
    """Another process (a running ingest, say) holding DuckDB's write lock for a while."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(float(sys.argv[2])); con.close()",
            str(warehouse),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_requests_wait_for_a_writer_then_give_up_with_503(tmp_path, feed_warehouse):
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, feed_warehouse)
    rec_id = realistic_recommendations()[0].id
    with Served(create_app(cfg, environ=TOKENS, read_retry_s=30, write_retry_s=30)) as served:
        holder = hold_write_lock(feed_warehouse, 1.5)
        assert holder.poll() is None  # the lock is held as the requests go out
        assert httpx.get(f"{served.url}/v1/recommendations", headers=FINANCE, timeout=60).status_code == 200
        r = httpx.post(
            f"{served.url}/v1/recommendations/{rec_id}/decision",
            headers=FINANCE,
            json={"decision": "accept"},
            timeout=60,
        )
        assert r.status_code == 200
        holder.wait(timeout=30)
    with Served(create_app(cfg, environ=TOKENS, read_retry_s=0.2, write_retry_s=0.2)) as served:
        holder = hold_write_lock(feed_warehouse, 20)
        try:
            busy = httpx.get(f"{served.url}/v1/recommendations", headers=FINANCE, timeout=60)
            assert busy.status_code == 503 and busy.headers["retry-after"]
            assert (
                httpx.post(
                    f"{served.url}/v1/recommendations/{rec_id}/decision",
                    headers=FINANCE,
                    json={"decision": "dismiss"},
                    timeout=60,
                ).status_code
                == 503
            )
            assert httpx.get(f"{served.url}/healthz").status_code == 503
        finally:
            holder.kill()
            holder.wait()
    assert query(feed_warehouse, "SELECT status FROM recommendations WHERE id = ?", [rec_id]) == [("accepted",)]


def test_without_tokens_the_api_refuses_unless_insecure_demo(tmp_path, feed_warehouse, caplog):
    from gpufinops.interfaces.api import create_app

    cfg = make_config(tmp_path, feed_warehouse, "")
    with pytest.raises(ConfigError, match="api.tokens"):
        create_app(cfg, environ={})
    caplog.set_level(logging.WARNING)
    with Served(create_app(cfg, insecure_demo=True, environ={})) as served:
        assert "NO AUTHENTICATION" in caplog.text
        everything = httpx.get(f"{served.url}/v1/recommendations").json()
        assert {o["team"] for o in everything} == {r.team for r in realistic_recommendations()}
        assert httpx.get(f"{served.url}/v1/costs/daily").status_code == 200
    with pytest.raises(ConfigError, match=r"api.tokens\[1\].token_env: environment variable GPUFINOPS_TOKEN_VISION"):
        create_app(make_config(tmp_path, feed_warehouse), environ={"GPUFINOPS_TOKEN_FINANCE": "x" * 32})


def test_the_api_command_exits_2_without_tokens(tmp_path, feed_warehouse):
    cfg_path = tmp_path / "gpufinops.toml"
    cfg_path.write_text(f'[warehouse]\npath = "{feed_warehouse}"\n')
    result = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(cfg_path), "api", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "api.tokens" in result.stderr and "--insecure-demo" in result.stderr


@pytest.mark.parametrize(
    "text, key",
    [
        ('[[api.tokens]]\ntoken_env = "T"\nrole = "lead"\n', r"api.tokens\[0\].teams"),
        ('[[api.tokens]]\ntoken_env = "T"\nrole = "admin"\n', r"api.tokens\[0\].role"),
        ('[[api.tokens]]\nrole = "finance"\n', r"api.tokens\[0\].token_env"),
        ('[[api.tokens]]\ntoken_env = "T"\nrole = "finance"\ntoken = "s3cret"\n', r"api.tokens\[0\].token"),
        ('[[api.tokens]]\ntoken_env = "T"\nrole = "scheduler"\nteams = ["a"]\n', r"api.tokens\[0\].teams"),
        ("[api]\nport = 1\n", r"api.port"),
        ('[[api.webhooks]]\nurl = "ftp://x"\nsecret_env = "S"\n', r"api.webhooks\[0\].url"),
        ('[[api.webhooks]]\nurl = "https://x"\n', r"api.webhooks\[0\].secret_env"),
        (
            '[[api.webhooks]]\nurl = "https://x"\nsecret_env = "S"\nmax_attempts = 0\n',
            r"api.webhooks\[0\].max_attempts",
        ),
    ],
)
def test_bad_api_config_names_the_key(tmp_path, text, key):
    path = tmp_path / "gpufinops.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key):
        config_mod.load(str(path), environ={})
