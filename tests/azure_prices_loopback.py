"""A loopback Retail Prices API: the recorded pages of tests/data/azure/retail-prices-finfocus (real bodies of
prices.azure.com, Apache-2.0) and GPU-size pages built from them.

No public recording of a GPU size's Retail Prices page exists, so the GPU items are the recorded D2s v3 items
with their size, names and prices replaced (every other field, the page's envelope and ``NextPageLink`` paging
as recorded). The server splits a region's items over two pages linked by ``NextPageLink`` ($skip), as the API
does at 1,000 items. Linux pay-as-you-go prices are real: the Retail Prices API's own figures as Azure's Karpenter
provider generated them (tests/data/azure/karpenter-azure-prices-skus, Apache-2.0); no Spot, Reservation or
savings-plan price of a GPU size was ever published in a file, so those of the ND96isr_H100_v5 and the
NC24ads_A100_v4 below are generated (each of every kind the recorded pages show); the inventory's other sizes the
table prices in the region get their Linux pay-as-you-go row only.
"""

from __future__ import annotations

import copy
import csv
import json
import threading
import urllib.parse
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.http_loopback import JsonHandler

RECORDED = Path(__file__).parent / "data" / "azure" / "retail-prices-finfocus" / "retail" / "savingsplan"
CONSUMPTION = RECORDED / "eastus_standard_d2s_v3_pricetype_consumption_or_reservation_preview.json"
RESERVATION = RECORDED / "eastus_standard_d2als_v7_pricetype_consumption_or_reservation_preview.json"
DEVTEST = RECORDED / "eastus_standard_d2s_v3_pricetype_devtestconsumption.json"
KARPENTER_PRICES = (
    Path(__file__).parent
    / "data"
    / "azure"
    / "karpenter-azure-prices-skus"
    / "azure_ondemand_linux_prices_gpu_nseries_karpenter.csv"
)
H100 = "Standard_ND96isr_H100_v5"
A100 = "Standard_NC24ads_A100_v4"
# price of each recorded row kind; reservations are the whole term's price, as the API gives them
PRICES = {
    "linux": "98.32",
    "windows": "102.736",
    "spot": "19.664",
    "windows_spot": "24.08",
    "low_priority": "19.664",
    "savings_1y": "72.7568",
    "savings_3y": "46.2104",
    "reservation_1y": "516178.08",
    "reservation_3y": "1100000",
    "devtest": "88.1",
}
A100_PRICES = {
    "linux": "3.673",  # real: the Karpenter table's eastus price
    "windows": "4.409",
    "spot": "1.1019",
    "windows_spot": "1.8369",
    "low_priority": "0.7346",
    "savings_1y": "2.75475",
    "savings_3y": "1.76304",
    "reservation_1y": "19307.24",
    "reservation_3y": "41490",
    "devtest": "3.305",
}
SIZE_PRICES = {H100: PRICES, A100: A100_PRICES}


def linux_on_demand(region: str) -> dict[str, str]:
    """The Karpenter table's Linux pay-as-you-go prices of one region: size -> $/h (as published, 6 decimals)."""
    with KARPENTER_PRICES.open(encoding="utf-8", newline="") as fh:
        return {r["arm_sku_name"]: r["usd_per_hour"] for r in csv.DictReader(fh) if r["region"] == region}


