"""gcp_catalog: google-cloud-billing's CloudCatalogClient (REST) against a loopback Catalog server.

Pages: the real opencost SKU page (A100 on-demand, A2 core/RAM, IDR prices, a real nextPageToken),
then pages built in the same schema (A100/H100/L4 Spot and commitments, A3/G2 core/RAM, an unknown
unit). Expected prices are read from the JSON text by a different route (units "." nanos, as text).
"""

from __future__ import annotations

import copy
import csv
from decimal import Decimal

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.gcp.gcp_catalog import GcpCatalog
from tests.conftest import query
from tests.gcp_loopback import PRICE_CHANGES, SKUS_PATH, catalog_server, sku_pages

FAST = {"initial_backoff_s": 0.01}


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.register(GcpCatalog)
    return r


def _text_price(unit_price: dict) -> Decimal:
    units, nanos = int(unit_price["units"]), int(unit_price["nanos"])
    sign = "-" if units < 0 or nanos < 0 else ""
    return Decimal(f"{sign}{abs(units)}.{abs(nanos):09d}")


def _skus(pages: dict) -> list[dict]:
    return [s for page in pages.values() for s in page["skus"]]


@pytest.mark.parametrize("needle", ["A100 GPU", "H100 80GB GPU", "Nvidia L4 GPU"])
def test_gpu_on_demand_and_spot_prices_parse_exactly(needle, registry, warehouse):
    pages = sku_pages()
    with catalog_server(pages) as server:
        result = run_source(
            registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, "currency": "USD", **FAST}
        )
    assert result.status == "succeeded", result.error
    stored = {
        (sku, region): (price, usage, currency)
        for sku, region, price, usage, currency in query(
            warehouse, "SELECT sku_id, region, unit_price, usage_type, currency FROM price_catalog"
        )
    }
    checked = set()
    for sku in _skus(pages):
        if needle not in sku["description"] or sku["category"]["resourceGroup"] != "GPU":
            continue
        rate = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]
        for region in sku["serviceRegions"]:
            assert stored[(sku["skuId"], region)] == (
                _text_price(rate["unitPrice"]),
                sku["category"]["usageType"],
                rate["unitPrice"]["currencyCode"],
            )
            checked.add(sku["category"]["usageType"])
    assert {"OnDemand", "Preemptible"} <= checked


def test_machine_types_are_priced_from_gpu_core_and_ram_skus(registry, warehouse):
    with catalog_server() as server:
        result = run_source(
            registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, "currency": "USD", **FAST}
        )
    assert result.status == "succeeded", result.error
    # the real opencost SKUs (A100 + 12 A2 cores + 85 GiB A2 RAM) against Cyclenerd's published price of
    # a2-highgpu-1g in us-central1, from a different source (pricing.yml revisions)
    with open(PRICE_CHANGES, newline="") as f:
        published = {
            Decimal(r["hour_ondemand_usd"])
            for r in csv.DictReader(f)
            if r["machine_type"] == "a2-highgpu-1g" and r["region"] == "us-central1"
        }
    got = query(
        warehouse,
        """SELECT on_demand_usd_per_hour, gpu_model, gpu_count, vcpus FROM instance_types
                              WHERE provider = 'gcp' AND region = 'us-central1' AND instance_type = 'a2-highgpu-1g'""",
    )
    assert got[0][0] in published and got[0][1:] == ("A100-40GB", 1, 12)
    pricings = {
        p
        for (p,) in query(
            warehouse,
            """SELECT DISTINCT pricing FROM price_history
                                                  WHERE instance_type = 'a2-highgpu-1g' AND region = 'us-central1'""",
        )
    }
    assert pricings == {"on_demand", "spot", "commit_1y", "commit_3y"}
    spot = query(
        warehouse,
        """SELECT count(*), min(product), min(zone) FROM spot_prices
                               WHERE provider = 'gcp' AND instance_type LIKE 'a3-highgpu-%'""",
    )
    assert spot[0][0] > 0 and spot[0][1] == "compute" and spot[0][2] == "us-central1"
    assert query(warehouse, "SELECT count(DISTINCT gpu_model) FROM instance_types")[0][0] == 4  # A100 40/80, H100, L4


