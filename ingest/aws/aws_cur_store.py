"""Where ``aws_cur`` finds deliveries: an S3 bucket + prefix, or a local directory with the same layout.

Both stores speak in keys relative to their root (the prefix, or the directory), list objects with
a version tag (S3 ETag, or size + mtime) and hand back a local file for DuckDB to read: the local
store its own file, the S3 store a download into a scratch folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from gpufinops.ingest.aws import aws_common
from gpufinops.ingest.core import paging
from gpufinops.ingest.core.registry import IngestError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredObject:
    key: str  # relative to the store's root, '/'-separated
    size: int
    tag: str  # changes whenever the object's content does (ETag, or size:mtime)
    modified: float  # epoch seconds


class LocalStore:
    def __init__(self, source: str, root: Path) -> None:
        if not root.is_dir():
            raise IngestError(f"{source}: path {str(root)!r} is not a directory")
        self.source, self.root = source, root
        self.dangling: dict[str, str] = {}  # key -> target of a symlink whose target is missing

    def name(self, key: str) -> str:
        return str(self.root / key)

    def list(self) -> list[StoredObject]:
        out = []
        for dirpath, _, filenames in os.walk(self.root):
            for filename in filenames:
                path = Path(dirpath) / filename
                if path.is_symlink() and not path.exists():  # only an error if a manifest needs it
                    self.dangling[path.relative_to(self.root).as_posix()] = os.readlink(path)
                    log.warning(
                        "%s: %s is a symbolic link to %r, which does not exist", self.source, path, os.readlink(path)
                    )
                    continue
                st = path.stat()
                key = path.relative_to(self.root).as_posix()
                out.append(StoredObject(key, st.st_size, f"{st.st_size}:{st.st_mtime_ns}", st.st_mtime))
        return sorted(out, key=lambda o: o.key)

    def _dangling(self, key: str) -> None:
        if key in self.dangling:
            raise IngestError(
                f"{self.source}: object {self.name(key)} is a symbolic link to "
                f"{self.dangling[key]!r}, which does not exist"
            )

    def read(self, key: str) -> bytes:
        self._dangling(key)
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            raise IngestError(f"{self.source}: object {self.name(key)} does not exist") from None

    def local_file(self, key: str, scratch: Path) -> Path:
        self._dangling(key)
        path = self.root / key
        if not path.is_file():
            raise IngestError(f"{self.source}: object {self.name(key)} listed in the manifest does not exist")
        return path


class S3Store:
    def __init__(self, source: str, options: aws_common.AwsClientOptions, bucket: str, prefix: str = "") -> None:
        self.source = source
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = aws_common.client("s3", source, options)
        self.listed: dict[str, int] = {}  # full key -> the size the listing gave (a download's bound)

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def name(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._full(key)}"

    def list(self) -> list[StoredObject]:
        out = []
        start = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = paging.Pages(self.source, f"S3 ListObjectsV2 of s3://{self.bucket}/{start}")
            for page in pages.each(
                self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start)
            ):
                for item in page.get("Contents", []):
                    key = item["Key"][len(start) :]
                    self.listed[item["Key"]] = int(item["Size"])
                    out.append(
                        StoredObject(
                            key,
                            int(item["Size"]),
                            str(item.get("ETag", "")).strip('"'),
                            item["LastModified"].timestamp(),
                        )
                    )
        except Exception as exc:
            if aws_common.is_client_error(exc):
                raise aws_common.describe_error(self.source, f"listing s3://{self.bucket}/{start}", exc) from None
            raise
        return sorted(out, key=lambda o: o.key)

    def read(self, key: str) -> bytes:
        import io

        from gpufinops.ingest.core import transport
        from gpufinops.ingest.core.transport_sdk import bounded_stream

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"]
            into = io.BytesIO()  # read within the source's bounds: its size and its whole deadline
            bounded_stream(self.source, f"S3 GetObject of {self.name(key)}", body, into, transport.current())
            return into.getvalue()
        except Exception as exc:
            if aws_common.is_client_error(exc):
                raise aws_common.describe_error(self.source, f"reading object {self.name(key)}", exc) from None
            raise

    def local_file(self, key: str, scratch: Path) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        target = scratch / f"{digest}-{Path(key).name}"
        from gpufinops.ingest.core import transport
        from gpufinops.ingest.core.transport_sdk import bounded_download

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"]
            # within the source's bounds: at most the listed size, and a deadline for the whole body
            listed = self.listed.get(self._full(key))
            what = f"S3 GetObject of {self.name(key)}"
            bounded_download(self.source, what, body, target, transport.current(), listed)
        except Exception as exc:
            if aws_common.is_client_error(exc):
                code = getattr(exc, "response", {}).get("Error", {}).get("Code")
                if code in ("404", "NoSuchKey", "NotFound"):
                    raise IngestError(
                        f"{self.source}: object {self.name(key)} listed in the manifest does not exist"
                    ) from None
                raise aws_common.describe_error(self.source, f"downloading object {self.name(key)}", exc) from None
            raise
        log.debug("%s: downloaded %s (%d bytes)", self.source, self.name(key), target.stat().st_size)
        return target


# A key inside an export's own folder: its metadata/ (CUR 2.0, FOCUS) or a legacy report's period folder.
INSIDE_EXPORT = re.compile(r"^(?:metadata/BILLING_PERIOD=\d{4}-\d{2}/|\d{8}-\d{8}/)")


def from_export_folder(
    store: LocalStore | S3Store, prefix: str, objects: list[StoredObject]
) -> tuple[LocalStore | S3Store, str, list[StoredObject]]:
    """A prefix anywhere from the bucket root down to the export's own folder (``cur2/gpufinops-export``, what
    "the key prefix of the export" invites) finds its manifests: where the keys start inside an export, the store
    is re-rooted one folder up and every key keeps the export's folder name, as ``doctor`` already finds them."""
    if not any(INSIDE_EXPORT.match(o.key) for o in objects):
        return store, prefix, objects
    if isinstance(store, S3Store):
        if not prefix:
            return store, prefix, objects
        parent, _, folder = prefix.rpartition("/")
        store.prefix = prefix = parent
    else:
        folder = store.root.name
        store.root = store.root.parent
    return store, prefix, [dataclasses.replace(o, key=f"{folder}/{o.key}") for o in objects]
