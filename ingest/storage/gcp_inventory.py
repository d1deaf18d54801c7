"""The Google Cloud storage inventory: Persistent Disks, their snapshots and objects under configured GCS
prefixes (google-cloud-compute and google-cloud-storage, the ``[gcp-storage]`` extra), into the same rows
as the AWS inventory (``aws_inventory.Inventory``).

A disk records the instance it is attached to (``users``) and, unattached, the last one from the previous
inventory; GCP's own ``lastDetachTimestamp`` says since when. Every listing is paged through
``ingest.core.paging.Pages``; only configured prefixes are listed. Disk operations are not read yet (Cloud
Monitoring): a PD-SSD disk is withheld by storage_tier as unmeasured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from gpufinops.ingest.core.paging import Pages
from gpufinops.ingest.core.transport import DEFAULT, Bounds
from gpufinops.ingest.core.transport_sdk import bound_google
from gpufinops.ingest.storage.aws_inventory import Inventory
from gpufinops.ingest.storage.options import PrefixRule
from gpufinops.ingest.storage.prefix_groups import PrefixGroups

T = TypeVar("T")


@dataclass(frozen=True)
class GcpStorageOptions:
    project: str
    rules: tuple[PrefixRule, ...] = ()
    team_label_keys: tuple[str, ...] = ("team",)
    max_objects_per_prefix: int = 10_000_000
    bounds: Bounds = DEFAULT
    endpoint: str | None = None  # the server an error names (else Google's own API host)
    max_attempts: int = 5  # a 503 is retried as the source's own calls are, not for the client's 600 s
    initial_backoff_s: float = 1.0

    def retry(self) -> Any:
        """google-api-core's retry of a transient error (429, 5xx), within the attempts' backoff."""
        from google.api_core import retry

        waited = self.initial_backoff_s * (2 ** max(self.max_attempts - 1, 0) - 1)
        return retry.Retry(predicate=retry.if_transient_error, initial=self.initial_backoff_s, timeout=waited)

    def call(self, api: str, method: str) -> str:
        """``compute disks.aggregatedList at compute.googleapis.com``: the call and the server it asks."""
        host = (self.endpoint or "").split("://", 1)[-1].split("/", 1)[0] or f"{api}.googleapis.com"
        return f"{api} {method} at {host}"


@dataclass
class GcpClients:
    disks: Any  # compute_v1.DisksClient
    instances: Any  # compute_v1.InstancesClient
    snapshots: Any  # compute_v1.SnapshotsClient
    storage: Any  # storage.Client


def clients(
    endpoint: str | None = None,
    credentials: Any = None,
    project: str | None = None,
    source: str = "gcp_storage",
    bounds: Bounds = DEFAULT,
) -> GcpClients:
    """The SDK clients (an ``endpoint``: a loopback server or emulator, anonymous), every request within
    ``bounds`` (``ingest.core.transport_sdk.bound_google``)."""
    from gpufinops.ingest.core import extras
    from gpufinops.ingest.core.registry import IngestError

    try:
        import importlib

        from google.api_core.client_options import ClientOptions
        from google.cloud import compute_v1

        storage = importlib.import_module("google.cloud.storage")
    except ImportError:
        raise IngestError(
            extras.missing_message("the GCP storage inventory", "google.cloud.compute_v1", "gcp-storage")
        ) from None
    if endpoint and credentials is None:
        from google.auth.credentials import AnonymousCredentials

        credentials = AnonymousCredentials()
    opts = ClientOptions(api_endpoint=endpoint) if endpoint else None

    def make(cls: Any) -> Any:
        return bound_google(cls(credentials=credentials, client_options=opts, transport="rest"), source, bounds)

    return GcpClients(
        make(compute_v1.DisksClient),
        make(compute_v1.InstancesClient),
        make(compute_v1.SnapshotsClient),
        bound_google(storage.Client(project=project, credentials=credentials, client_options=opts), source, bounds),
    )


def _time(text: str | None, where: str = "", name: str = "a timestamp") -> datetime | None:
    """An RFC 3339 time of an answer; one that is not (``yesterday``) names ``where`` (call and object)."""
    from gpufinops.ingest.core.registry import IngestError

    try:
        return datetime.fromisoformat(text).astimezone(UTC) if text else None
    except ValueError:
        raise IngestError(f"{where}: {name} {text!r} is not an RFC 3339 time") from None


def _guarded(source: str, what: str, items: Callable[[], Iterable[T]]) -> Iterator[T]:
    """``items`` of one call; an answer the client can not read (a ``sizeGb`` of ``NaN``) or a refusal
    after the retries (a 503) is one sentence naming the source, the call with its server, and the field."""
    from gpufinops.ingest.core.registry import IngestError
    from gpufinops.ingest.gcp.gcp_common import describe_error, status_of

    try:
        yield from items()  # the first page is asked when the call is made: inside the guard
    except IngestError:
        raise
    except Exception as exc:
        cause = getattr(exc, "cause", None) or exc  # a RetryError: the last refusal it retried
        if status_of(cause) is not None:
            raise describe_error(source, what, cause) from None
        if type(exc).__name__ != "ParseError" and not isinstance(exc, ValueError):
            raise
        detail = " ".join(str(exc).split()).rstrip(".")
        # protobuf's 'Failed to parse …: Couldn't parse non-integer string: "NaN" at Disk….disks[0].sizeGb'
        found = re.search(r"([^:]+): (\S+) at \w+\.(\S+)$", detail)
        if found:
            detail = f"{found.group(3)}: value {found.group(2)} can not be read ({found.group(1).strip()})"
        raise IngestError(f"{source}: {what}: {detail}") from None


def _last(url: str | None) -> str | None:
    return url.rstrip("/").rsplit("/", 1)[-1] if url else None


def _team(labels: Any, keys: tuple[str, ...]) -> str | None:
    labels = dict(labels or {})
    return next((labels[k] for k in keys if labels.get(k)), None)


def _path(url: str) -> str:
    """``projects/p/zones/z/instances/n`` from a self link."""
    return url[url.index("projects/") :] if "projects/" in url else url


def _listed(source: str, what: str, client: Any, options: GcpStorageOptions) -> Any:
    """(zone, scoped list) of every page of an aggregatedList, each page's token checked (``Pages``)."""
    pages = Pages(source, what, bounds=options.bounds)
    for page in _guarded(
        source, what, lambda: pages.each(client.aggregated_list(project=options.project, retry=options.retry()).pages)
    ):
        yield from page.items.items()


