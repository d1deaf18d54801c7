"""``azure_prices``: the public Azure Retail Prices API (``prices.azure.com/api/retail/prices``): Linux
pay-as-you-go, Spot, Reservation (1 and 3 years) and savings-plan hourly prices of the GPU VM sizes (the Azure
GPU inventory, warehouse/data/azure_gpu_sizes.csv) in the configured regions, into ``price_catalog``, and into
the tables the models price from (``instance_types``, ``price_history``: ingest/azure/azure_price_tables.py).

One OData ``$filter`` per region (``serviceName eq 'Virtual Machines'`` and the region), followed through
``NextPageLink`` through the one paging layer (ingest/core/paging.py: pages, listing time, a page link answered
before at any distance), each page read through the one transport (ingest/core/transport.py: a connect timeout,
a total deadline, a body size limit; docs/sources/loads.md#network-bounds) and retried on 429/5xx. The API's
traps, handled here:

* a Reservation row's ``retailPrice`` is the whole term although ``unitOfMeasure`` says "1 Hour": divided by
  the term's hours (8,760 for 1 year, 26,280 for 3 years);
* Windows rows differ from Linux only by ``productName`` (" Windows"); Spot and Low Priority rows by the
  " Spot" / " Low Priority" suffix of ``skuName``; ``DevTestConsumption`` rows are not on-demand prices: all
  of these are not the Linux on-demand price (Spot is kept as Spot; the others are dropped);
* ``isPrimaryMeterRegion`` is false on some Linux on-demand rows: never a filter;
* ``armSkuName`` can carry trailing spaces; "Standard_N" also names FPGA (NP) and media sizes: only the
  inventory's GPU sizes are kept;
* ``Count`` counts the page, not the result; the savings-plan array (api-version 2023-01-01-preview) is per hour.
"""

from __future__ import annotations

import hashlib
import json
import logging
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from gpufinops.ingest.azure import azure_price_tables as tables
from gpufinops.ingest.azure import doctor
from gpufinops.ingest.core import paging, registry, transport
from gpufinops.ingest.core.bounds import Bounds
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OptionProblem, TransportOptions, choices_problem, option
from gpufinops.ingest.gcp.gcp_catalog import NEW_HISTORY, insert_new
from gpufinops.kernel import ranges
from gpufinops.warehouse import reference, schema

log = logging.getLogger(__name__)

API = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"  # the version that answers the savingsPlan array
TERM_HOURS = {"1 Year": Decimal(8760), "3 Years": Decimal(26280)}
TERM_CODE = {"1 Year": "1y", "3 Years": "3y"}
HOUR_PRICE = Decimal("0.000000000000001")
OUTPUTS = ("price_catalog", "instance_types", "price_history")
MAX_HOURLY = Decimal(10) ** 10  # price_history and instance_types hold $/h as DECIMAL(18, 8)


@dataclass(frozen=True, kw_only=True)
class AzurePricesOptions(TransportOptions):
    regions: list[str] = option(doc="the Azure regions (armRegionName: eastus, westeurope, …)")
    currency: str = option("USD", "the currency code the prices are asked in")
    endpoint: str = option(API, "the Retail Prices API's URL (a test server, or a proxy)")
    timeout_s: float = option(
        30.0, "seconds one page's request may take in all (connect, headers, body)", range=ranges.POSITIVE
    )
    max_body_mb: float = option(
        16.0, "MiB one page's body may hold (a page of 1,000 items is ~1 MiB)", range=ranges.POSITIVE
    )
    max_pages: int = option(200, "pages one region's listing may read", range=ranges.POSITIVE)
    retries: int = option(3, "retries of a page answered 429/5xx or a failed connection", range=ranges.NON_NEGATIVE)
    outputs: str | list[str] = option(list(OUTPUTS), f"the tables to fill, some of {', '.join(OUTPUTS)}")

    def output_tables(self) -> tuple[str, ...]:
        return (self.outputs,) if isinstance(self.outputs, str) else tuple(self.outputs)

    def validate(self) -> None:
        problem = choices_problem("outputs", self.outputs, OUTPUTS)
        if problem:
            raise problem
        if not self.regions or not all(isinstance(r, str) and r.isalnum() for r in self.regions):
            raise OptionProblem("regions", "must be a non-empty list of region names (letters and digits)")
        if not (self.endpoint.startswith("https://") or self.endpoint.startswith("http://127.0.0.1")):
            raise OptionProblem("endpoint", "must be an https URL (or a loopback test server)")


