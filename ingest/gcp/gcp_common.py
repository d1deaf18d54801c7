"""Google Cloud clients for the GCP ingestors: lazy imports, endpoints, credentials, retries.

The SDKs (google-cloud-bigquery, google-cloud-billing) are imported here and only when a client is
made, so the dashboard and the file mode of ``gcp_billing_export`` never need them. With an
``endpoint`` (an emulator or a test server) the client is anonymous unless ``credentials_file`` is
set; without one it uses Application Default Credentials or ``credentials_file``. Every call is
retried on 429 / 5xx with exponential backoff, bounded by ``max_attempts``, and its errors become one
sentence naming the call. Every request goes through the bounded transport (``ingest.core.transport_sdk``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gpufinops.ingest.core import extras
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.spec import option
from gpufinops.ingest.core.transport import Bounds, BoundTripped, TransportOptions, deadline_sentence
from gpufinops.ingest.core.transport_sdk import bound_google

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
TIMEOUT_S = 120.0
RETRIED_STATUS = (429, 500, 502, 503, 504)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class GcpClientOptions(TransportOptions):
    """The options of every source calling a Google Cloud API."""

    endpoint: str | None = option(None, "an API endpoint instead of Google's (an emulator: anonymous credentials)")
    credentials_file: str | None = option(None, "a service account key file (default: Application Default Credentials)")
    max_attempts: int = option(MAX_ATTEMPTS, "attempts per API call (429, 5xx and connection errors are retried)")
    initial_backoff_s: float = option(INITIAL_BACKOFF_S, "the first wait between attempts, seconds (then doubled)")


def _credentials(source: str, options: GcpClientOptions) -> Any:
    path = options.credentials_file
    if path:
        try:
            from google.oauth2 import service_account
        except ImportError:
            raise IngestError(
                f"{source}: " + extras.missing_message("credentials_file", "google.auth", "gcp")
            ) from None
        try:
            return service_account.Credentials.from_service_account_file(str(path))
        except (OSError, ValueError) as exc:
            raise IngestError(f"{source}: credentials_file {path} can not be read ({type(exc).__name__})") from None
    if options.endpoint:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    return None  # Application Default Credentials


def client_options(options: GcpClientOptions) -> Any:
    from google.api_core.client_options import ClientOptions

    endpoint = options.endpoint
    return ClientOptions(api_endpoint=str(endpoint)) if endpoint else None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a google-api-core error (or None)."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    if status_of(exc) in RETRIED_STATUS:
        return True
    try:
        import requests

        return isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout))
    except ImportError:  # pragma: no cover
        return False


def with_retries(
    source: str,
    what: str,
    call: Callable[[], T],
    options: GcpClientOptions,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, retried on 429/5xx/connection errors with exponential backoff; one clear error at the end."""
    attempts = max(1, options.max_attempts)
    delay = options.initial_backoff_s
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except IngestError:
            raise
        except Exception as exc:
            if attempt < attempts and is_retryable(exc):
                log.warning(
                    "%s: %s: %s (attempt %d of %d), retrying in %.1fs",
                    source,
                    what,
                    status_of(exc) or type(exc).__name__,
                    attempt,
                    attempts,
                    delay,
                )
                sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
                continue
            raise describe_error(source, what, exc) from None
    raise AssertionError("unreachable")  # pragma: no cover


def describe_error(source: str, what: str, exc: BaseException) -> IngestError:
    status = status_of(exc)
    message = getattr(exc, "message", None) or str(exc)
    message = " ".join(str(message).split())[:300]
    prefix = f"HTTP {status}: " if status and not message.startswith(str(status)) else ""
    return IngestError(f"{source}: {what} failed: {prefix}{message or type(exc).__name__}")


def _google_cloud(source: str, what: str, module: str) -> Any:
    """``google.cloud.<module>``, or one sentence naming the source and the missing ``gcp`` extra."""
    try:
        return extras.require(f"google.cloud.{module}", "gcp", what)
    except ImportError as exc:  # tests: test_extras.py hides google
        raise IngestError(f"{source}: {exc}") from None


def bigquery_client(source: str, options: GcpClientOptions, project: str) -> Any:
    bigquery = _google_cloud(source, "reading BigQuery", "bigquery")
    made = bigquery.Client(
        project=project, credentials=_credentials(source, options), client_options=client_options(options)
    )
    return bound_google(made, source, options.bounds())


def catalog_client(source: str, options: GcpClientOptions) -> Any:
    billing_v1 = _google_cloud(source, "the Cloud Billing Catalog", "billing_v1")
    made = billing_v1.CloudCatalogClient(
        transport="rest", credentials=_credentials(source, options), client_options=client_options(options)
    )
    return bound_google(made, source, options.bounds())


def bounded_arrow(source: str, what: str, job: Any, bounds: Bounds, clock: Callable[[], float] = time.monotonic) -> Any:
    """A query job's whole result as one Arrow table, read page by page inside the source's bounds: every
    page request is bounded by the transport, and the read as a whole stops (one sentence naming the source,
    the call and the bound) when its Arrow outgrows ``max_body_mb`` or it passes ``timeout_s``, so a result
    of many small pages can neither fill memory nor run for ever (``job.to_arrow`` reads it whole)."""
    import pyarrow as pa

    started = clock()
    rows = job.result(timeout=min(TIMEOUT_S, bounds.timeout_s))
    batches, size = [], 0
    for batch in rows.to_arrow_iterable():
        size += batch.nbytes
        if size > bounds.max_body_bytes:
            raise BoundTripped(
                f"{source}: {what} read over {bounds.max_body_mb:g} MiB of rows (max_body_mb); stopped", "max_body_mb"
            )
        if clock() - started > bounds.timeout_s:
            raise BoundTripped(deadline_sentence(source, what, bounds), "timeout_s")
        batches.append(batch)
    return pa.Table.from_batches(batches) if batches else job.to_arrow(create_bqstorage_client=False)
