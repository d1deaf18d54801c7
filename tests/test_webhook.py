"""Webhook push of new recommendations to a real HTTP receiver on loopback (http.server): the receiver
checks the HMAC-SHA256 signature itself; a 503 is retried with backoff; every attempt is recorded;
a delivered batch is never sent again; a dead receiver's batch waits for the next push."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs import webhook
from gpufinops.jobs.config import ConfigError
from gpufinops.models.registry import KINDS
from gpufinops.warehouse import db, recommendation_store
from tests.conftest import query
from tests.feed_fleet import Subject, _rec, realistic_recommendations

SECRET = "whsec-" + "9f3b2c" * 6


class Receiver:
    """A webhook endpoint: answers the scripted statuses in turn (then 200), keeps every request."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"headers": dict(self.headers), "body": body, "path": self.path})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gpufinops"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signature_ok(req: dict, secret: str = SECRET) -> bool:
    """What a receiver does, written independently of jobs.webhook."""
    timestamp = req["headers"]["X-Gpufinops-Timestamp"]
    expected = "sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + req["body"], hashlib.sha256).hexdigest()
    fresh = abs(time.time() - int(timestamp)) < 300
    return fresh and hmac.compare_digest(expected, req["headers"]["X-Gpufinops-Signature"])


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(statuses=None) -> Receiver:
        made.append(Receiver(statuses))
        return made[-1]

    yield make
    for r in made:
        r.close()


def config_for(tmp_path: Path, warehouse: Path, hooks: str) -> config_mod.Config:
    path = tmp_path / "gpufinops.toml"
    path.write_text(f'[warehouse]\npath = "{warehouse}"\n{hooks}')
    return config_mod.load(str(path), environ={})


def hook(url: str, extra: str = "") -> str:
    return f'[[api.webhooks]]\nurl = "{url}"\nsecret_env = "GPUFINOPS_WEBHOOK_SECRET"\n{extra}\n'


ENV = {"GPUFINOPS_WEBHOOK_SECRET": SECRET}


def deliveries(warehouse: Path) -> list[tuple]:
    return query(
        warehouse,
        "SELECT status, attempts, http_status, recommendation_ids, error FROM webhook_deliveries "
        "ORDER BY last_attempt_at",
    )


def test_signed_push_retried_after_a_503_and_not_sent_again(tmp_path, feed_warehouse, receiver):
    target = receiver([503])
    cfg = config_for(tmp_path, feed_warehouse, hook(target.url))
    waits: list[float] = []
    expected_ids = {r.id for r in realistic_recommendations()}

    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=waits.append) == len(expected_ids)
    assert len(target.requests) == 2 and waits and waits[0] > 0  # a 503, a backoff, then success
    assert all(signature_ok(r) for r in target.requests)
    first, second = target.requests
    assert first["headers"]["X-Gpufinops-Delivery"] == second["headers"]["X-Gpufinops-Delivery"]
    payload = json.loads(second["body"])
    assert {o["id"] for o in payload["recommendations"]} == expected_ids
    assert all(
        isinstance(o["monthly_savings_usd"], float) and isinstance(o["evidence"], dict)
        for o in payload["recommendations"]
    )
    [(status, attempts, http_status, ids, error)] = deliveries(feed_warehouse)
    assert (status, attempts, http_status) == ("delivered", 2, 200) and set(json.loads(ids)) == expected_ids

    # nothing new: nothing sent
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=waits.append) == 0
    assert len(target.requests) == 2

    # a new finding: only it is sent
    new = _rec(
        "gpu_count",
        Subject("nlp", "aws", "i-0nlp000009", "nlp-eval"),
        {"gpu_model": "A10G", "gpu_count": 4, "pricing": "on_demand"},
        {"gpu_model": "A10G", "gpu_count": 1, "pricing": "on_demand"},
        "1500.00",
        {"util_p95": 12.0},
    )
    with db.writer(feed_warehouse) as con:
        recommendation_store.store_recommendations(con, [*realistic_recommendations(), new], KINDS)
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=waits.append) == 1
    assert [o["id"] for o in json.loads(target.requests[-1]["body"])["recommendations"]] == [new.id]
    assert signature_ok(target.requests[-1])


