"""One bounded transport for every network read: a connect timeout, a total deadline per request, a body
size limit; the listing bounds (pages, time, a token seen before) are ``ingest.core.paging``.

Every HTTP request of every source goes through :func:`request`: plain HTTP (the exporters, Prometheus,
the spot advisor feed) directly, boto3 through a ``before-send`` hook and the google-cloud clients
through a ``requests`` adapter (``ingest.core.transport_sdk``; an Azure SDK takes the same adapter
as its ``RequestsTransport`` session). The deadline covers the whole request (connecting, the headers
and every byte of the body), not each read: a watchdog shuts the socket down when it passes, so a body
that trickles a line every half second, or a server that stalls after its headers, is cut at the
deadline. Tripping a bound is one sentence naming the source, the call and the bound
(docs/sources/loads.md#network-bounds). A spec declares its network reads (``Transport``) so the
conformance suite drives it through loopback servers that misbehave.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.client
import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from gpufinops.ingest.core.bounds import DEFAULT as DEFAULT  # re-exported: the bounds beside their enforcement
from gpufinops.ingest.core.bounds import Bounds as Bounds
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.spec import TransportOptions

log = logging.getLogger(__name__)
CHUNK = 65_536

_RUNNING: contextvars.ContextVar[Bounds] = contextvars.ContextVar("bounds", default=DEFAULT)


def current() -> Bounds:
    """The bounds of the source running now (the runner sets them from its options), else the defaults."""
    return _RUNNING.get()


@contextlib.contextmanager
def running(options: Any) -> Any:
    """While a source runs, its own bounds are the ones every listing and request it makes reads."""
    token = _RUNNING.set(options.bounds() if isinstance(options, TransportOptions) else DEFAULT)
    try:
        yield
    finally:
        _RUNNING.reset(token)


class BoundTripped(IngestError):
    """A network read stopped at one of its bounds: the sentence names the source, the call and the bound."""

    def __init__(self, sentence: str, bound: str) -> None:
        super().__init__(sentence)
        self.bound = bound  # the option that set it: timeout_s, max_body_mb, max_pages, max_listing_s, …


@dataclass
class Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    url: str


class _Sockets:
    """The sockets one request opened (redirects open more), shut down when the deadline passes."""

    def __init__(self) -> None:
        self.open: list[socket.socket] = []
        self.cut = False
        self._lock = threading.Lock()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self.open.append(sock)
            if self.cut:
                _shut(sock)

    def shut_all(self) -> None:
        with self._lock:
            self.cut = True
            for sock in self.open:
                _shut(sock)

    def settimeout(self, seconds: float) -> None:
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.settimeout(max(seconds, 0.001))


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _connection(base: type[http.client.HTTPConnection], sockets: _Sockets) -> Any:
    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    return Connection


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, sockets: _Sockets) -> None:
        super().__init__()
        self._class = _connection(http.client.HTTPConnection, sockets)

    def http_open(self, req: Any) -> Any:
        return self.do_open(self._class, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, sockets: _Sockets, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(context=tls)
        self._class = _connection(http.client.HTTPSConnection, sockets)

    def https_open(self, req: Any) -> Any:
        return self.do_open(self._class, req, context=getattr(self, "_context", None))


def deadline_sentence(source: str, what: str, bounds: Bounds) -> str:
    source = f"{source}: " if source else ""  # the runner names the source where a client does not know it
    return f"{source}{what} did not finish within its {bounds.timeout_s:g} s deadline (timeout_s); stopped"


def body_sentence(source: str, what: str, bounds: Bounds) -> str:
    source = f"{source}: " if source else ""
    return f"{source}{what} answered a body over {bounds.max_body_mb:g} MiB (max_body_mb); stopped"


def request(
    source: str,
    what: str,
    method: str,
    url: str,
    bounds: Bounds,
    headers: dict[str, str] | None = None,
    data: bytes | None = None,
    tls: ssl.SSLContext | None = None,
) -> Answer:
    """One request within ``bounds``: any status is answered (the caller decides what a 5xx means);
    a connection failure raises ``OSError``; a bound raises :class:`BoundTripped`. ``tls``: the SDK's own
    certificate check (boto3's ``AWS_CA_BUNDLE`` / ``verify``); a proxy comes from ``HTTPS_PROXY``."""
    sockets = _Sockets()
    opener = urllib.request.build_opener(_HTTPHandler(sockets), _HTTPSHandler(sockets, tls))
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    started = time.monotonic()
    watchdog = threading.Timer(bounds.timeout_s, sockets.shut_all)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            response = opener.open(req, timeout=min(bounds.connect_timeout_s, bounds.timeout_s))
        except urllib.error.HTTPError as exc:  # a status is an answer, read like any other
            response = exc
        with contextlib.closing(response):
            return _read(source, what, response, bounds, sockets, started)
    except (OSError, http.client.HTTPException) as exc:
        if sockets.cut or time.monotonic() - started >= bounds.timeout_s * 0.99:
            raise BoundTripped(deadline_sentence(source, what, bounds), "timeout_s") from None
        if isinstance(exc, http.client.HTTPException):
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
        raise
    finally:
        watchdog.cancel()


RETRY_STATUS = (429, 500, 502, 503, 504)


def get_retried(source: str, url: str, bounds: Bounds, headers: dict[str, str], retries: int) -> Answer:
    """A 2xx answer to one GET within ``bounds``, retried ``retries`` times on 429/5xx and failed connections
    (waiting 0.5 s, then twice as long each time); a bound tripped is not retried. Anything else ends the run
    in one sentence naming the URL without its query (where a SAS token or a key would be)."""
    shown = url.split("?", 1)[0]
    delay = 0.5
    for attempt in range(retries + 1):
        last = attempt == retries
        try:
            answer = request(source, f"GET {shown}", "GET", url, bounds, headers)
        except OSError as exc:
            if last:
                raise IngestError(f"{source}: {shown} did not answer: {getattr(exc, 'reason', None) or exc}") from None
        else:
            if 200 <= answer.status < 300:
                return answer
            if answer.status not in RETRY_STATUS or last:
                detail = answer.body[:2000].decode("utf-8", "replace").strip().replace("\n", " ").replace("\r", " ")
                raise IngestError(f"{source}: {shown} answered HTTP {answer.status}: {detail[:300]}")
        log.info("%s: GET %s: attempt %d failed, retrying in %.1f s", source, shown, attempt + 1, delay)
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _read(source: str, what: str, response: Any, bounds: Bounds, sockets: _Sockets, started: float) -> Answer:
    status = int(getattr(response, "status", None) or response.code)
    headers = list(response.headers.items())
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > bounds.max_body_bytes:
        raise BoundTripped(body_sentence(source, what, bounds), "max_body_mb")
    raw = getattr(response, "fp", None) if isinstance(response, urllib.error.HTTPError) else response
    chunks: list[bytes] = []
    size = 0
    while raw is not None:
        left = bounds.timeout_s - (time.monotonic() - started)
        if left <= 0 or sockets.cut:
            raise BoundTripped(deadline_sentence(source, what, bounds), "timeout_s")
        sockets.settimeout(left)
        chunk = raw.read1(CHUNK) if hasattr(raw, "read1") else raw.read(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > bounds.max_body_bytes:
            raise BoundTripped(body_sentence(source, what, bounds), "max_body_mb")
        chunks.append(chunk)
    if sockets.cut:  # the watchdog's shutdown reads as the body's end
        raise BoundTripped(deadline_sentence(source, what, bounds), "timeout_s")
    reason = str(getattr(response, "reason", "") or getattr(response, "msg", ""))
    return Answer(status, reason, headers, b"".join(chunks), str(getattr(response, "url", "")))
