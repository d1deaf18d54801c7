"""HTTP(S) and ``file://`` scraping for the Prometheus-format sources (``dcgm_exporter``, ``prometheus``):
targets expanded from URLs and globs, credentials in a URL sent as Basic auth and never shown, retries
with backoff on connection errors, 5xx and 429; every request within the source's bounds
(``ingest.core.transport``: ``timeout_s`` is the whole request's deadline, not each read's).
"""

from __future__ import annotations

import dataclasses
import glob
import io
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from typing import Any

from gpufinops.ingest.core import transport
from gpufinops.ingest.core.files import check_link
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.transport import Bounds

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 3


def expand_targets(source: str, targets: Any, base_dir: str | None) -> list[str]:
    """URLs as given; local paths and globs (relative to the config's folder) as sorted file:// URLs."""
    if isinstance(targets, str):
        targets = [targets]
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise IngestError(f"{source}: targets must be a non-empty list of URLs or paths")
    out: list[str] = []
    for target in targets:
        if "://" in target:
            out.append(target)
            continue
        full = os.path.expanduser(target)
        if base_dir and not os.path.isabs(full):
            full = os.path.join(base_dir, full)
        for path in glob.glob(full):
            check_link(source, path)
        matched = sorted({os.path.realpath(p): p for p in glob.glob(full) if os.path.isfile(p)}.values())
        if not matched:
            raise IngestError(f"{source}: target {target!r} matches no file")
        out += [urllib.parse.urljoin("file:", urllib.request.pathname2url(os.path.abspath(p))) for p in matched]
    return out


def display_url(url: str) -> str:
    """``url`` without its ``user:password@`` (what messages, logs and the ledger show)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _request(url: str) -> urllib.request.Request:
    """A GET for ``url``; credentials in the URL (``https://user:password@host/…``) become HTTP Basic auth."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": "text/plain; version=0.0.4"}
    if parts.username is not None:
        import base64

        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        host = parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return urllib.request.Request(url, headers=headers)


def fetch_text(url: str, *, timeout_s: float, retries: int, bounds: Bounds | None = None, source: str = "") -> str:
    """The body of ``url`` as text (see ``fetch_bytes``)."""
    return fetch_bytes(url, timeout_s=timeout_s, retries=retries, bounds=bounds, source=source).decode("utf-8")


def fetch_bytes(url: str, *, timeout_s: float, retries: int, bounds: Bounds | None = None, source: str = "") -> bytes:
    """The body of ``url`` within ``bounds`` (the running source's, ``timeout_s`` the whole request's
    deadline): retried with backoff on connection errors, 5xx and 429; raises the last error (an
    ``HTTPError`` for a status), or ``BoundTripped`` naming the bound."""
    bounds = dataclasses.replace(bounds or transport.current(), timeout_s=timeout_s)
    if url.startswith("file:"):
        return _file_bytes(url, bounds, source)
    delay, retries = 0.5, max(1, retries)  # at least the one request
    what = f"GET {display_url(url).split('?', 1)[0][:160]}"  # the call, not its (long) query
    for attempt in range(1, retries + 1):
        request = _request(url)
        try:
            answer = transport.request(source, what, "GET", request.full_url, bounds, dict(request.header_items()))
        except transport.BoundTripped as exc:  # a deadline passed: tried again (retries bound the whole)
            if exc.bound != "timeout_s" or attempt == retries:
                raise
            log.info("%s: %s; retrying in %.1f s", display_url(url), exc, delay)
        except (TimeoutError, ConnectionError, OSError) as exc:
            if attempt == retries:
                raise
            log.info("%s: %s; retrying in %.1f s", display_url(url), getattr(exc, "reason", exc), delay)
        else:
            if 200 <= answer.status < 300:
                return answer.body
            if answer.status < 500 and answer.status != 429 or attempt == retries:
                raise urllib.error.HTTPError(
                    display_url(url), answer.status, answer.reason, Message(), io.BytesIO(answer.body)
                )
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _file_bytes(url: str, bounds: Bounds, source: str) -> bytes:
    with urllib.request.urlopen(url) as response:
        body = response.read(bounds.max_body_bytes + 1)
    if len(body) > bounds.max_body_bytes:
        raise transport.BoundTripped(transport.body_sentence(source, f"reading {url}", bounds), "max_body_mb")
    return body