def test_a_tampered_or_replayed_push_fails_verification(tmp_path, feed_warehouse, receiver):
    target = receiver()
    webhook.push_new_recommendations(
        config_for(tmp_path, feed_warehouse, hook(target.url)), environ=ENV, sleep=lambda s: None
    )
    [req] = target.requests
    ts, sig, body = req["headers"]["X-Gpufinops-Timestamp"], req["headers"]["X-Gpufinops-Signature"], req["body"]
    assert webhook.verify_signature(SECRET.encode(), ts, body, sig)
    assert not webhook.verify_signature(SECRET.encode(), ts, body.replace(b"vision", b"nlp"), sig)
    assert not webhook.verify_signature(b"another secret", ts, body, sig)
    assert not webhook.verify_signature(SECRET.encode(), ts, body, sig, now=int(ts) + 3600)  # replayed later
    assert not signature_ok(req, "another secret")


def test_a_receiver_that_stays_down_fails_the_batch_and_the_next_push_retries_it(tmp_path, feed_warehouse, receiver):
    target = receiver([503] * 3)
    cfg = config_for(tmp_path, feed_warehouse, hook(target.url, "max_attempts = 3"))
    waits: list[float] = []
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=waits.append) == 0
    assert len(target.requests) == 3 and waits == sorted(waits) and waits[1] > waits[0]  # exponential backoff
    [(status, attempts, http_status, _ids, error)] = deliveries(feed_warehouse)
    assert (status, attempts, http_status) == ("failed", 3, 503) and "503" in error
    # the receiver is back: the same batch (same delivery id) goes out, and is then recorded delivered
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=waits.append) == len(realistic_recommendations())
    assert len({r["headers"]["X-Gpufinops-Delivery"] for r in target.requests}) == 1
    [(status, attempts, *_)] = deliveries(feed_warehouse)
    assert (status, attempts) == ("delivered", 4)


def test_a_4xx_is_not_retried_and_a_refused_connection_is(tmp_path, feed_warehouse, receiver):
    target = receiver([400])
    cfg = config_for(tmp_path, feed_warehouse, hook(target.url))
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=lambda s: None) == 0
    assert len(target.requests) == 1
    assert deliveries(feed_warehouse)[0][:3] == ("failed", 1, 400)

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/hook?token={SECRET}"
    cfg = config_for(tmp_path, feed_warehouse, hook(dead, "max_attempts = 2"))
    attempts: list[float] = []
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=attempts.append) == 0
    assert len(attempts) == 1
    row = query(
        feed_warehouse, "SELECT status, attempts, http_status, error FROM webhook_deliveries WHERE url = ?", [dead]
    )
    assert row[0][:3] == ("failed", 2, None) and "Connection" in row[0][3] and SECRET not in row[0][3]


def test_webhook_scope_and_missing_secret(tmp_path, feed_warehouse, receiver):
    """A webhook limited to teams and kinds gets only those; dismissed findings are never pushed."""
    dismissed = next(r for r in realistic_recommendations() if r.team == "vision" and r.kind == "idle_gpu")
    with db.writer(feed_warehouse) as con:
        recommendation_store.record_decision(con, dismissed.id, "dismiss", "already stopped", "test")
    target = receiver()
    cfg = config_for(tmp_path, feed_warehouse, hook(target.url, 'teams = ["vision"]\nkinds = ["spot_mix", "idle_gpu"]'))
    with pytest.raises(
        ConfigError, match=r"api.webhooks\[0\].secret_env: environment variable GPUFINOPS_WEBHOOK_SECRET"
    ):
        webhook.push_new_recommendations(cfg, environ={})
    assert target.requests == []
    expected = {
        r.id
        for r in realistic_recommendations()
        if r.team == "vision" and r.kind in ("spot_mix", "idle_gpu") and r.id != dismissed.id
    }
    assert expected
    assert webhook.push_new_recommendations(cfg, environ=ENV, sleep=lambda s: None) == len(expected)
    assert {o["id"] for o in json.loads(target.requests[0]["body"])["recommendations"]} == expected
