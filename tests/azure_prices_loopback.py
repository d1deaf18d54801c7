"""A loopback Retail Prices API: the recorded pages of tests/data/azure/retail-prices-finfocus (real bodies of
prices.azure.com, Apache-2.0) and GPU-size pages built from them.

No public recording of a GPU size's Retail Prices page exists, so the GPU items are the recorded D2s v3 items
with their size, names and prices replaced (every other field, the page's envelope and ``NextPageLink`` paging
as recorded). The server splits a region's items over two pages linked by ``NextPageLink`` ($skip), as the API
does at 1,000 items.
"""

from __future__ import annotations

import copy
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
H100 = "Standard_ND96isr_H100_v5"
# (size, meter) -> price of each recorded row kind; reservations are the whole term's price, as the API gives them
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


def _items(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["Items"]


def _gpu(item: dict[str, Any], size: str, price: str, region: str) -> dict[str, Any]:
    out = copy.deepcopy(item)
    meter = size.removeprefix("Standard_").replace("_", " ")
    for key in ("skuName", "meterName"):
        out[key] = out[key].replace("D2s v3", meter).replace("D2als v7", meter)
    out["productName"] = (
        out["productName"].replace("DSv3 Series", "NDisrH100v5 Series").replace("Dalsv7 Series", "NDisrH100v5 Series")
    )
    out.update(armSkuName=size, armRegionName=region, retailPrice=float(price), unitPrice=float(price))
    return out


def gpu_items(region: str = "eastus") -> list[dict[str, Any]]:
    """The ND96isr_H100_v5's rows of every kind the recorded pages show, and two traps."""
    items = []
    for item in _items(CONSUMPTION):
        windows, sku = item["productName"].endswith(" Windows"), item["skuName"]
        kind = (
            ("windows_spot" if windows else "spot")
            if sku.endswith(" Spot")
            else "low_priority"
            if sku.endswith(" Low Priority")
            else ("windows" if windows else "linux")
        )
        gpu = _gpu(item, H100, PRICES[kind], region)
        if gpu.get("savingsPlan"):  # "3 Years" then "1 Year", as recorded
            gpu["savingsPlan"] = [
                {
                    "unitPrice": float(PRICES["savings_3y"]),
                    "retailPrice": float(PRICES["savings_3y"]),
                    "term": "3 Years",
                },
                {
                    "unitPrice": float(PRICES["savings_1y"]),
                    "retailPrice": float(PRICES["savings_1y"]),
                    "term": "1 Year",
                },
            ]
        items.append(gpu)
    for item in _items(RESERVATION):
        if item["type"] == "Reservation":
            term = "reservation_1y" if item["reservationTerm"] == "1 Year" else "reservation_3y"
            items.append(_gpu(item, H100, PRICES[term], region))
    items.append(_gpu(_items(DEVTEST)[0], H100, PRICES["devtest"], region))
    trailing = _gpu(_items(CONSUMPTION)[-2], "Standard_NC24ads_A100_v4", "3.673", region)
    trailing["armSkuName"] = "Standard_NC24ads_A100_v4  "  # the API's trailing spaces
    fpga = _gpu(_items(CONSUMPTION)[-2], "Standard_NP10s", "1.65", region)  # "Standard_N", but an FPGA size
    return items + [trailing, fpga] + _items(CONSUMPTION)


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
    return {"regions": ["eastus"], "endpoint": server.url}, datetime(2000, 1, 1, tzinfo=UTC)