def test_every_page_is_read_with_the_requested_currency(registry, warehouse):
    pages = sku_pages()
    with catalog_server(pages) as server:
        result = run_source(
            registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, "currency": "USD", **FAST}
        )
    assert result.status == "succeeded", result.error
    assert [path for path, _ in server.requests] == [SKUS_PATH] * len(pages)
    assert [q.get("pageToken", [""])[0] for _, q in server.requests] == list(pages)
    assert all(q["currencyCode"] == ["USD"] for _, q in server.requests)
    last_page_sku = pages["gpufinops-page-3"]["skus"][0]["skuId"]
    assert query(warehouse, "SELECT count(*) FROM price_catalog WHERE sku_id = ?", [last_page_sku])[0][0] > 0


def test_429_and_503_are_retried_with_backoff(registry, warehouse):
    with catalog_server(failures=[429, 503]) as server:
        result = run_source(registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, **FAST})
    assert result.status == "succeeded", result.error
    assert len(server.requests) == 2 + len(sku_pages())


def test_an_api_that_stays_unavailable_fails_the_run_and_writes_nothing(registry, warehouse):
    with catalog_server(failures=[503] * 10) as server:
        result = run_source(
            registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, "max_attempts": 3, **FAST}
        )
    assert result.status == "failed" and "ListSkus" in result.error and "503" in result.error
    assert len(server.requests) == 3
    assert query(warehouse, "SELECT count(*) FROM price_catalog")[0][0] == 0


def test_unknown_unit_and_other_currencies_are_kept_not_converted(registry, warehouse):
    pages = copy.deepcopy(sku_pages())
    for sku in pages["gpufinops-page-3"]["skus"]:
        for rate in sku["pricingInfo"][0]["pricingExpression"]["tieredRates"]:
            rate["unitPrice"]["currencyCode"] = "EUR"
    with catalog_server(pages) as server:
        result = run_source(registry, warehouse, "cat", "gcp_catalog", {"endpoint": server.url, **FAST})
    assert result.status == "succeeded", result.error
    flagged = query(warehouse, "SELECT DISTINCT description, flag FROM price_catalog WHERE flag IS NOT NULL")
    assert flagged == [("Nvidia L4 Virtual Workstation GPU running in Americas", "unknown unit 'h.vws'")]
    eur = query(warehouse, "SELECT count(*) FROM price_catalog WHERE currency = 'EUR'")[0][0]
    kept = [
        s
        for s in pages["gpufinops-page-3"]["skus"]  # GPUs, and the a3/g2 machine families' core and RAM
        if s["category"]["resourceGroup"] == "GPU" or s["description"].split(" Instance ")[0][-2:] in ("A3", "G2")
    ]
    assert eur == sum(len(s["serviceRegions"]) for s in kept)
    assert query(warehouse, "SELECT count(*) FROM price_catalog WHERE description LIKE 'N2 %'")[0][0] == 0
    # G2 machines are priced in EUR in the history, and never land in the USD-only tables
    assert query(warehouse, "SELECT DISTINCT currency FROM price_history WHERE instance_type LIKE 'g2-%'") == [("EUR",)]
    assert query(warehouse, "SELECT count(*) FROM instance_types WHERE instance_type LIKE 'g2-%'")[0][0] == 0


def test_an_unchanged_catalogue_is_skipped_and_a_rerun_adds_nothing(registry, warehouse):
    with catalog_server() as server:
        options = {"endpoint": server.url, "currency": "USD", **FAST}
        first = run_source(registry, warehouse, "cat", "gcp_catalog", options)
        counts = [
            query(warehouse, f"SELECT count(*) FROM {t}")[0][0]
            for t in ("price_catalog", "instance_types", "spot_prices", "price_history")
        ]
        second = run_source(registry, warehouse, "cat", "gcp_catalog", options)
        refreshed = run_source(registry, warehouse, "cat", "gcp_catalog", options, full_refresh=True)
    assert first.status == "succeeded" and second.status == "skipped" and refreshed.status == "succeeded"
    assert [
        query(warehouse, f"SELECT count(*) FROM {t}")[0][0]
        for t in ("price_catalog", "instance_types", "spot_prices", "price_history")
    ] == counts
