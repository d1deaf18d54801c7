"""The ``gcp_storage`` source: the Google Cloud storage inventory (``gcp_inventory``) as a registered ingestor.

Configured like every source (``[sources.NAME] type = "gcp_storage"``) and loaded by the same batches as
``aws_storage`` (``aws_source.batches``): the ledger, the storage tables' domains, one transaction, a second
run in the same hour over the same project skipped. Persistent Disks, snapshots and the objects under the
configured GCS prefixes only (the ``[gcp-storage]`` extra); disk operations are not read yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufinops.ingest.core import spec_facts
from gpufinops.ingest.core.registry import Extra, FetchResult, IngestContext, IngestorMeta, Transport
from gpufinops.ingest.core.spec import option
from gpufinops.ingest.gcp.gcp_common import GcpClientOptions
from gpufinops.ingest.storage import aws_source, doctor, gcp_inventory
from gpufinops.ingest.storage.options import PrefixRules

# table -> the call its rows come from (an error names it, with its server and the row)
GCP_CALLS = {
    "storage_volumes": "compute disks.aggregatedList",
    "storage_snapshots": "compute snapshots.list",
    "storage_objects": "storage objects.list",
}


@dataclass(frozen=True, kw_only=True)
class GcpStorageSourceOptions(PrefixRules, GcpClientOptions):
    project: str = option(doc="the project whose disks, snapshots and buckets are listed")
    prefixes: list[dict] = option([], "bucket prefixes to inventory: [{bucket, prefix, purpose, team}]")
    team_label_keys: list[str] = option(["team"], "labels that name a disk's or snapshot's team")
    max_objects_per_prefix: int = option(10_000_000, "objects listed under one prefix before it is recorded as partial")


class GcpStorage:
    meta = IngestorMeta(
        **spec_facts.STORAGE_INVENTORY,
        name="gcp_storage",
        default_schedule="40 5 * * *",
        options=GcpStorageSourceOptions,
        description="Google Cloud storage inventory: Persistent Disks, snapshots and objects under configured "
        "GCS prefixes",
        provider="gcp",
        extra=Extra(name="gcp-storage", unless=None),
        transport=Transport(client="google", endpoint="endpoint", paged=True, unless=None),
        doctor=doctor.gcp_storage,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        from gpufinops.ingest.gcp import gcp_common

        options: GcpStorageSourceOptions = ctx.options
        now = aws_source.inventory_hour()
        listing = gcp_inventory.GcpStorageOptions(
            project=options.project,
            rules=tuple(options.rules),
            team_label_keys=tuple(options.team_label_keys),
            max_objects_per_prefix=options.max_objects_per_prefix,
            bounds=options.bounds(),
            endpoint=options.endpoint,
            max_attempts=options.max_attempts,
            initial_backoff_s=options.initial_backoff_s,
        )
        credentials = gcp_common._credentials(ctx.source, options)
        clients = gcp_inventory.clients(options.endpoint, credentials, options.project, ctx.source, options.bounds())
        try:
            inv = gcp_inventory.collect(
                ctx.source, clients, listing, now, aws_source.previous_volumes(ctx.con, ctx.source)
            )
        except Exception as exc:  # an API error: one sentence, never a traceback with request data
            if gcp_common.status_of(exc) is None:
                raise
            raise gcp_common.describe_error(ctx.source, "the storage inventory", exc) from None
        where = aws_source.calls_at(GCP_CALLS, options.endpoint, "Google")
        return aws_source.loaded(ctx, inv, len(listing.rules), now, where)


INGESTORS = [GcpStorage]
