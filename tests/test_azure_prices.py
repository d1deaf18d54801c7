"""``azure_prices`` against a loopback Retail Prices API (tests/azure_prices_loopback.py: the recorded pages, and
GPU pages built from them because no GPU page was ever recorded in public). Each expected hourly figure below was
converted by hand from the page's price: a reservation's whole-term price over 8,760 or 26,280 hours."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpufinops.ingest.azure import azure_prices
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.warehouse import db
from tests.azure_prices_loopback import RetailPrices

REGISTRY = default_registry()
# by hand: 516,178.08 / 8,760 and 1,100,000 / 26,280, to the catalogue's 15 decimals
EXPECTED = {
    "on_demand": Decimal("98.320000000000000"),
    "spot": Decimal("19.664000000000000"),
    "reservation_1y": Decimal("58.924438356164384"),
    "reservation_3y": Decimal("41.856925418569254"),
    "savings_plan_1y": Decimal("72.756800000000000"),
    "savings_plan_3y": Decimal("46.210400000000000"),
}


@pytest.fixture
def api():
    server = RetailPrices()
    yield server
    server.stop()


def test_gpu_prices_of_every_kind_match_the_hand_converted_figures(tmp_path, api):
    warehouse = tmp_path / "wh.duckdb"
    result = run_source(REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": api.url})
    assert result.status == "succeeded", result.error
    assert len(api.requests) == 2 and "skip=" in api.requests[1]  # NextPageLink followed to its end
    with db.writer(warehouse) as con:
        rows = con.execute(
            "SELECT sku_id, usage_type, unit_price, gpu_model, region FROM price_catalog WHERE provider = 'azure' ORDER BY 1, 2"
        ).fetchall()
    h100 = {usage: price for sku, usage, price, _, _ in rows if sku == "Standard_ND96isr_H100_v5"}
    assert h100 == EXPECTED  # no Windows, Low Priority or DevTest price became on-demand
    # the trailing-space size is found; the FPGA "Standard_NP10s" and the recorded D2s v3 are not GPU sizes
    assert {sku for sku, *_ in rows} == {"Standard_ND96isr_H100_v5", "Standard_NC24ads_A100_v4"}
    assert {(gpu, region) for _, _, _, gpu, region in rows} == {("H100-SXM", "eastus"), ("A100-80GB", "eastus")}


def test_the_recorded_pages_classify_as_the_api_documents(tmp_path):
    from tests.azure_prices_loopback import CONSUMPTION, DEVTEST, RESERVATION, _items

    d2s = [p for item in _items(CONSUMPTION) for p in azure_prices.classify(item)]
    assert sorted(d2s) == [
        ("on_demand", Decimal("0.096")),  # isPrimaryMeterRegion false on this row, kept
        ("savings_plan_1y", Decimal("0.06624")),
        ("savings_plan_3y", Decimal("0.04512")),
        ("spot", Decimal("0.018816")),
    ]
    reserved = dict(p for item in _items(RESERVATION) for p in azure_prices.classify(item) if "reservation" in p[0])
    assert reserved["reservation_1y"].quantize(Decimal("0.0001")) == Decimal("0.0475")  # 416 / 8760
    assert reserved["reservation_3y"].quantize(Decimal("0.0001")) == Decimal("0.0306")  # 803 / 26280
    assert [p for item in _items(DEVTEST) for p in azure_prices.classify(item)] == []


def test_a_page_link_that_cycles_is_stopped_in_one_sentence(tmp_path):
    server = RetailPrices(loop=True)
    try:
        result = run_source(
            REGISTRY,
            tmp_path / "wh.duckdb",
            "azprices",
            "azure_prices",
            {"regions": ["eastus"], "endpoint": server.url},
        )
    finally:
        server.stop()
    assert result.status == "failed"
    assert "answered a page token it answered 1 page(s) before" in result.error and len(server.requests) == 2


def test_an_http_400_names_the_call_and_the_api_s_message(tmp_path, api):
    url = azure_prices.region_url(azure_prices.AzurePricesOptions(regions=["eastus"], endpoint=api.url), "eastus")
    with pytest.raises(Exception, match=r"answered HTTP 400: .*Invalid OData parameters supplied"):
        azure_prices._get(
            "azprices",
            url.replace("armRegionName", "priceType%20eq%20%27OnDemand%27%20and%20armRegionName"),
            azure_prices.AzurePricesOptions(regions=["eastus"]).bounds(),
        )
