"""``gcp_catalog``: Cloud Billing Catalog API Compute Engine GPU prices → price tables.

Reads ``services/6F81-5844-456A/skus`` (google-cloud-billing ``CloudCatalogClient``, REST transport)
page by page (``nextPageToken``), every ``usageType`` (OnDemand, Preemptible = Spot, Commit1Yr/3Yr)
and every ``serviceRegions`` entry, in the ``currency`` asked for (``ListSkusRequest.currency_code``;
default the account's, USD for anonymous callers). Keeps the GPU SKUs and the vCPU/RAM SKUs of the
GPU machine families (a2, a3, g2). Writes:

* ``price_catalog``: one row per SKU × region × tier, exact DECIMAL, the answer's currency, ``flag``
  for a unit or currency not understood (kept, never converted);
* ``instance_types``: GPU machine types priced on demand (GPU + vCPU + RAM SKUs), USD only;
* ``spot_prices``: the machine types' Spot prices (USD), one point per price change;
* ``price_history``: every machine-type price (on_demand | spot | commit_1y | commit_3y) from its
  SKUs' ``effectiveTime``, per hour, in its currency.

A run replaces the regions' ``price_catalog`` and ``instance_types`` rows and adds the price points
not stored yet; a catalogue identical to the last one loaded is skipped. ``outputs`` limits the
tables written (default all four).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from gpufinops.ingest.core import paging, registry, spec_facts
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import choices_problem, option
from gpufinops.ingest.gcp import doctor, gcp_common
from gpufinops.ingest.gcp.gcp_catalog_parse import (
    COMPUTE_SERVICE,
    catalog_rows,
    component_prices,
    machine_prices,
    wanted,
)
from gpufinops.warehouse import reference_schema, schema

log = logging.getLogger(__name__)

SOURCE = "gcp:cloud-billing-catalog"
OUTPUTS = ("price_catalog", "instance_types", "spot_prices", "price_history")
PAGE_SIZE = 5000
HOUR_PRICE = Decimal("1E-8")
# anti-join inserts: a price point already stored is never stored twice (other sources share the tables)
NEW_SPOT = (
    "SELECT * FROM {name} n WHERE NOT EXISTS (SELECT 1 FROM spot_prices s WHERE s.provider = n.provider "
    "AND s.zone = n.zone AND s.instance_type = n.instance_type AND s.product = n.product AND s.ts = n.ts)"
)
NEW_HISTORY = (
    "SELECT * FROM {name} n WHERE NOT EXISTS (SELECT 1 FROM price_history h WHERE h.provider = n.provider "
    "AND h.region = n.region AND h.instance_type = n.instance_type AND h.pricing = n.pricing "
    "AND h.effective_from = n.effective_from AND h.currency = n.currency AND h.source = n.source)"
)


@dataclass(frozen=True, kw_only=True)
class GcpCatalogOptions(gcp_common.GcpClientOptions):
    currency: str | None = option(None, "prices in this currency (default: the catalogue's USD)")
    outputs: str | list[str] = option(list(OUTPUTS), f"the tables to fill, some of {', '.join(OUTPUTS)}")

    def validate(self) -> None:
        problem = choices_problem("outputs", self.outputs, OUTPUTS)
        if problem:
            raise problem

    def output_tables(self) -> tuple[str, ...]:
        return (self.outputs,) if isinstance(self.outputs, str) else tuple(self.outputs)


def list_skus(ctx: IngestContext) -> list[Any]:
    """Every SKU of the Compute Engine service, all pages; each page retried on 429/5xx."""
    options: GcpCatalogOptions = ctx.options
    client = gcp_common.catalog_client(ctx.source, options)  # first: a missing SDK is one clear sentence
    from google.cloud.billing_v1 import ListSkusRequest

    currency = options.currency
    skus, token = [], ""
    pages = paging.Pages(ctx.source, "Cloud Billing Catalog ListSkus")
    for page in itertools.count():
        request = ListSkusRequest(
            parent=COMPUTE_SERVICE,
            page_size=PAGE_SIZE,
            page_token=token,
            **({"currency_code": str(currency)} if currency else {}),
        )
        pager = gcp_common.with_retries(
            ctx.source,
            f"Cloud Billing Catalog ListSkus page {page + 1}",
            functools.partial(client.list_skus, request=request, timeout=gcp_common.TIMEOUT_S, retry=None),
            options,
        )
        skus += list(pager.skus)
        token = pages.follow(pager.next_page_token) or ""
        if not token:
            return skus
    raise AssertionError("unreachable: the pages' bound stops the listing first")  # pragma: no cover


def _instance_rows(machines: list[dict]) -> list[dict]:
    return [
        {
            "provider": "gcp",
            "region": m["region"],
            "instance_type": m["instance_type"],
            "gpu_model": m["shape"].gpu_model,
            "gpu_count": m["shape"].gpu_count,
            "gpu_memory_gib": float(m["shape"].gpu_memory_gib),
            "vcpus": m["shape"].vcpus,
            "memory_gib": float(m["shape"].memory_gib),
            "on_demand_usd_per_hour": m["price"].quantize(HOUR_PRICE),
            "source": SOURCE,
            "updated_at": m["effective_from"],
        }
        for m in machines
        if m["pricing"] == "on_demand" and m["currency"] == "USD"
    ]


def _spot_rows(machines: list[dict]) -> list[dict]:
    # GCP Spot prices are regional: the zone column holds the region
    return [
        {
            "provider": "gcp",
            "region": m["region"],
            "zone": m["region"],
            "instance_type": m["instance_type"],
            "product": "compute",
            "ts": m["effective_from"],
            "price_usd": m["price"].quantize(HOUR_PRICE),
        }
        for m in machines
        if m["pricing"] == "spot" and m["currency"] == "USD"
    ]


def _history_rows(machines: list[dict], run_id: str) -> list[dict]:
    return [
        {
            "provider": "gcp",
            "region": m["region"],
            "instance_type": m["instance_type"],
            "pricing": m["pricing"],
            "effective_from": m["effective_from"],
            "price": m["price"].quantize(HOUR_PRICE),
            "currency": m["currency"],
            "source": SOURCE,
            "ingest_run_id": run_id,
        }
        for m in machines
    ]


def insert_new(ctx: IngestContext, table: str, rows: list[dict], template: str) -> Batch | None:
    """A batch inserting the rows not stored yet (no slice deleted), or None when every row is stored."""
    if not rows:
        return None
    data = pa.Table.from_pylist(rows, schema=schema.TABLES[table].schema)
    name = f"_{table}_{hashlib.sha256((ctx.run_id + table).encode()).hexdigest()[:12]}"
    ctx.con.register(name, data)
    sql = template.format(name=name)
    if not ctx.con.execute(f"SELECT count(*) FROM ({sql})").fetchall()[0][0]:
        ctx.con.unregister(name)
        return None
    return Batch(table, sql, [])


class GcpCatalog:
    meta = registry.IngestorMeta(
        **spec_facts.PRICE_CATALOGUE,
        name="gcp_catalog",
        target_table="price_catalog",
        key=("provider", "sku_id", "region", "usage_type", "start_usage_amount", "effective_time", "currency"),
        default_schedule="0 4 * * *",
        options=GcpCatalogOptions,
        description="Cloud Billing Catalog API, Compute Engine GPU SKUs and the vCPU/RAM SKUs of a2, a3, g2 "
        "(also `instance_types`, `spot_prices`, `price_history`)",
        provider="gcp",
        extra=registry.Extra(name="gcp", unless=None),
        transport=registry.Transport(client="google", endpoint="endpoint", paged=True, unless=None),
        doctor=doctor.gcp_catalog,
        init=("bigquery_table", "gcp_billing_path"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        outputs = ctx.options.output_tables()
        currency = ctx.options.currency.upper() if ctx.options.currency else None
        skus = [s for s in list_skus(ctx) if wanted(s)]
        rows = catalog_rows(skus, currency, SOURCE, ctx.run_id)
        if not rows:
            raise IngestError(f"{ctx.source}: the catalogue holds no GPU SKU for {COMPUTE_SERVICE}")
        digest = hashlib.sha256(
            json.dumps(
                [{k: str(v) for k, v in r.items() if k != "ingest_run_id"} for r in rows], sort_keys=True
            ).encode()
        ).hexdigest()
        machines = machine_prices(component_prices(rows))
        flagged = sum(1 for r in rows if r["flag"])
        watermark = (
            f"{len({r['sku_id'] for r in rows})} SKUs, {len(rows)} prices ({flagged} flagged), "
            f"{len(machines)} machine prices"
        )
        unchanged = digest == ctx.state.get("digest") and not ctx.window.full_refresh
        log.info("%s: %s%s", ctx.source, watermark, " (unchanged)" if unchanged else "")
        regions = sorted({f"gcp|{r['region']}" for r in rows})
        batches: list[Batch | None] = []
        if "spot_prices" in outputs:
            batches.append(insert_new(ctx, "spot_prices", _spot_rows(machines), NEW_SPOT))
        if "price_history" in outputs:
            batches.append(insert_new(ctx, "price_history", _history_rows(machines, ctx.run_id), NEW_HISTORY))
        if unchanged:  # only re-add price points another source's load removed (gcp_price_history)
            readded = [b for b in batches if b is not None]
            if not readded:
                return FetchResult.unchanged(ctx.state, "catalogue unchanged")
            return FetchResult(readded, ctx.state, watermark=ctx.state.get("watermark"))
        loaded = [b for b in batches if b is not None]
        if "price_catalog" in outputs:
            loaded.append(
                Batch("price_catalog", pa.Table.from_pylist(rows, schema=reference_schema.PRICE_CATALOG), regions)
            )
        if "instance_types" in outputs:
            loaded.append(
                Batch(
                    "instance_types",
                    pa.Table.from_pylist(_instance_rows(machines), schema=reference_schema.INSTANCE_TYPES),
                    regions,
                )
            )
        state = {"digest": digest, "watermark": watermark, "loaded_at": datetime.now(UTC).isoformat()}
        return FetchResult(loaded, state, watermark=watermark)


INGESTORS = [GcpCatalog]