def region_url(options: AzurePricesOptions, region: str) -> str:
    odata = f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}'"
    query = urllib.parse.urlencode(
        {"api-version": API_VERSION, "currencyCode": f"'{options.currency}'", "$filter": odata},
        quote_via=urllib.parse.quote,
    )
    return f"{options.endpoint}?{query}"


def _get(source: str, url: str, bounds: Bounds, retries: int = 0) -> dict[str, Any]:
    """One page within the source's bounds, retried on 429/5xx and connection errors; a bound is not retried."""
    answer = transport.get_retried(source, url, bounds, {"Accept": "application/json"}, retries)
    return _page(source, url.split("?", 1)[0], answer.body)


def _page(source: str, shown: str, body: bytes) -> dict[str, Any]:
    try:
        page = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(f"{source}: {shown} answered a page that is not JSON: {exc}") from None
    if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
        raise IngestError(f"{source}: {shown} answered a page without an Items list")
    return page


def list_items(ctx: IngestContext, region: str, sizes: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every item of one region's listing, its NextPageLink followed within the bounds; an item of one of
    ``sizes`` (the inventory's GPU sizes) whose price is not one is refused naming its page and row."""
    bounds = ctx.options.bounds()
    pages = paging.Pages(ctx.source, f"Retail Prices of {region}", bounds=bounds)
    url: str | None = region_url(ctx.options, region)
    items: list[dict[str, Any]] = []
    while url:
        page = _get(ctx.source, url, bounds, ctx.options.retries)
        listed = [i for i in page["Items"] if isinstance(i, dict)]
        for item in listed:
            if str(item.get("armSkuName") or "").strip() in sizes:
                _refuse_hostile_price(ctx.source, f"page {pages.pages + 1} of {region} ({url.split('?', 1)[0]})", item)
        items += listed
        url = pages.follow(page.get("NextPageLink") or None)
    return items


def _prices_of(item: dict[str, Any]) -> list[tuple[str, Any]]:
    """(field, value as answered) of every price an item carries: its retailPrice and its savings plans'."""
    plans = item.get("savingsPlan") or []
    return [("retailPrice", item.get("retailPrice"))] + [
        (f"savingsPlan[{plan.get('term')}].retailPrice", plan.get("retailPrice"))
        for plan in (plans if isinstance(plans, list) else [])
        if isinstance(plan, dict)
    ]


def _refuse_hostile_price(source: str, page: str, item: dict[str, Any]) -> None:
    """A GPU size's row whose price is not a finite JSON number of 0 or more (NaN, ±Infinity, a negative, a
    string, null) is refused in one sentence: dropping it would leave the size unpriced without a word."""
    for field, value in _prices_of(item):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or _decimal(value) is None:
            shown = json.dumps(value)[:80]
            raise IngestError(
                f"{source}: the Retail Prices API's {page} row {str(item.get('armSkuName')).strip()!r} meter "
                f"{item.get('meterName')!r}: {field} is {shown}, not a price (a finite number, 0 or more)"
            )


def _decimal(value: Any) -> Decimal | None:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() and number >= 0 else None


def classify(item: dict[str, Any]) -> list[tuple[str, Decimal]]:
    """The (pricing, USD per hour) pairs one API item gives a Linux GPU VM: on_demand and its savings plans,
    spot, reservation_1y / reservation_3y (the term's price over its hours); [] for what is not one."""
    product, sku = str(item.get("productName") or ""), str(item.get("skuName") or "")
    if product.endswith(" Windows") or sku.endswith(" Low Priority") or item.get("unitOfMeasure") != "1 Hour":
        return []
    price = _decimal(item.get("retailPrice"))
    if price is None:
        return []
    kind = item.get("type")
    if kind == "Reservation":
        term = str(item.get("reservationTerm") or "")
        return [(f"reservation_{TERM_CODE[term]}", price / TERM_HOURS[term])] if term in TERM_HOURS else []
    if kind != "Consumption":  # DevTestConsumption: a dev/test subscription's price, not on-demand
        return []
    if sku.endswith(" Spot"):
        return [("spot", price)]
    out = [("on_demand", price)]
    for plan in item.get("savingsPlan") or []:
        hourly = _decimal(plan.get("retailPrice")) if isinstance(plan, dict) else None
        if hourly is not None and plan.get("term") in TERM_CODE:
            out.append((f"savings_plan_{TERM_CODE[plan['term']]}", hourly))
    return out


def catalog_rows(items: list[dict[str, Any]], gpus: dict[str, str], run_id: str) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in items:
        size = str(item.get("armSkuName") or "").strip()
        if size not in gpus:  # FPGA, media and CPU sizes share the "Standard_N" prefix
            continue
        for pricing, hourly in classify(item):
            key = (size, str(item.get("armRegionName") or "").strip(), pricing)
            rows[key] = {
                "provider": "azure",
                "service_id": "Virtual Machines",
                "sku_id": size,
                "description": f"{item.get('productName')} {item.get('skuName')}",
                "resource_family": "Compute",
                "resource_group": "GPU",
                "usage_type": pricing,
                "region": key[1],
                "gpu_model": gpus[size],
                "usage_unit": "h",
                "currency": str(item.get("currencyCode") or "USD"),
                "start_usage_amount": Decimal(0),
                "unit_price": hourly.quantize(HOUR_PRICE),
                "effective_time": _time(item.get("effectiveStartDate")),
                "flag": None,
                "source": "azure_prices",
                "ingest_run_id": run_id,
            }
    return [rows[k] for k in sorted(rows)]


def _time(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=UTC)


def gpu_inventory() -> dict[str, dict[str, Any]]:
    """The Azure inventory's GPU sizes and what each holds (GPU model, count, fraction, memory, vCPUs)."""
    table = reference.load_gpu_instance_types().to_pylist()
    return {r["instance_type"]: r for r in table if r["provider"] == "azure" and r["accelerator"] == "gpu"}


class AzurePrices:
    meta = registry.IngestorMeta(
        name="azure_prices",
        target_table="price_catalog",
        key=("provider", "sku_id", "region", "usage_type", "start_usage_amount", "effective_time", "currency"),
        slice_expr="provider || '|' || region",
        source_column=None,
        cursor=registry.Cursor(remembers="digest of the last prices loaded", resume_item=None),
        lookback=timedelta(0),
        default_schedule="20 4 * * *",
        options=AzurePricesOptions,
        description="Azure Retail Prices API: Linux pay-as-you-go, Spot, Reservation (1 and 3 years, per hour) and "
        "savings-plan prices of the GPU VM sizes in the configured regions (also `instance_types`, `price_history`)",
        time_range=False,
        provider="azure",
        extra=None,
        freshness=registry.Freshness(kind="prices", lag_hours=168.0),
        doctor=doctor.azure_prices,
        init=None,
        transport=registry.Transport(client="http", endpoint="endpoint", paged=True, unless=None),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        inventory = gpu_inventory()
        sizes = frozenset(inventory)
        items = [item for region in ctx.options.regions for item in list_items(ctx, region, sizes)]
        rows = catalog_rows(items, {size: r["gpu_model"] for size, r in inventory.items()}, ctx.run_id)
        if not rows:
            raise IngestError(f"{ctx.source}: the Retail Prices API holds no GPU VM price in {ctx.options.regions}")
        huge = next((r for r in rows if r["unit_price"] >= MAX_HOURLY), None)
        if huge is not None:
            raise IngestError(
                f"{ctx.source}: the Retail Prices API's {huge['usage_type']} price of {huge['sku_id']} in "
                f"{huge['region']} is {huge['unit_price'].normalize():f} USD an hour: not a VM's price (at most "
                f"{MAX_HOURLY:,} an hour)"
            )
        digest = hashlib.sha256(
            json.dumps([{k: str(v) for k, v in r.items() if k != "ingest_run_id"} for r in rows]).encode()
        ).hexdigest()
        watermark = f"{len({r['sku_id'] for r in rows})} GPU sizes, {len(rows)} prices"
        outputs = ctx.options.output_tables()
        # price points accumulate (a point stored before is never stored twice, another source's too)
        history = (
            insert_new(ctx, "price_history", tables.history_rows(rows, ctx.run_id), NEW_HISTORY)
            if "price_history" in outputs
            else None
        )
        if digest == ctx.state.get("digest") and not ctx.window.full_refresh:
            if history is None:
                return FetchResult.unchanged(ctx.state, "prices unchanged")
            return FetchResult([history], ctx.state, watermark=ctx.state.get("watermark"))
        slices = sorted({f"azure|{region}" for region in ctx.options.regions})
        tables_of = {
            "price_catalog": lambda: pa.Table.from_pylist(rows, schema=schema.TABLES["price_catalog"].schema),
            "instance_types": lambda: pa.Table.from_pylist(
                tables.instance_rows(rows, inventory), schema=schema.TABLES["instance_types"].schema
            ),
        }
        batches = [Batch(name, build(), slices) for name, build in tables_of.items() if name in outputs]
        batches += [history] if history is not None else []
        return FetchResult(batches, {"digest": digest, "watermark": watermark}, watermark=watermark)


INGESTORS = [AzurePrices]
