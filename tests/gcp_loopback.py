"""A loopback Cloud Billing Catalog REST server and the GCP conformance fixtures.

The server answers ``GET /v1/services/6F81-5844-456A/skus?pageToken=…`` with the real first page
(``tests/data/gcp/gcp_compute_skus_page.json``, opencost) and the pages built in the same schema
(``gcp_gpu_skus_pages.json``), page by page through ``nextPageToken``; it can answer the first
requests with 429/503, and records every request's path and query.
"""

from __future__ import annotations

import atexit
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from tests.http_loopback import JsonHandler, serving

GCP_DATA = Path(__file__).parent / "data" / "gcp"
PRICE_CHANGES = Path(__file__).parent / "data" / "gcp-pricing-cyclenerd" / "gcp_gpu_machine_price_changes.csv"
SKUS_PATH = "/v1/services/6F81-5844-456A/skus"
TIME_COLUMNS = {"price_catalog": "effective_time", "price_history": "effective_from"}


def sku_pages() -> dict[str, dict]:
    """pageToken -> page: the real first page, then the built ones."""
    first = json.loads((GCP_DATA / "gcp_compute_skus_page.json").read_text())
    built = json.loads((GCP_DATA / "gcp_gpu_skus_pages.json").read_text())["pages"]
    return {"": first, **built}


@dataclass
class CatalogServer:
    pages: dict[str, dict]
    failures: list[int] = field(default_factory=list)  # statuses answered to the first requests, in order
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    url: str = ""


def _handler(state: CatalogServer):
    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parsed = urlparse(self.path)
            query = parse_qs(parsed.query)
            state.requests.append((parsed.path, query))
            if state.failures:
                status = state.failures.pop(0)
                self._json(
                    status,
                    {
                        "error": {
                            "code": status,
                            "message": "try again later",
                            "status": "RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE",
                        }
                    },
                )
                return
            if parsed.path != SKUS_PATH:
                self._json(
                    404, {"error": {"code": 404, "message": f"no such path {parsed.path}", "status": "NOT_FOUND"}}
                )
                return
            token = query.get("pageToken", [""])[0]
            if token not in state.pages:
                self._json(400, {"error": {"code": 400, "message": "bad page token", "status": "INVALID_ARGUMENT"}})
                return
            self._json(200, state.pages[token])

    return Handler


@contextmanager
def catalog_server(pages: dict[str, dict] | None = None, failures: list[int] | None = None) -> Iterator[CatalogServer]:
    state = CatalogServer(pages if pages is not None else sku_pages(), list(failures or []))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield state


# ---- koku's export rows ----------------------------------------------------------------------------


def ends_before_it_starts(row: dict) -> bool:
    """koku's hand-made ``tmp_example.csv`` holds 9 rows whose usage_end_time is before their
    usage_start_time (no real export has them); gpufinops refuses such rows (tests/test_fuzz.py), so
    the tests that load koku's rows as good data leave them out."""

    def moment(text) -> str:
        return str(text).replace(" UTC", "+00:00")

    return bool(row.get("usage_end_time")) and moment(row["usage_end_time"]) < moment(row["usage_start_time"])


def koku_flat_rows(name: str) -> list[dict]:
    from gpufinops.ingest.gcp.gcp_export_files import read_flat_csv

    return [
        r
        for r in read_flat_csv("test", str(GCP_DATA / name)).to_pylist()
        if not ends_before_it_starts({k: str(v) for k, v in r.items() if k.startswith("usage_")})
    ]


# koku's flattened GCP billing exports the BigQuery tests load (tests/data/gcp)
KOKU = ("202011_30c31bca571d9b7f3b2c8459dd8bc34a_2020-11-08_2020-11-11.csv", "2022-08-01_5.csv", "tmp_example.csv")


def koku_rows() -> list[dict]:
    """Every row of the :data:`KOKU` files, less those that end before they start."""
    rows = []
    for name in KOKU:
        rows += koku_flat_rows(name)
    return rows


def copy_consistent_csv(name: str, target: Path) -> None:
    """koku's flattened CSV ``name`` without the rows :func:`ends_before_it_starts` finds."""
    import csv

    with open(GCP_DATA / name, newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if not ends_before_it_starts(r)]
    with open(target, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=reader.fieldnames or ())
        writer.writeheader()
        writer.writerows(rows)


# ---- conformance fixtures (tests/test_conformance.py) -------------------------------------------

_SERVERS: list = []  # servers kept alive for the rest of the session (the suite runs the source three times)


def gcp_billing_export_input(tmp: Path) -> tuple[dict, datetime]:
    """Real koku standard/detailed export rows (flattened CSV) read through the files mode."""
    for name in (
        "202011_30c31bca571d9b7f3b2c8459dd8bc34a_2020-11-08_2020-11-11.csv",
        "2022-08-01_5.csv",
        "tmp_example.csv",
    ):
        copy_consistent_csv(name, tmp / name)
    return {"path": str(tmp / "*.csv")}, datetime(2020, 10, 1, tzinfo=UTC)


def gcp_catalog_input(tmp: Path) -> tuple[dict, datetime]:
    """The catalogue table alone: the suite counts the target table's rows against the run's."""
    context = catalog_server()
    server = context.__enter__()
    # Stopped by atexit, while its daemon thread still runs: left to the garbage collector, the generator's
    # `finally` ran during interpreter shutdown, after daemon threads had stopped, and `server.shutdown()`
    # waited forever for a serve_forever that would never return (the hang of the stop-22 CI run).
    _SERVERS.append(context)
    atexit.register(context.__exit__, None, None, None)
    return {"endpoint": server.url, "currency": "USD", "outputs": ["price_catalog"]}, datetime(2021, 1, 1, tzinfo=UTC)


def gcp_price_history_input(tmp: Path) -> tuple[dict, datetime]:
    shutil.copy(PRICE_CHANGES, tmp / PRICE_CHANGES.name)
    return {"path": str(tmp / PRICE_CHANGES.name), "outputs": ["price_history"]}, datetime(2022, 2, 1, tzinfo=UTC)


def negative_usage_none(_: Path) -> int:
    """The koku rows bill no usage negative (credits are a separate nested column)."""
    return 0


FIXTURES = {
    "gcp_billing_export": gcp_billing_export_input,
    "gcp_catalog": gcp_catalog_input,
    "gcp_price_history": gcp_price_history_input,
}
NEGATIVE_USAGE = {"gcp_billing_export": negative_usage_none}
