"""Where ``azure_cost_export`` finds export runs: an Azure Blob Storage container, or a local folder holding a
copy of one (``azcopy sync``), each listing objects relative to its root with a version tag.

Blob Storage is reached with ``azure-storage-blob`` (the ``azure`` extra): a connection string or a SAS token
from the environment variables the options name, else ``azure-identity``'s default credential chain (managed
identity, workload identity, the Azure CLI's login). Every request the SDK makes goes through the one bounded
transport (azure-core's ``RequestsTransport`` on ``ingest.core.transport_sdk.requests_session``: a connect
timeout, a total deadline, a body limit per request; the SDK downloads a blob in ranged requests of at most
32 MiB), List Blobs' ``NextMarker`` paging through ``ingest.core.paging`` (pages, listing time, a marker
answered before at any distance); 5xx and connection errors are retried by the SDK's ``ExponentialRetry``
(``retries``, ``initial_backoff_s``); no secret reaches a log or an error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpufinops.ingest.aws.aws_cur_store import LocalStore, StoredObject
from gpufinops.ingest.core import extras, paging, transport_sdk
from gpufinops.ingest.core.registry import IngestError

__all__ = ["BlobStore", "LocalStore", "StoredObject"]
MAX_OBJECT_BYTES = 8 * 1024**3  # one partition stays under 1 GB uncompressed; a far larger object is refused


class BlobStore:
    def __init__(self, source: str, container: Any, url: str, prefix: str = "") -> None:
        self.source, self.container, self.url = source, container, url
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.listed: dict[str, int] = {}  # blob name -> the size the listing gave (a download's bound)

    @classmethod
    def connect(cls, source: str, options: Any) -> BlobStore:
        """The container the options name, with the credential the environment gives."""
        try:
            from azure.storage.blob import ContainerClient
        except ImportError:  # the registry's extra check names the extra first
            raise IngestError(
                f"{source}: azure-storage-blob is not installed (pip install 'gpufinops[azure]')"
            ) from None
        timeouts = _bounded(source, options)
        connection = os.environ.get(options.connection_string_env or "")
        sas = os.environ.get(options.sas_token_env or "")
        if connection:
            client = ContainerClient.from_connection_string(connection, options.container, **timeouts)
        elif not options.account_url:
            raise IngestError(
                f"{source}: no account_url, and environment variable {options.connection_string_env} is not set"
            )
        elif sas:
            client = ContainerClient(options.account_url, options.container, credential=sas, **timeouts)
        else:
            identity = extras.require("azure.identity", "azure", f"{source}: Azure's default credential chain")
            credential = identity.DefaultAzureCredential()
            client = ContainerClient(options.account_url, options.container, credential=credential, **timeouts)
        url = f"{client.url.split('?', 1)[0].rstrip('/')}/{options.prefix.strip('/')}".rstrip("/")
        return cls(source, client, url, options.prefix)

    def name(self, key: str) -> str:
        return f"{self.url}/{key}"

    def list(self) -> list[StoredObject]:
        pages = paging.Pages(self.source, f"Blob Storage List Blobs of {self.url}")
        pager = self.container.list_blobs(name_starts_with=self.prefix, results_per_page=5000).by_page()
        out = []
        try:
            # each page counted, and its NextMarker checked against every marker this listing answered before
            for page in pages.each(pager, token_of=lambda _: getattr(pager, "continuation_token", None)):
                for blob in page:
                    key = blob.name[len(self.prefix) :]
                    self.listed[blob.name] = int(blob.size or 0)
                    modified = blob.last_modified.timestamp() if blob.last_modified else 0.0
                    out.append(StoredObject(key, int(blob.size or 0), str(blob.etag), modified))
        except IngestError:
            raise
        except Exception as exc:  # azure.core.exceptions.*: one sentence, never the credential
            raise IngestError(f"{self.source}: listing {self.url} failed: {_first_line(exc)}") from None
        return sorted(out, key=lambda o: o.key)

    def read(self, key: str) -> bytes:
        import io

        from gpufinops.ingest.core import transport

        try:
            downloader = self.container.download_blob(self.prefix + key)
            into = io.BytesIO()  # within the source's bounds: max_body_mb and the whole body's deadline
            what = f"Blob Storage Get Blob of {self.name(key)}"
            transport_sdk.bounded_stream(self.source, what, _Chunks(downloader.chunks()), into, transport.current())
            return into.getvalue()
        except IngestError:
            raise
        except Exception as exc:
            raise IngestError(f"{self.source}: object {self.name(key)} can not be read: {_first_line(exc)}") from None

    def local_file(self, key: str, scratch: Path) -> Path:
        from gpufinops.ingest.core import transport

        target = scratch / key
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            downloader = self.container.download_blob(self.prefix + key)
            if int(downloader.size or 0) > MAX_OBJECT_BYTES:
                raise IngestError(f"{self.source}: object {self.name(key)} is over {MAX_OBJECT_BYTES} bytes")
            # at most the listed size (else the size the service answered), and a deadline for the whole body
            listed = self.listed.get(self.prefix + key, int(downloader.size or 0))
            what = f"Blob Storage Get Blob of {self.name(key)}"
            transport_sdk.bounded_download(self.source, what, downloader.chunks(), target, transport.current(), listed)
        except IngestError:
            raise
        except Exception as exc:
            raise IngestError(f"{self.source}: object {self.name(key)} can not be read: {_first_line(exc)}") from None
        return target


class _Chunks:
    """An Azure downloader's ``chunks()`` as the ``read``/``close`` body :func:`bounded_stream` copies."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = chunks

    def read(self, _size: int) -> bytes:
        return next(self._chunks, b"")

    def close(self) -> None:
        return None


def _bounded(source: str, options: Any) -> dict[str, Any]:
    """The client's keyword arguments: its requests through the source's bounds, its retries as configured."""
    from azure.core.pipeline.transport import RequestsTransport
    from azure.storage.blob import ExponentialRetry

    session = transport_sdk.requests_session(source, options.bounds())
    retry = ExponentialRetry(
        initial_backoff=options.initial_backoff_s,
        retry_total=options.retries,
        random_jitter_range=min(3.0, options.initial_backoff_s),
    )
    return {"transport": RequestsTransport(session=session), "retry_policy": retry}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.split("sig=", 1)[0]  # a SAS signature never reaches a message
