"""A loopback server speaking EC2's Query API (XML answers) from a script: each action's answers in order
(the last one repeats), so a test plants what a real service could answer — a size of ``NaN``, a disk of
99,999,999,999 GiB, a start time of ``yesterday``, the same ``nextToken`` on every page, a 503 — where
moto's own backends refuse to hold such values. S3's ListObjectsV2 answers an empty listing, CloudWatch
an empty GetMetricData. Every request is recorded (action, form)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs

from tests.http_loopback import QuietHandler, serving

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


def volume(volume_id: str = "vol-0a1", size: str = "100", created: str = "2026-11-01T00:00:00.000Z") -> str:
    return (
        f"<item><volumeId>{volume_id}</volumeId><size>{size}</size><availabilityZone>us-east-1a"
        f"</availabilityZone><status>available</status><createTime>{created}</createTime>"
        "<volumeType>gp3</volumeType><attachmentSet/></item>"
    )


def snapshot(snapshot_id: str = "snap-0b2", started: str = "2026-11-01T00:00:00.000Z", size: str = "100") -> str:
    return (
        f"<item><snapshotId>{snapshot_id}</snapshotId><volumeId>vol-0a1</volumeId><status>completed</status>"
        f"<startTime>{started}</startTime><volumeSize>{size}</volumeSize><ownerId>123456789012</ownerId></item>"
    )


def page(action: str, items: str = "", token: str | None = None) -> tuple[int, str]:
    """(200, the action's answer) with ``items`` in its set and ``token`` as its nextToken."""
    member = {"DescribeVolumes": "volumeSet", "DescribeSnapshots": "snapshotSet", "DescribeInstances": "reservationSet"}
    next_token = f"<nextToken>{token}</nextToken>" if token else ""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{EC2_NS}"><requestId>r-1</requestId>'
        f"<{member[action]}>{items}</{member[action]}>{next_token}</{action}Response>"
    )
    return 200, body


UNAVAILABLE = (
    503,
    '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>Unavailable</Code>'
    "<Message>The service is unavailable.</Message></Error></Errors><RequestID>r-2</RequestID></Response>",
)


@dataclass
class Script:
    answers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""

    def answer(self, action: str) -> tuple[int, str]:
        planned = self.answers.get(action) or [page(action)]
        seen = sum(1 for a in self.requests if a == action) - 1
        return planned[min(seen, len(planned) - 1)]


@contextlib.contextmanager
def serve(script: Script, tls: tuple[str, str] | None = None) -> Iterator[Script]:
    """The server on 127.0.0.1; ``tls`` (certificate file, key file): over HTTPS."""

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: str, content_type: str = "text/xml") -> None:
            super()._send(status, body, content_type)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            action = (form.get("Action") or [""])[0]
            script.requests.append(action)
            if action in ("DescribeVolumes", "DescribeSnapshots", "DescribeInstances"):
                self._send(*script.answer(action))
            else:  # CloudWatch (CBOR or query): nothing measured
                self._send(200, "", "application/cbor")

        def do_GET(self) -> None:  # noqa: N802  # S3 ListObjectsV2: an empty listing
            script.requests.append("ListObjectsV2")
            self._send(
                200,
                '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>'
                "<IsTruncated>false</IsTruncated></ListBucketResult>",
                "application/xml",
            )

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    script.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield script