def _items(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["Items"]


def _gpu(item: dict[str, Any], size: str, price: str, region: str) -> dict[str, Any]:
    out = copy.deepcopy(item)
    meter = size.removeprefix("Standard_").replace("_", " ")
    for key in ("skuName", "meterName"):
        out[key] = out[key].replace("D2s v3", meter).replace("D2als v7", meter)
    series = size.removeprefix("Standard_").split("_", 1)[-1].replace("_", "") + " Series"
    out["productName"] = out["productName"].replace("DSv3 Series", series).replace("Dalsv7 Series", series)
    out.update(armSkuName=size, armRegionName=region, retailPrice=float(price), unitPrice=float(price))
    return out


def _kind(item: dict[str, Any]) -> str:
    windows, sku = item["productName"].endswith(" Windows"), item["skuName"]
    if sku.endswith(" Spot"):
        return "windows_spot" if windows else "spot"
    if sku.endswith(" Low Priority"):
        return "low_priority"
    return "windows" if windows else "linux"


def size_items(size: str, prices: dict[str, str], region: str) -> list[dict[str, Any]]:
    """One size's rows of every kind the recorded pages show."""
    items = []
    for item in _items(CONSUMPTION):
        gpu = _gpu(item, size, prices[_kind(item)], region)
        if gpu.get("savingsPlan"):  # "3 Years" then "1 Year", as recorded
            gpu["savingsPlan"] = [
                {"unitPrice": float(prices[t]), "retailPrice": float(prices[t]), "term": term}
                for t, term in (("savings_3y", "3 Years"), ("savings_1y", "1 Year"))
            ]
        items.append(gpu)
    for item in _items(RESERVATION):
        if item["type"] == "Reservation":
            term = "reservation_1y" if item["reservationTerm"] == "1 Year" else "reservation_3y"
            items.append(_gpu(item, size, prices[term], region))
    items.append(_gpu(_items(DEVTEST)[0], size, prices["devtest"], region))
    return items


def gpu_items(region: str = "eastus") -> list[dict[str, Any]]:
    """The rows of every kind of the ND96isr_H100_v5 and the NC24ads_A100_v4, the Linux pay-as-you-go row of the
    table's other sizes in the region, and two traps."""
    from gpufinops.ingest.azure.azure_prices import gpu_inventory

    items = [item for size, prices in SIZE_PRICES.items() for item in size_items(size, prices, region)]
    for item in items:
        if item["armSkuName"] == A100:
            item["armSkuName"] = A100 + "  "  # the API's trailing spaces
    linux = next(i for i in _items(CONSUMPTION) if _kind(i) == "linux")
    others = sorted(set(linux_on_demand(region)) & set(gpu_inventory()) - set(SIZE_PRICES))
    items += [_gpu(linux, size, linux_on_demand(region)[size], region) for size in others]
    fpga = _gpu(linux, "Standard_NP10s", "1.65", region)  # "Standard_N", but an FPGA size
    return items + [fpga] + _items(CONSUMPTION)


class RetailPrices:
    """The server; ``pages`` holds what was asked, ``loop`` makes page 2 link back to page 2 (a cycle)."""

    def __init__(self, loop: bool = False) -> None:
        self.requests: list[str] = []
        self.loop = loop
        server = self

        class Handler(JsonHandler):
            content_type = "application/json; charset=utf-8"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests.append(self.path)
                body, status = server.answer(self.path)
                self._json(status, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/api/retail/prices"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[dict[str, Any], int]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        odata = query.get("$filter", [""])[0]
        if "priceType eq 'OnDemand'" in odata:
            return json.loads((RECORDED / "eastus_standard_d2s_v3_pricetype_ondemand.json").read_text()), 400
        region = odata.split("armRegionName eq '", 1)[-1].split("'", 1)[0]
        items = gpu_items(region) if region == "eastus" else []
        skip = int(query.get("$skip", ["0"])[0])
        half = len(items) // 2
        page = items[:half] if skip == 0 else items[half:]
        link = None
        if skip == 0 and items or self.loop:
            link = f"{self.url}?{urllib.parse.urlencode({**{k: v[0] for k, v in query.items()}, '$skip': half})}"
        envelope = json.loads(CONSUMPTION.read_text(encoding="utf-8"))
        envelope.update(Items=page, Count=len(page), NextPageLink=link)
        return envelope, 200

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def conformance_input(tmp: Path) -> tuple[dict, Any]:
    from datetime import UTC, datetime

    server = RetailPrices()
    return {"regions": ["eastus"], "endpoint": server.url, "outputs": ["price_catalog"]}, datetime(
        2000, 1, 1, tzinfo=UTC
    )
