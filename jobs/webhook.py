"""Push new recommendations to the webhooks of ``[[api.webhooks]]``, signed, retried, recorded.

Each webhook gets, in batches, every recommendation no delivered batch has carried to it yet
(dismissed ones never). A POST's body is JSON ``{"event": "recommendations", "delivery_id", "sent_at",
"recommendations": [objects as in docs/models.md, *The recommendation object*]}``, with headers

- ``X-Gpufinops-Timestamp``: Unix seconds when the attempt was signed;
- ``X-Gpufinops-Signature``: ``sha256=`` + hex HMAC-SHA256(secret, timestamp + "." + raw body);
- ``X-Gpufinops-Delivery``: the batch's id (the same on every retry of the same recommendations).

A receiver recomputes the HMAC over the raw body, compares in constant time and refuses a timestamp
older than a few minutes (a replay); ``verify_signature`` does exactly that. A 5xx, 408, 429 or a
connection error is retried with exponential backoff; another 4xx, or a 3xx (never followed: a
redirect would turn the POST into a GET; the error names its Location), fails the batch at once. Every
attempt is written to ``webhook_deliveries`` (one row per batch: attempts, status, HTTP status,
error), so a delivered batch is never sent again and a failed one is retried on the next push.
Delivery is at-least-once: a receiver dedupes on ``X-Gpufinops-Delivery``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from gpufinops.ingest.core.scrub import scrub
from gpufinops.jobs.api_settings import ApiWebhook
from gpufinops.jobs.config import Config, ConfigError

log = logging.getLogger("gpufinops.webhook")

SIGNATURE_HEADER = "X-Gpufinops-Signature"
TIMESTAMP_HEADER = "X-Gpufinops-Timestamp"
DELIVERY_HEADER = "X-Gpufinops-Delivery"
RETRY_STATUSES = {408, 429}
BACKOFF_BASE_S, BACKOFF_MAX_S = 1.0, 60.0


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def verify_signature(
    secret: bytes, timestamp: str, body: bytes, signature: str, *, tolerance_s: float = 300, now: float | None = None
) -> bool:
    """For receivers: the signature matches and the timestamp is recent (no replay of an old push)."""
    try:
        age = (time.time() if now is None else now) - int(timestamp)
    except (TypeError, ValueError):
        return False
    return abs(age) <= tolerance_s and hmac.compare_digest(sign(secret, timestamp, body), signature or "")


class _Attempt:
    """The outcome of one POST: delivered, retryable, or failed for good."""

    def __init__(self, http_status: int | None, error: str | None) -> None:
        self.http_status, self.error = http_status, error

    @property
    def delivered(self) -> bool:
        return self.http_status is not None and 200 <= self.http_status < 300

    @property
    def retryable(self) -> bool:
        return self.http_status is None or self.http_status >= 500 or self.http_status in RETRY_STATUSES


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: urllib would turn the POST into a GET (a login page answers 200 to
    it), and the receiver never sees the notification. A 3xx is a failure naming its Location."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> _Attempt:
    """One POST; delivered only on a 2xx to the POST itself (no redirect followed)."""
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            response.read(65536)  # the answer in full within the timeout (a receiver that stalls after 200 fails)
            status = response.status
            if 200 <= status < 300:
                return _Attempt(status, None)
            return _Attempt(status, f"HTTP {status}: not a 2xx answer")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            location = exc.headers.get("Location") if exc.headers else None
            return _Attempt(
                exc.code,
                f"HTTP {exc.code} {exc.reason}: redirected to {location or '(no Location)'}; not followed "
                f"(a redirect turns the POST into a GET): configure the final URL",
            )
        return _Attempt(exc.code, f"HTTP {exc.code} {exc.reason}")
    except (urllib.error.URLError, OSError) as exc:  # refused, reset, timed out, DNS
        reason = getattr(exc, "reason", exc)
        return _Attempt(None, f"{type(reason).__name__}: {reason}")


def _delivery_id(url: str, ids: list[str]) -> str:
    return "whd-" + hashlib.sha256("\n".join([url, *sorted(ids)]).encode()).hexdigest()[:24]


def _record(
    cfg: Config, delivery_id: str, url: str, body: bytes, ids: list[str], status: str, attempt: _Attempt | None
) -> None:
    """Upsert the batch's row after each attempt, on a short-lived writer."""
    from gpufinops.warehouse import db

    error = scrub(attempt.error, cfg.secrets()) if attempt and attempt.error else None  # never a secret stored
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            found = con.execute(
                "SELECT attempts FROM webhook_deliveries WHERE delivery_id = ?", [delivery_id]
            ).fetchall()
            attempts = (found[0][0] if found else 0) + (1 if attempt else 0)
            con.execute("DELETE FROM webhook_deliveries WHERE delivery_id = ?", [delivery_id])
            con.execute(
                "INSERT INTO webhook_deliveries VALUES (?, ?, ?, ?, ?, ?, now(), ?, ?)",
                [
                    delivery_id,
                    url,
                    hashlib.sha256(body).hexdigest(),
                    json.dumps(ids),
                    status,
                    attempts,
                    attempt.http_status if attempt else None,
                    error,
                ],
            )
            con.execute("COMMIT")
        except BaseException:
            db.rollback(con)
            raise


