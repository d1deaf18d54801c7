"""Loopback AWS endpoints for the tests: moto's S3 server, and a small server speaking the real wire
protocols of EC2 (Query API, XML responses) and the Pricing API (AWSPriceListService JSON 1.1) that
serves the recorded real responses in ``tests/data/aws/ec2-instance-selector/``.

boto3 reaches both through ``endpoint_url``; credentials are dummies set in the environment.
The EC2/Pricing server paginates (``NextToken``), can answer the first requests of an action with
throttling errors, and records every request for the tests to inspect.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

import pytest

from tests.conftest import free_port
from tests.http_loopback import LoopbackHttp, QuietHandler

FIXTURES = Path(__file__).parent / "data" / "aws" / "ec2-instance-selector"
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def dummy_credentials_for_the_session() -> None:
    """The dummy credentials in the environment for the rest of the process (conformance inputs built
    outside any one test); dummies only: these tests never reach AWS."""
    os.environ.update(DUMMY_CREDENTIALS)


def use_dummy_credentials(monkeypatch) -> None:
    for name, value in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """A moto server on a free loopback port; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        reset_moto(endpoint)  # moto keeps its backends per process: every server starts empty
        yield endpoint
    finally:
        reset_moto(endpoint)
        server.stop()


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server for the test module (a fixture: tests/conftest.py lists this module as a plugin)."""
    with moto_s3() as endpoint:
        yield endpoint


def empty_s3(endpoint: str, monkeypatch) -> str:
    """The moto server at ``endpoint`` emptied, with the dummy credentials set: each test's S3 starts bare."""
    use_dummy_credentials(monkeypatch)
    reset_moto(endpoint)
    return endpoint


def reset_moto(endpoint: str) -> None:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10).read()


def upload_tree(endpoint: str, bucket: str, prefix: str, root: Path) -> list[str]:
    """Create ``bucket`` and upload every file under ``root`` to ``prefix/<relative path>``."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    keys = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        key = "/".join(p for p in (prefix.strip("/"), path.relative_to(root).as_posix()) if p)
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    return keys


# ---- EC2 Query / XML and AWSPriceListService JSON 1.1 --------------------------------------------


def _ec2_model():
    import botocore.session

    return botocore.session.get_session().get_service_model("ec2")


def _xml(shape, value) -> str:
    """Serialise a boto3-shaped value as EC2 response XML, using the botocore model's locationNames."""
    kind = shape.type_name
    if kind == "structure":
        out = []
        for name, member in shape.members.items():
            if name in value and value[name] is not None:
                tag = member.serialization.get("name", name[0].lower() + name[1:])
                out.append(f"<{tag}>{_xml(member, value[name])}</{tag}>")
        return "".join(out)
    if kind == "list":
        tag = shape.member.serialization.get("name", "item")
        return "".join(f"<{tag}>{_xml(shape.member, v)}</{tag}>" for v in value)
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "timestamp":
        return value if isinstance(value, str) else value.isoformat()
    return escape(str(value))


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class AwsApiServer(LoopbackHttp):
    """EC2 DescribeInstanceTypes / DescribeSpotPriceHistory and Pricing GetProducts on loopback."""

    def __init__(self, page_size: int = 100) -> None:
        self.page_size = page_size
        self.requests: list[dict] = []
        self.throttle: dict[str, int] = {}  # action -> how many of its next requests are throttled
        self.unavailable: set[str] = set()  # actions that always answer HTTP 503
        types = _load("DescribeInstanceTypes/t3_micro_and_p3_16xl.json")["InstanceTypes"]
        self.instance_types = types + _load("DescribeInstanceTypes/g2_2xlarge.json")["InstanceTypes"]
        self.spot_history = _load("DescribeSpotPriceHistory/m5_large.json")["SpotPriceHistory"]
        self.products = [_load("GetProducts/m5_large.json")]

    def __enter__(self) -> AwsApiServer:
        api = self
        model = _ec2_model()

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                target = self.headers.get("X-Amz-Target")
                if target:
                    api._pricing(self, target.split(".")[-1], json.loads(body or "{}"))
                else:
                    params = {k: v for k, v in parse_qs(body).items()}
                    api._ec2(self, model, params)

        self.serve(Handler)
        return self

    def _refuse(self, handler, protocol: str, action: str, params: Any) -> bool:
        """Record the request; True where it was answered with a throttle or an outage instead."""
        self.requests.append(
            {
                "protocol": protocol,
                "action": action,
                "params": params,
                "authorization": handler.headers.get("Authorization", ""),
            }
        )
        if action in self.unavailable:
            handler._send(503, "Service Unavailable", "text/plain")
            return True
        if self.throttle.get(action, 0) > 0:
            self.throttle[action] -= 1
            if protocol == "ec2":
                handler._send(
                    503,
                    "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit "
                    f"exceeded.</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>",
                    "text/xml",
                )
            else:
                handler._send(
                    400,
                    json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}),
                    "application/x-amz-json-1.1",
                )
            return True
        return False

    def _page(self, items: list, token: str | None) -> tuple[list, str | None]:
        start = int(token or 0)
        end = start + self.page_size
        return items[start:end], (str(end) if end < len(items) else None)

    def _ec2(self, handler, model, params: dict[str, list[str]]) -> None:
        action = params.get("Action", [""])[0]
        if self._refuse(handler, "ec2", action, params):
            return
        token = params.get("NextToken", [None])[0]
        if action == "DescribeInstanceTypes":
            items, next_token = self._page(self.instance_types, token)
            value: dict[str, Any] = {"InstanceTypes": items}
        elif action == "DescribeSpotPriceHistory":
            wanted = {v[0] for k, v in params.items() if k.startswith("InstanceType.")}
            points = [p for p in self.spot_history if not wanted or p["InstanceType"] in wanted]
            items, next_token = self._page(points, token)
            value = {"SpotPriceHistory": items}
        else:
            handler._send(
                400,
                f"<Response><Errors><Error><Code>InvalidAction</Code><Message>{escape(action)}"
                f"</Message></Error></Errors></Response>",
                "text/xml",
            )
            return
        if next_token:
            value["NextToken"] = next_token
        shape = model.operation_model(action).output_shape
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId>{_xml(shape, value)}</{action}Response>"
        )
        handler._send(200, xml, "text/xml;charset=UTF-8")

    def _pricing(self, handler, action: str, body: dict) -> None:
        if self._refuse(handler, "json", action, body):
            return
        if action != "GetProducts":
            handler._send(
                400,
                json.dumps({"__type": "InvalidParameterException", "message": action}),
                "application/x-amz-json-1.1",
            )
            return
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        matching = [
            p
            for p in self.products
            if all(p["product"]["attributes"].get(k, v) == v for k, v in filters.items() if k != "regionCode")
        ]
        items, next_token = self._page(matching, body.get("NextToken"))
        answer = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(p) for p in items]}
        if next_token:
            answer["NextToken"] = next_token
        handler._send(200, json.dumps(answer), "application/x-amz-json-1.1")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
