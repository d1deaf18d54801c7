"""The cloud SDKs' requests through the one bounded transport (``ingest.core.transport.request``).

- **boto3/botocore**: :func:`bound_boto3` registers a ``before-send`` handler on a client; it sends the
  signed request itself, within the source's bounds, and hands botocore the answer, so botocore's own
  retry mode still retries a 503 or a throttle. Calls whose output is a stream (S3 ``GetObject`` of a
  CUR file) keep botocore's sender, bounded per read by its ``read_timeout`` (the source's ``timeout_s``),
  and in all by the reader: :func:`bounded_stream` (into memory) or :func:`bounded_download` (to disk).
- **google-cloud clients** (BigQuery, Cloud Billing, Compute, Storage: all speak REST through a
  ``requests`` session): :func:`bound_google` mounts :class:`BoundedAdapter` on the client's session.
- **Azure SDKs**: azure-core's ``RequestsTransport(session=requests_session(source, bounds))`` takes
  the same adapter (:func:`requests_session`): a new Azure source passes it to its clients.
"""

from __future__ import annotations

import io
from typing import Any

from gpufinops.ingest.core.transport import Bounds, request


def _body(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    if hasattr(data, "read"):
        if hasattr(data, "seek"):
            data.seek(0)
        content = data.read()
        return content.encode() if isinstance(content, str) else content
    return bytes(data)


class _Raw:
    """What botocore's ``AWSResponse`` reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def bound_boto3(client: Any, source: str, bounds: Bounds) -> Any:
    """``client`` (a boto3 client) with its non-streaming calls sent within ``bounds``."""
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import EndpointConnectionError

    service = client.meta.service_model
    answers: dict[str, bytes] = {}
    client.meta.gpufinops_answers = answers
    tls = boto3_tls(client)  # AWS_CA_BUNDLE and the client's verify, as botocore's own sender honours them

    def send(request: Any, event_name: str = "", **_: Any) -> Any:
        operation = event_name.rsplit(".", 1)[-1]
        try:
            if service.operation_model(operation).has_streaming_output:
                return None  # botocore's sender streams it, bounded per read
        except Exception:  # noqa: BLE001  # an event name without an operation: botocore sends it
            return None
        host = request.url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
        what = f"{service.service_name} {operation} at {host}"  # a bound's sentence names the server
        try:
            answer = request_once(source, what, request, bounds, tls)
        except OSError as exc:
            raise EndpointConnectionError(endpoint_url=request.url, error=exc) from None
        answers[operation] = answer.body  # an answer botocore can not parse is quoted from (last_answer)
        return AWSResponse(request.url, answer.status, dict(answer.headers), _Raw(answer.body))

    client.meta.events.register("before-send", send)
    return client


def last_answer(client: Any, operation: str) -> bytes | None:
    """The body of ``operation``'s last answer through :func:`bound_boto3` (None: none, or not bounded)."""
    return getattr(client.meta, "gpufinops_answers", {}).get(operation)


def request_once(source: str, what: str, prepared: Any, bounds: Bounds, tls: Any = None) -> Any:
    headers = {str(k): v.decode() if isinstance(v, bytes) else str(v) for k, v in dict(prepared.headers).items()}
    return request(source, what, prepared.method, prepared.url, bounds, headers, _body(prepared.body), tls)


def boto3_tls(client: Any) -> Any:
    """The certificate check botocore would make (``AWS_CA_BUNDLE``, ``ca_bundle`` in the AWS config, a
    client's ``verify``) as an ``ssl`` context for the transport; None: the system's default."""
    import ssl

    verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", True)
    if verify is False:
        return ssl._create_unverified_context()  # noqa: S323  # the user's own verify=False
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return None


def _adapter_class() -> Any:
    import requests
    from requests.adapters import HTTPAdapter
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    class BoundedAdapter(HTTPAdapter):
        """A ``requests`` adapter sending every request through the bounded transport."""

        def __init__(self, source: str, bounds: Bounds) -> None:
            super().__init__()
            self.source, self.bounds = source, bounds

        def send(self, request: Any, stream: bool = False, timeout: Any = None, *args: Any, **kwargs: Any) -> Any:
            what = f"{request.method} {request.url.split('?', 1)[0]}"
            try:
                answer = request_once(self.source, what, request, self.bounds)
            except OSError as exc:
                raise requests.exceptions.ConnectionError(f"{what}: {exc}", request=request) from None
            response = requests.Response()
            response.status_code = answer.status
            response.reason = answer.reason
            response.headers = CaseInsensitiveDict(answer.headers)
            response.encoding = get_encoding_from_headers(response.headers)
            response._content = answer.body
            # read whole within the bounds: iter_content (an Azure SDK's download stream) and raw reads serve it
            response._content_consumed = True
            response.raw = io.BytesIO(answer.body)
            response.url = request.url
            response.request = request
            response.connection = self
            return response

    return BoundedAdapter


def requests_session(source: str, bounds: Bounds, session: Any = None) -> Any:
    """``session`` (a new ``requests.Session`` if None) with every request bounded (an Azure SDK's
    ``RequestsTransport(session=...)``, a google-cloud client's ``_http``)."""
    import requests

    session = session if session is not None else requests.Session()
    adapter = _adapter_class()(source, bounds)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def bound_google(client: Any, source: str, bounds: Bounds) -> Any:
    """``client`` (a google-cloud client) with its REST session's requests bounded."""
    transport = getattr(client, "_transport", None)
    session = getattr(transport, "_session", None) if transport is not None else None
    if session is None:
        session = client._http  # BigQuery and Storage: an AuthorizedSession made on first use
    requests_session(source, bounds, session)
    return client


def bounded_stream(source: str, what: str, body: Any, sink: Any, bounds: Bounds, chunk: int = 1 << 20) -> int:
    """Copy a streamed body (botocore's ``StreamingBody`` of an S3 ``GetObject``) into ``sink`` within
    ``bounds``: at most ``max_body_mb`` and ``timeout_s`` in all (each read is bounded by the client's own
    read timeout); the bytes copied. Tripping a bound is :class:`BoundTripped`, naming the call."""
    import time

    from gpufinops.ingest.core.transport import BoundTripped, body_sentence, deadline_sentence

    started, size = time.monotonic(), 0
    try:
        while data := body.read(chunk):
            size += len(data)
            if size > bounds.max_body_bytes:
                raise BoundTripped(body_sentence(source, what, bounds), "max_body_mb")
            if time.monotonic() - started > bounds.timeout_s:
                raise BoundTripped(deadline_sentence(source, what, bounds), "timeout_s")
            sink.write(data)
    finally:
        body.close()
    return size


DOWNLOAD_SLACK_BYTES = 65_536  # a body may run this far past its listed size (a listing is exact; this is margin)
FLOOR_BYTES_PER_S = 2**20  # a download's deadline: timeout_s, plus its allowed size at 1 MiB/s


def download_allowance(bounds: Bounds, listed_size: int | None) -> tuple[int, float]:
    """What a data file's download may take: its listed size (plus a small slack) when the listing gave
    one, else ``max_body_mb``; and ``timeout_s`` plus that many bytes at 1 MiB/s, so a large real part is
    read whole while a body that trickles is cut."""
    limit = max(listed_size, 0) + DOWNLOAD_SLACK_BYTES if listed_size is not None else bounds.max_body_bytes
    return limit, bounds.timeout_s + limit / FLOOR_BYTES_PER_S


def bounded_download(
    source: str, what: str, body: Any, path: Any, bounds: Bounds, listed_size: int | None, chunk: int = 1 << 20
) -> int:
    """Write a streamed body (botocore's ``StreamingBody``, or an iterator of chunks: an Azure downloader's
    ``chunks()``) into the file ``path`` within :func:`download_allowance`; the bytes written. Each read is
    bounded by the client's own read timeout; the whole download by the deadline. Tripping a bound is
    :class:`BoundTripped`, naming the source, the call and object, and the bound; the file is removed."""
    import time
    from pathlib import Path

    from gpufinops.ingest.core.transport import BoundTripped

    limit, deadline = download_allowance(bounds, listed_size)
    named = f"{source}: " if source else ""
    chunks = iter(lambda: body.read(chunk), b"") if hasattr(body, "read") else iter(body)
    started, size, target = time.monotonic(), 0, Path(path)
    try:
        with target.open("wb") as sink:
            for data in chunks:
                size += len(data)
                if size > limit:
                    raise BoundTripped(_over_sentence(named, what, bounds, listed_size), _over_bound(listed_size))
                if time.monotonic() - started > deadline:
                    raise BoundTripped(
                        f"{named}{what} did not finish within its {deadline:.6g} s deadline (timeout_s "
                        f"{bounds.timeout_s:g} s plus {limit} bytes at 1 MiB/s); stopped after {size} bytes",
                        "timeout_s",
                    )
                sink.write(data)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
    return size


def _over_sentence(named: str, what: str, bounds: Bounds, listed_size: int | None) -> str:
    if listed_size is None:
        return f"{named}{what} answered a body over {bounds.max_body_mb:g} MiB (max_body_mb); stopped"
    return f"{named}{what} answered a body longer than its listed size of {listed_size} bytes; stopped"


def _over_bound(listed_size: int | None) -> str:
    return "max_body_mb" if listed_size is None else "listed_size"
