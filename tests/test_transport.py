"""The bounded transport itself (ingest/core/transport.py), on real loopback servers (tests/hostile_servers.py):
the deadline is the whole request's, not each read's; a declared or streamed body past the limit is cut; a
status is an answer; the requests session an Azure or google-cloud client is given carries the same bounds."""

from __future__ import annotations

import socketserver
import threading
import time

import pytest

from gpufinops.ingest.core import transport
from gpufinops.ingest.core.bounds import Bounds
from gpufinops.ingest.core.transport_sdk import requests_session
from tests.hostile_servers import Hostile, serve

QUICK = Bounds(connect_timeout_s=1.0, timeout_s=1.2, max_body_mb=0.5)


def _timed(state: Hostile, bounds: Bounds = QUICK) -> tuple[str, float]:
    with serve(state) as server:
        started = time.monotonic()
        with pytest.raises(transport.BoundTripped) as tripped:
            transport.request("src", "GET /metrics", "GET", f"{server.url}/metrics", bounds)
        return str(tripped.value), time.monotonic() - started


def test_a_body_trickling_a_line_every_half_second_is_cut_at_the_deadline():
    error, elapsed = _timed(Hostile("endless"))
    assert error == "src: GET /metrics did not finish within its 1.2 s deadline (timeout_s); stopped"
    assert 1.2 <= elapsed < 1.9, elapsed  # each read waited less than 0.5 s: a per-read timeout never fires


def test_a_server_that_stalls_after_its_headers_is_cut_at_the_deadline():
    error, elapsed = _timed(Hostile("stall"))
    assert "(timeout_s)" in error and 1.2 <= elapsed < 1.9, (error, elapsed)


def test_a_body_past_the_limit_is_cut_whether_declared_or_streamed():
    error, elapsed = _timed(Hostile("huge"))
    assert error == "src: GET /metrics answered a body over 0.5 MiB (max_body_mb); stopped" and elapsed < 1.0
    declared, elapsed = _timed(Hostile("stall"), Bounds(timeout_s=5.0, max_body_mb=0.0005))  # Content-Length 1000
    assert "(max_body_mb)" in declared and elapsed < 1.0, (declared, elapsed)


def test_a_status_is_an_answer_the_caller_reads():
    with serve(Hostile("flaky", files={"/metrics": b"up 1\n"})) as server:
        first = transport.request("src", "GET", "GET", f"{server.url}/metrics", QUICK)
        second = transport.request("src", "GET", "GET", f"{server.url}/metrics", QUICK)
    assert (first.status, second.status, second.body) == (503, 200, b"up 1\n")


def test_the_session_an_sdk_is_given_carries_the_bounds():
    """What an Azure SDK's RequestsTransport(session=...) and the google-cloud clients send through."""
    session = requests_session("az", QUICK)
    with serve(Hostile("endless")) as server:
        started = time.monotonic()
        with pytest.raises(transport.BoundTripped, match=r"^az: GET http://127\.0\.0\.1:\d+/x did not finish"):
            session.get(f"{server.url}/x?sig=secret")
    assert time.monotonic() - started < 1.9


def test_an_answer_from_the_session_streams_as_an_azure_download_reads_it():
    """azure-core reads a download through ``iter_content`` (or ``raw``): the bounded answer must serve both."""
    body = bytes(range(256)) * 40
    with serve(Hostile("flaky", files={"/blob": body})) as server:
        session = requests_session("az", QUICK)
        assert session.get(f"{server.url}/blob").status_code == 503
        streamed = session.get(f"{server.url}/blob", stream=True)
        assert b"".join(streamed.iter_content(1000)) == body
        assert session.get(f"{server.url}/blob", stream=True).raw.read() == body


class _RecordingProxy(socketserver.ThreadingTCPServer):
    """A loopback forward proxy that records each request line it receives (a CONNECT for https, an absolute
    GET for http) and answers 502: enough to prove which requests the bounded transport sent it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.lines: list[str] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy.lines.append(self.rfile.readline().decode("latin-1").strip())
                while self.rfile.readline().strip():  # the headers
                    pass
                self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.mark.parametrize("scheme", ("https", "http"))
def test_the_bounded_transport_goes_through_the_configured_proxy(monkeypatch, scheme):
    """HTTPS_PROXY / HTTP_PROXY are honoured as by every HTTP client a user knows: an https request is a CONNECT
    to the proxy (the tunnel it refuses here), an http one an absolute-URL GET it answers."""
    proxy = _RecordingProxy()
    try:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv(f"{scheme.upper()}_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        url = f"{scheme}://prices.example.invalid:8443/api?x=1"
        try:
            answer = transport.request("src", "GET prices", "GET", url, Bounds(timeout_s=10))
            assert answer.status == 502
        except OSError:
            assert scheme == "https"  # the tunnel refused: the request never left for the origin
        expected = "CONNECT prices.example.invalid:8443" if scheme == "https" else f"GET {url}"
        assert [line.rsplit(" ", 1)[0] for line in proxy.lines] == [expected]  # less the HTTP version
    finally:
        proxy.shutdown()
        proxy.server_close()


class _Trickle:
    """A streamed body (botocore's ``StreamingBody`` shape) that answers one byte every 10 ms, forever: each
    read is quick, so only a deadline for the whole download ends it. A stand-in: no server here can be
    made to trickle below the per-read timeout quickly and deterministically."""

    def __init__(self) -> None:
        self.reads, self.closed = 0, False

    def read(self, _size: int) -> bytes:
        self.reads += 1
        time.sleep(0.01)
        return b"x"

    def close(self) -> None:
        self.closed = True


def test_a_download_that_trickles_is_cut_at_its_whole_deadline(tmp_path):
    from gpufinops.ingest.core.transport_sdk import bounded_download

    body, target = _Trickle(), tmp_path / "part-00001.snappy.parquet"
    bounds = Bounds(timeout_s=0.1)
    with pytest.raises(transport.BoundTripped) as tripped:
        bounded_download("cur", "S3 GetObject of s3://billing/part-00001.snappy.parquet", body, target, bounds, 10)
    assert tripped.value.bound == "timeout_s"
    sentence = str(tripped.value)
    assert sentence.startswith("cur: S3 GetObject of s3://billing/part-00001.snappy.parquet did not finish"), sentence
    assert "(timeout_s 0.1 s plus 65546 bytes at 1 MiB/s); stopped" in sentence, sentence
    assert 5 <= body.reads < 100 and body.closed
    assert not target.exists()  # nothing half-written is left for a loader


def test_a_download_is_read_whole_up_to_its_listed_size(tmp_path):
    from gpufinops.ingest.core.transport_sdk import DOWNLOAD_SLACK_BYTES, bounded_download

    target = tmp_path / "part"
    written = bounded_download("cur", "GetObject", iter([b"a" * 1000, b"b" * 24]), target, Bounds(max_body_mb=0), 1024)
    assert written == 1024 and target.read_bytes() == b"a" * 1000 + b"b" * 24
    longer = iter([b"a" * (1024 + DOWNLOAD_SLACK_BYTES), b"!"])
    with pytest.raises(transport.BoundTripped, match="longer than its listed size of 1024 bytes") as tripped:
        bounded_download("cur", "GetObject", longer, target, Bounds(), 1024)
    assert tripped.value.bound == "listed_size" and not target.exists()
