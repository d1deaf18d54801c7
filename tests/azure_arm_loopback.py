"""A loopback Azure Resource Manager answering the three listings ``azure_storage`` reads, in their documented
shapes (learn.microsoft.com/rest/api/compute: Virtual Machines - List All, Disks - List, Snapshots - List):
``{"value": [...], "nextLink": ...}``, one resource a page so every listing pages, 401 without the bearer token.
The test owns ``state`` and changes it between inventories (a disk detached). Every request is recorded."""

from __future__ import annotations

import os
import threading
import urllib.parse
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.azure_focuscost_data import SUBSCRIPTION as SUB
from tests.http_loopback import JsonHandler

TOKEN = "arm-test-token-not-a-secret"
TOKEN_ENV = "GPUFINOPS_TEST_ARM_TOKEN"
GROUP = f"/subscriptions/{SUB}/resourceGroups/ml-rg/providers"
VM = f"{GROUP}/Microsoft.Compute/virtualMachines/h100-train-01"
DATA_DISK = f"{GROUP}/Microsoft.Compute/disks/h100-data"
OLD_DISK = f"{GROUP}/Microsoft.Compute/disks/h100-old-data"
SNAPSHOT = f"{GROUP}/Microsoft.Compute/snapshots/h100-data-weekly"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f0+00:00")  # ARM writes 7 fractional digits


def disk(resource_id: str, managed_by: str | None, created: datetime, **properties: Any) -> dict[str, Any]:
    return {
        "name": resource_id.rsplit("/", 1)[-1],
        "id": resource_id,
        "type": "Microsoft.Compute/disks",
        "location": "eastus",
        "tags": {"team": "research"},
        "sku": {"name": "Premium_LRS", "tier": "Premium"},
        "zones": ["1"],
        **({"managedBy": managed_by} if managed_by else {}),
        "properties": {
            "creationData": {"createOption": "Empty"},
            "diskSizeGB": 1024,
            "diskIOPSReadWrite": 5000,
            "diskMBpsReadWrite": 200,
            "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
            "timeCreated": _stamp(created),
            "provisioningState": "Succeeded",
            "diskState": "Attached" if managed_by else "Unattached",
            "diskSizeBytes": 1024 * 2**30,
            "tier": "P30",
            **properties,
        },
    }


def initial_state(now: datetime) -> dict[str, list[dict[str, Any]]]:
    """An ND96isr_H100_v5 with two P30 disks (one detached 30 days ago) and a snapshot of the other."""
    return {
        "virtualMachines": [
            {
                "name": "h100-train-01",
                "id": VM.replace("resourceGroups/ml-rg", "resourceGroups/ML-RG"),  # ARM's case is the group's own
                "type": "Microsoft.Compute/virtualMachines",
                "location": "eastus",
                "properties": {"hardwareProfile": {"vmSize": "Standard_ND96isr_H100_v5"}},
            }
        ],
        "disks": [
            disk(DATA_DISK, VM, now - timedelta(days=120)),
            disk(OLD_DISK, VM, now - timedelta(days=90)),
        ],
        "snapshots": [
            {
                "name": "h100-data-weekly",
                "id": SNAPSHOT,
                "type": "Microsoft.Compute/snapshots",
                "location": "eastus",
                "tags": {"team": "research"},
                "sku": {"name": "Standard_LRS", "tier": "Standard"},
                "properties": {
                    "creationData": {"createOption": "Copy", "sourceResourceId": DATA_DISK},
                    "diskSizeGB": 1024,
                    "timeCreated": _stamp(now - timedelta(days=7)),
                    "incremental": True,
                },
            }
        ],
    }


class Arm:
    def __init__(self, state: dict[str, list[dict[str, Any]]]) -> None:
        self.state = state
        self.requests: list[str] = []
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests.append(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._json(401, {"error": {"code": "AuthenticationFailed", "message": "no token"}})
                return self._json(200, server.answer(self.path))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, path: str) -> dict[str, Any]:
        url = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(url.query))
        items = self.state.get(url.path.rsplit("/", 1)[-1], [])
        at = int(query.get("$skiptoken", "0"))
        nxt = {**query, "$skiptoken": str(at + 1)}
        link = f"{self.url}{url.path}?{urllib.parse.urlencode(nxt)}" if at + 1 < len(items) else None
        return {"value": items[at : at + 1], **({"nextLink": link} if link else {})}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def conformance_input(tmp: Path) -> tuple[dict, datetime]:
    """tests/test_conformance.py's input: the subscription above on a loopback ARM (kept for the session)."""
    now = datetime.now(UTC)
    os.environ[TOKEN_ENV] = TOKEN
    server = Arm(initial_state(now))
    return {"subscription": SUB, "endpoint": server.url, "token_env": TOKEN_ENV}, now - timedelta(days=121)