def _deliver(
    cfg: Config, hook: ApiWebhook, secret: bytes, recs: list[dict[str, Any]], sleep: Callable[[float], None]
) -> bool:
    """One batch to one webhook, with retries; True when the receiver accepted it."""
    url = hook.url
    ids = [r["id"] for r in recs]
    delivery_id = _delivery_id(url, ids)
    body = json.dumps(
        {
            "event": "recommendations",
            "delivery_id": delivery_id,
            "sent_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "recommendations": recs,
        },
        separators=(",", ":"),
    ).encode()
    where = urlsplit(url).netloc  # never log the path or query: some webhook URLs embed a secret
    max_attempts = hook.max_attempts
    for number in range(1, max_attempts + 1):
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "gpufinops-webhook/1",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(secret, timestamp, body),
            DELIVERY_HEADER: delivery_id,
        }
        attempt = _post(url, body, headers, hook.timeout_s)
        final = attempt.delivered or not attempt.retryable or number == max_attempts
        status = "delivered" if attempt.delivered else ("failed" if final else "retrying")
        _record(cfg, delivery_id, url, body, ids, status, attempt)
        if attempt.delivered:
            log.info("webhook %s: delivered %d recommendations (%s)", where, len(ids), delivery_id)
            return True
        log.warning("webhook %s: attempt %d/%d failed: %s", where, number, max_attempts, attempt.error)
        if final:
            return False
        sleep(min(BACKOFF_BASE_S * 2 ** (number - 1), BACKOFF_MAX_S))
    return False


def push_new_recommendations(
    cfg: Config, *, environ: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Send every configured webhook the recommendations it has not received; returns how many
    recommendations were delivered (summed over webhooks). Raises ConfigError for a missing secret."""
    from gpufinops.warehouse import db, queries, recommendation_read

    env: Mapping[str, str] = os.environ if environ is None else environ
    delivered = 0
    for i, hook in enumerate(cfg.api.webhooks):
        secret = env.get(hook.secret_env, "")
        if not secret:
            raise ConfigError(f"api.webhooks[{i}].secret_env: environment variable {hook.secret_env} is not set")
        with db.reader(cfg.warehouse_path) as con:
            pending = recommendation_read.objects(
                queries.undelivered_recommendations(
                    con,
                    hook.url,
                    team=None if hook.teams is None else list(hook.teams),
                    kinds=None if hook.kinds is None else list(hook.kinds),
                )
            )
        size = hook.batch_size
        for start in range(0, len(pending), size):
            batch = pending[start : start + size]
            if not _deliver(cfg, hook, secret.encode(), batch, sleep):
                break  # the receiver is down: the rest waits for the next push, in order
            delivered += len(batch)
    return delivered