def collect(
    source: str, c: GcpClients, options: GcpStorageOptions, now: datetime, previous: dict[str, dict] | None = None
) -> Inventory:
    inv = Inventory()
    previous = previous or {}
    types: dict[str, str] = {}
    for _zone, scoped in _listed(source, options.call("compute", "instances.aggregatedList"), c.instances, options):
        for inst in scoped.instances:
            types[_path(inst.self_link)] = _last(inst.machine_type) or ""
    disks = options.call("compute", "disks.aggregatedList")
    for zone, scoped in _listed(source, disks, c.disks, options):
        for disk in scoped.disks:
            disk_id = _path(disk.self_link)
            where = f"{source}: {disks}: disk {disk_id}"
            user = _path(disk.users[0]) if disk.users else None
            before = previous.get(disk_id, {})
            zone_name = _last(disk.zone) or zone.rsplit("/", 1)[-1]
            inv.volumes.append(
                {
                    "source": source,
                    "provider": "gcp",
                    "region": zone_name.rsplit("-", 1)[0],
                    "zone": zone_name,
                    "volume_id": disk_id,
                    "volume_type": _last(disk.type_),
                    "size_gib": float(disk.size_gb or 0),
                    "iops": float(disk.provisioned_iops) if disk.provisioned_iops else None,
                    "throughput_mibps": None,
                    "state": "in-use" if user else "available",
                    "attached_instance_id": user,
                    "last_instance_id": user or before.get("last_instance_id"),
                    "last_instance_type": types.get(user or "") if user else before.get("last_instance_type"),
                    "last_attached_at": _time(disk.last_attach_timestamp, where, "lastAttachTimestamp")
                    or before.get("last_attached_at"),
                    "detached_at": None
                    if user
                    else (
                        _time(disk.last_detach_timestamp, where, "lastDetachTimestamp")
                        or before.get("detached_at")
                        or now
                    ),
                    "created_at": _time(disk.creation_timestamp, where, "creationTimestamp"),
                    "team": _team(disk.labels, options.team_label_keys),
                    "tags": json.dumps(dict(disk.labels), sort_keys=True) if disk.labels else None,
                    "observed_at": now,
                }
            )
    listing = options.call("compute", "snapshots.list")
    pages = Pages(source, listing, bounds=options.bounds)
    for page in _guarded(
        source, listing, lambda: pages.each(c.snapshots.list(project=options.project, retry=options.retry()).pages)
    ):
        for snap in page.items:
            _snapshot(source, listing, snap, options, now, inv)
    for rule in options.rules:
        _prefix(source, c, rule, options, now, inv)
    return inv


def _snapshot(source: str, listing: str, snap: Any, options: GcpStorageOptions, now: datetime, inv: Inventory) -> None:
    where = f"{source}: {listing}: snapshot {_path(snap.self_link)}"
    inv.snapshots.append(
        {
            "source": source,
            "provider": "gcp",
            "region": None,
            "snapshot_id": _path(snap.self_link),
            "volume_id": _path(snap.source_disk) if snap.source_disk else None,
            "size_gib": float(snap.storage_bytes or 0) / 2**30 or float(snap.disk_size_gb or 0),
            "started_at": _time(snap.creation_timestamp, where, "creationTimestamp"),
            "team": _team(snap.labels, options.team_label_keys),
            "tags": json.dumps(dict(snap.labels), sort_keys=True) if snap.labels else None,
            "observed_at": now,
        }
    )


def _prefix(
    source: str, c: GcpClients, rule: PrefixRule, options: GcpStorageOptions, now: datetime, inv: Inventory
) -> None:
    folded = PrefixGroups(rule)
    access = "ok"
    listing = f"{options.call('storage', 'objects.list')} gs://{rule.bucket}/{rule.literal}"
    pages = Pages(source, listing, bounds=options.bounds)
    try:
        blobs = c.storage.list_blobs(rule.bucket, prefix=rule.literal)
        for page in pages.each(blobs.pages, lambda _page: blobs.next_page_token):
            for blob in page:
                if folded.holds(blob.name):
                    at = (blob.updated or blob.time_created).astimezone(UTC)
                    folded.add(blob.name, blob.storage_class, blob.size, at)
            if folded.seen >= options.max_objects_per_prefix:
                access = f"partial: listing stopped at {folded.seen} objects (max_objects_per_prefix)"
                break
    except Exception as exc:  # noqa: BLE001  # a prefix without access is named; the others are still listed
        from google.api_core import exceptions as gexc

        if not isinstance(exc, gexc.GoogleAPICallError):
            raise
        access = f"{source}: listing gs://{rule.bucket}/{rule.literal} failed: {exc.code} {exc.message}"
        folded.groups = {}
    inv.objects.extend(folded.rows(source, "gcp", access, now))
