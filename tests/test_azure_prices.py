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
from tests.azure_prices_loopback import RetailPrices, linux_on_demand

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
# by hand: 19,307.24 / 8,760 and 41,490 / 26,280
A100_EXPECTED = {
    "on_demand": Decimal("3.673000000000000"),
    "spot": Decimal("1.101900000000000"),
    "reservation_1y": Decimal("2.204022831050228"),
    "reservation_3y": Decimal("1.578767123287671"),
    "savings_plan_1y": Decimal("2.754750000000000"),
    "savings_plan_3y": Decimal("1.763040000000000"),
}


def _load(warehouse, url: str, **how):
    """One run of azure_prices over eastus against the server at ``url``."""
    return run_source(REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": url}, **how)


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
    inventory = azure_prices.gpu_inventory()
    priced = set(linux_on_demand("eastus")) & set(inventory)
    assert {sku for sku, *_ in rows} == priced and "Standard_NC24ads_A100_v4" in priced
    assert {(sku, gpu, region) for sku, _, _, gpu, region in rows} == {
        (sku, inventory[sku]["gpu_model"], "eastus") for sku in priced
    }
    a100 = {usage: price for sku, usage, price, _, _ in rows if sku == "Standard_NC24ads_A100_v4"}
    assert a100 == A100_EXPECTED


def test_the_models_price_tables_hold_azure_s_prices_per_hour(tmp_path, api):
    """What spot_mix, commitment and the rightsizing kinds read: instance_types' on-demand price with the
    inventory's GPUs, and price_history's points (a reservation as commit_1y / commit_3y), to its 8 decimals."""
    warehouse = tmp_path / "wh.duckdb"
    result = run_source(REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": api.url})
    assert result.status == "succeeded", result.error
    with db.writer(warehouse) as con:
        types = con.execute(
            "SELECT instance_type, gpu_model, gpu_count, vcpus, memory_gib, on_demand_usd_per_hour FROM instance_types "
            "WHERE provider = 'azure' AND region = 'eastus' ORDER BY 1"
        ).fetchall()
        history = con.execute(
            "SELECT instance_type, pricing, price FROM price_history WHERE provider = 'azure' ORDER BY 1, 2"
        ).fetchall()
    by_type = {t[0]: t[1:] for t in types}
    assert by_type["Standard_ND96isr_H100_v5"] == ("H100-SXM", 8, 96, 1900.0, Decimal("98.32"))
    assert by_type["Standard_NC24ads_A100_v4"] == ("A100-80GB", 1, 24, 220.0, Decimal("3.673"))
    assert "Standard_NV6ads_A10_v5" not in by_type  # a sixth of an A10: not offered as a whole GPU
    eight = Decimal("1E-8")
    h100 = {pricing: price for size, pricing, price in history if size == "Standard_ND96isr_H100_v5"}
    assert h100 == {
        "on_demand": Decimal("98.32"),
        "spot": Decimal("19.664"),
        "commit_1y": (Decimal("516178.08") / 8760).quantize(eight),  # 58.92443836
        "commit_3y": (Decimal("1100000") / 26280).quantize(eight),  # 41.85692542
        "savings_plan_1y": Decimal("72.7568"),
        "savings_plan_3y": Decimal("46.2104"),
    }
    again = run_source(REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": api.url})
    assert again.status in ("succeeded", "skipped"), again.error
    with db.writer(warehouse) as con:
        assert con.execute("SELECT count(*) FROM price_history WHERE provider = 'azure'").fetchone()[0] == len(history)


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
        result = _load(tmp_path / "wh.duckdb", server.url)
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


def test_an_hourly_price_no_vm_has_is_refused_in_one_sentence_and_changes_nothing(tmp_path, api, monkeypatch):
    from tests.azure_prices_loopback import PRICES

    warehouse = tmp_path / "wh.duckdb"
    monkeypatch.setitem(PRICES, "linux", "123456789012.5")
    result = run_source(REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": api.url})
    assert result.status == "failed"
    assert result.error == (
        "azprices: the Retail Prices API's on_demand price of Standard_ND96isr_H100_v5 in eastus is 123456789012.5 "
        "USD an hour: not a VM's price (at most 10,000,000,000 an hour)"
    )
    with db.writer(warehouse) as con:
        for table in ("price_catalog", "instance_types", "price_history"):
            assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


HOSTILE_PRICES = [
    ("retailPrice", float("nan"), "NaN"),
    ("retailPrice", float("inf"), "Infinity"),
    ("retailPrice", float("-inf"), "-Infinity"),
    ("retailPrice", -98.32, "-98.32"),
    ("retailPrice", "98.32", '"98.32"'),
    ("retailPrice", None, "null"),
    ("savingsPlan[1 Year].retailPrice", float("nan"), "NaN"),
]


@pytest.mark.parametrize(("field", "value", "shown"), HOSTILE_PRICES)
def test_a_gpu_row_whose_price_is_not_a_price_is_refused_naming_page_row_and_value(
    tmp_path, api, monkeypatch, field, value, shown
):
    """A NaN, ±Infinity, negative, string or null price of the ND96isr_H100_v5's Linux pay-as-you-go row (as the
    server's JSON writes it: NaN and Infinity are what Python's encoder answers) was dropped without a word,
    leaving the size without an on-demand price; it is refused, the warehouse as it was."""
    import tests.azure_prices_loopback as loopback

    honest = _load(tmp_path / "wh.duckdb", api.url)
    assert honest.status == "succeeded", honest.error
    with db.writer(tmp_path / "wh.duckdb") as con:
        before = con.execute("SELECT * FROM price_catalog ORDER BY ALL").fetchall()
    real = loopback.gpu_items

    def tampered(region: str = "eastus") -> list:
        items = real(region)
        row = next(i for i in items if i["armSkuName"] == loopback.H100 and i.get("savingsPlan"))
        if field == "retailPrice":
            row["retailPrice"] = value
        else:
            next(p for p in row["savingsPlan"] if p["term"] == "1 Year")["retailPrice"] = value
        return items

    monkeypatch.setattr(loopback, "gpu_items", tampered)
    result = _load(tmp_path / "wh.duckdb", api.url, full_refresh=True)
    assert result.status == "failed"
    assert result.error == (
        f"azprices: the Retail Prices API's page 1 of eastus ({api.url}) row 'Standard_ND96isr_H100_v5' meter "
        f"'ND96isr H100 v5': {field} is {shown}, not a price (a finite number, 0 or more)"
    )
    with db.writer(tmp_path / "wh.duckdb") as con:
        assert con.execute("SELECT * FROM price_catalog ORDER BY ALL").fetchall() == before


def test_doctor_asks_the_retail_prices_api_through_the_spec_s_own_check(tmp_path, api):
    """`gpufinops doctor`'s check of azure_prices comes from its spec (ingest/azure/doctor.py) and asks the
    loopback Retail Prices API; a port nobody listens on is a FAIL naming the endpoint, not a traceback."""
    from gpufinops.interfaces import doctor_sources
    from gpufinops.jobs.config import parse_source
    from tests.conftest import free_port

    check = doctor_sources.check_of("azure_prices", REGISTRY)
    assert check is not None and check.__module__ == "gpufinops.ingest.azure.doctor"
    source = parse_source("azprices", {"type": "azure_prices", "regions": ["eastus"], "endpoint": api.url}, REGISTRY)
    status, detail, _ = check(source, tmp_path, 5.0)
    assert (status, api.url in detail) == ("ok", True), detail
    port = free_port()
    closed = f"http://127.0.0.1:{port}/api/retail/prices"
    gone = parse_source("azprices", {"type": "azure_prices", "regions": ["eastus"], "endpoint": closed}, REGISTRY)
    try:
        status, detail, _ = check(gone, tmp_path, 2.0)
    except Exception as exc:  # noqa: BLE001 (doctor.py turns a raised check into a FAIL line: the sentence counts)
        status, detail = "FAIL", str(exc)
    assert status == "FAIL" and f"127.0.0.1:{port}" in detail, detail
