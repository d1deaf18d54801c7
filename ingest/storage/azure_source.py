"""The ``azure_storage`` source: a subscription's managed disks and their snapshots, from Azure Resource Manager.

Three ARM listings, each followed through its ``nextLink`` by the one paging layer and read through the one
transport (a connect timeout, a total deadline, a body size limit: docs/sources/loads.md#network-bounds):
``Microsoft.Compute/virtualMachines`` (each VM's size, so a disk's VM is known to be GPU work),
``Microsoft.Compute/disks`` and ``Microsoft.Compute/snapshots``, into the same storage tables and through the
same checks as ``aws_storage`` (``aws_source.loaded``). A disk records the VM in its ``managedBy`` and,
unattached, the last one the previous inventory saw; its ``LastOwnershipUpdateTime`` (or the first inventory
that saw it unattached) is since when. Instance ids are lower-cased, as the FocusCost ResourceIds they meet.

The bearer token comes from the variable ``token_env`` names (``az account get-access-token --query accessToken
-o tsv``), else from ``azure-identity``'s default credential chain (the ``azure`` extra). Blob containers and disk
operations are not read yet: a Premium SSD is withheld by storage_tier as unmeasured.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from gpufinops.ingest.core import spec_facts
from gpufinops.ingest.core.registry import Extra, FetchResult, IngestContext, IngestError, IngestorMeta, Transport
from gpufinops.ingest.storage import aws_source, doctor
from gpufinops.ingest.storage.aws_inventory import Inventory
from gpufinops.ingest.storage.azure_arm import AzureStorageOptions, bearer_token, listing

AZURE_CALLS = {
    "storage_volumes": "ARM Microsoft.Compute/disks list",
    "storage_snapshots": "ARM Microsoft.Compute/snapshots list",
    "storage_objects": "ARM (no containers listed)",
    "storage_volume_ops_hourly": "ARM (no disk metrics read)",
    "storage_prefix_reads_daily": "ARM (no blob reads read)",
}


def _number(source: str, what: str, item: dict[str, Any], field: str) -> float | None:
    """A numeric property, or None where it is absent; anything else is refused naming the resource."""
    value = (item.get("properties") or {}).get(field)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    parts = str(item.get("id") or "").split("/")
    group = next((parts[i + 1] for i, p in enumerate(parts[:-1]) if p.lower() == "resourcegroups"), "?")
    raise IngestError(
        f"{source}: ARM {what} list: {str(item.get('name'))[:80]!r} (resource group {group[:90]}) {field} is "
        f"{json.dumps(value)[:80]}, not a finite number of 0 or more"
    )


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC) if value else None
    except ValueError:
        return None


def _team(item: dict[str, Any], keys: list[str]) -> str | None:
    tags = item.get("tags") or {}
    return next((str(tags[k]) for k in keys if isinstance(tags, dict) and tags.get(k)), None)


def volume_row(ctx: IngestContext, disk: dict[str, Any], sizes: dict[str, str], before: dict, now: datetime) -> dict:
    """One disk as a storage_volumes row; its last VM and since when it is unattached carried forward."""
    props = disk.get("properties") or {}
    attached = str(disk.get("managedBy") or "").lower() or None
    last = attached or before.get("last_instance_id")
    detached = None if attached else (_time(props.get("LastOwnershipUpdateTime")) or before.get("detached_at") or now)
    return {
        "source": ctx.source,
        "provider": "azure",
        "region": disk.get("location"),
        "zone": next(iter(disk.get("zones") or []), None),
        "volume_id": disk.get("id"),
        "volume_type": (disk.get("sku") or {}).get("name"),
        "size_gib": _number(ctx.source, "disks", disk, "diskSizeGB"),
        "iops": _number(ctx.source, "disks", disk, "diskIOPSReadWrite"),
        "throughput_mibps": _number(ctx.source, "disks", disk, "diskMBpsReadWrite"),
        "state": props.get("diskState"),
        "attached_instance_id": attached,
        "last_instance_id": last,
        "last_instance_type": sizes.get(last or "") or before.get("last_instance_type"),
        "last_attached_at": now if attached else before.get("last_attached_at"),
        "detached_at": detached,
        "created_at": _time(props.get("timeCreated")),
        "team": _team(disk, ctx.options.team_tag_keys),
        "tags": json.dumps(disk.get("tags") or {}, sort_keys=True),
        "observed_at": now,
    }


def snapshot_row(ctx: IngestContext, snap: dict[str, Any], now: datetime) -> dict:
    props = snap.get("properties") or {}
    return {
        "source": ctx.source,
        "provider": "azure",
        "region": snap.get("location"),
        "snapshot_id": snap.get("id"),
        "volume_id": (props.get("creationData") or {}).get("sourceResourceId"),
        "size_gib": _number(ctx.source, "snapshots", snap, "diskSizeGB"),
        "started_at": _time(props.get("timeCreated")),
        "team": _team(snap, ctx.options.team_tag_keys),
        "tags": json.dumps(snap.get("tags") or {}, sort_keys=True),
        "observed_at": now,
    }


class AzureStorage:
    meta = IngestorMeta(
        **spec_facts.STORAGE_INVENTORY,
        name="azure_storage",
        default_schedule="50 5 * * *",
        options=AzureStorageOptions,
        description="Azure storage inventory: a subscription's managed disks (their VM and its size) and snapshots "
        "from Azure Resource Manager",
        provider="azure",
        extra=Extra(name="azure", unless="token_env"),
        transport=Transport(client="http", endpoint="endpoint", paged=True, unless=None),
        doctor=doctor.azure_storage,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        now = aws_source.inventory_hour()
        source, options = ctx.source, ctx.options
        token = bearer_token(source, options)
        sizes = {
            str(vm.get("id") or "").lower(): str(
                ((vm.get("properties") or {}).get("hardwareProfile") or {}).get("vmSize")
            )
            for vm in listing(source, options, "virtualMachines", token)
        }
        before = aws_source.previous_volumes(ctx.con, ctx.source)
        inv = Inventory()
        inv.volumes = [
            volume_row(ctx, d, sizes, before.get(str(d.get("id")), {}), now)
            for d in listing(source, options, "disks", token)
        ]
        inv.snapshots = [snapshot_row(ctx, s, now) for s in listing(source, options, "snapshots", token)]
        host = ctx.options.endpoint.split("://", 1)[-1].split("/", 1)[0]
        return aws_source.loaded(ctx, inv, 0, now, {t: f"{call} at {host}" for t, call in AZURE_CALLS.items()})


INGESTORS = [AzureStorage]
