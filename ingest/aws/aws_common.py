"""boto3 clients for the AWS ingestors: lazy import, timeouts, bounded retries, clean errors.

boto3 is imported only here and only when a client is made, so the dashboard and the local-directory
mode of ``aws_cur`` never need it. Every client sends through the bounded transport (``ingest.core.transport_sdk``: a connect timeout, a total
deadline per request, a body limit) with botocore's
``standard`` retry mode (exponential backoff with jitter on throttling — ``ThrottlingException``,
``RequestLimitExceeded``, ``SlowDown``, HTTP 429/503 — and transient errors), bounded by
``max_attempts``. Errors become one sentence naming the operation and the AWS error code; they
never carry credentials (botocore does not put them in messages, and the runner scrubs configured
secrets as well).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gpufinops.ingest.core import extras
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.spec import option
from gpufinops.ingest.core.transport import TransportOptions
from gpufinops.ingest.core.transport_sdk import bound_boto3

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5


SDK_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")


def quiet_sdk_logs() -> None:
    """botocore's DEBUG log prints signed request headers: keep the SDK's loggers at WARNING or above."""
    for name in SDK_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if sdk_logger.getEffectiveLevel() < logging.WARNING:
            sdk_logger.setLevel(logging.WARNING)


@dataclass(frozen=True, kw_only=True)
class AwsClientOptions(TransportOptions):
    """The options of every source calling an AWS API."""

    endpoint_url: str | None = option(None, "an S3/EC2/… compatible endpoint instead of AWS's (e.g. a local emulator)")
    max_attempts: int = option(MAX_ATTEMPTS, "attempts per AWS call (botocore's standard retry mode)")


def client(service: str, source: str, options: AwsClientOptions, region: str | None = None) -> Any:
    """A boto3 client for ``service`` with the source's ``endpoint_url``, ``max_attempts`` and region
    (``region``, else the source's own ``region`` option, else us-east-1)."""
    quiet_sdk_logs()
    try:
        import boto3
        from botocore.config import Config
    except ImportError:  # tests: test_extras.py hides boto3
        raise IngestError(f"{source}: " + extras.missing_message(f"calling AWS {service}", "boto3", "aws")) from None
    config = Config(
        connect_timeout=options.connect_timeout_s,
        read_timeout=options.timeout_s,
        retries={"mode": "standard", "max_attempts": options.max_attempts},
        user_agent_extra="gpufinops",
    )
    region = region or getattr(options, "region", None) or "us-east-1"
    session = boto3.session.Session()
    made = session.client(service, region_name=region, endpoint_url=options.endpoint_url, config=config)
    return bound_boto3(made, source, options.bounds())  # every call within the source's bounds


def server(client: Any) -> str:
    """The host a client calls (its ``endpoint_url``'s, else AWS's regional endpoint): an error names it."""
    url = str(getattr(client.meta, "endpoint_url", "") or "")
    return url.split("://", 1)[-1].split("/", 1)[0] or "AWS"


def call_name(client: Any, operation: str, region: str | None = None) -> str:
    """``ec2 DescribeVolumes at ec2.us-east-1.amazonaws.com``: the service, the call and the server."""
    service = client.meta.service_model.service_name
    return f"{service} {operation} at {server(client)}" + (f" ({region})" if region else "")


def unreadable_answer(source: str, what: str, exc: BaseException, body: bytes | None) -> IngestError:
    """One sentence for an answer botocore could not read (a size ``NaN``, a time ``yesterday``): the call,
    the object the value belongs to (the nearest ``…Id`` element before it in the answer) and the value."""
    import re

    detail = " ".join(str(exc).split())
    quoted = re.search(r"""['"]([^'"]{1,200})['"]""", detail)
    text = (body or b"").decode("utf-8", "replace")
    at = text.find(f">{quoted.group(1)}<") if quoted else -1
    if quoted is None or at < 0:
        return IngestError(f"{source}: {what}: an answer botocore can not read: {detail}")
    element = re.search(r"<(\w+)$", text[:at])
    item = text.rfind("<item>", 0, at)  # the object the value belongs to: its own first id element
    ids = re.findall(r"<(\w*[Ii]d)>([^<]{1,200})</\1>", text[item:at] if item >= 0 else text[:at])
    owner = f"{ids[0 if item >= 0 else -1][0]} {ids[0 if item >= 0 else -1][1]}: " if ids else ""
    name = element.group(1) if element else "a value"
    return IngestError(f"{source}: {what}: {owner}{name} {quoted.group(1)!r} is not readable ({detail})")


def describe_error(source: str, what: str, exc: BaseException) -> IngestError:
    """One sentence for a failed AWS call: the operation, the AWS error code and message."""
    code = message = None
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        code, message = error.get("Code"), error.get("Message")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code is None and status:
            code = f"HTTP {status}"
    if code is None and type(exc).__name__ == "ResponseParserError":
        code = "an unreadable response (the service may be unavailable)"
    text = f"{code}: {message}" if code and message else (code or f"{type(exc).__name__}: {exc}")
    operation = getattr(exc, "operation_name", None)
    what = what if not operation or operation in what else f"{what} ({operation})"
    return IngestError(f"{source}: {what} failed: {' '.join(str(text).split())}")


def is_client_error(exc: BaseException) -> bool:
    try:
        from botocore.exceptions import BotoCoreError, ClientError
        from botocore.parsers import ResponseParserError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (ClientError, BotoCoreError, ResponseParserError))
