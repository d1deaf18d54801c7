"""Azure Resource Manager's listings as the storage inventory reads them (``azure_storage``, its doctor check):
each ``{"value": [...], "nextLink": ...}`` page through the one paging layer and the one transport, with a bearer
token from the variable ``token_env`` names or ``azure-identity``'s default credential chain."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from gpufinops.ingest.core import extras, paging, transport
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.spec import OptionProblem, TransportOptions, option
from gpufinops.kernel import ranges

ARM = "https://management.azure.com"
LISTINGS = {  # what -> (ARM path under the subscription, api-version)
    "virtualMachines": ("providers/Microsoft.Compute/virtualMachines", "2024-07-01"),
    "disks": ("providers/Microsoft.Compute/disks", "2024-03-02"),
    "snapshots": ("providers/Microsoft.Compute/snapshots", "2024-03-02"),
}


@dataclass(frozen=True, kw_only=True)
class AzureStorageOptions(TransportOptions):
    subscription: str = option(doc="the subscription id whose managed disks and snapshots are listed")
    endpoint: str = option(ARM, "Azure Resource Manager's URL (a sovereign cloud's, or a test server)")
    token_env: str | None = option(None, "the variable holding an ARM bearer token (else the default chain)")
    team_tag_keys: list[str] = option(["team"], "tags that name a disk's or snapshot's team")
    retries: int = option(3, "retries of a page answered 429/5xx or a failed connection", range=ranges.NON_NEGATIVE)

    def validate(self) -> None:
        if not self.subscription or not all(c.isalnum() or c == "-" for c in self.subscription):
            raise OptionProblem("subscription", f"a subscription id is required (got {self.subscription!r})")
        if not (self.endpoint.startswith("https://") or self.endpoint.startswith("http://127.0.0.1")):
            raise OptionProblem("endpoint", "must be an https URL (or a loopback test server)")


def bearer_token(source: str, options: AzureStorageOptions) -> str:
    if options.token_env:
        token = os.environ.get(options.token_env, "")
        if not token:
            raise IngestError(f"{source}: the variable {options.token_env} (token_env) is not set")
        return token
    identity = extras.require("azure.identity", "azure", f"{source}: Azure's default credential chain")
    return str(identity.DefaultAzureCredential().get_token(f"{options.endpoint}/.default").token)


def listing(source: str, options: AzureStorageOptions, what: str, token: str) -> list[dict[str, Any]]:
    """Every resource of one ARM listing, its nextLink followed within the bounds."""
    path, version = LISTINGS[what]
    bounds = options.bounds()
    pages = paging.Pages(source, f"ARM {what} list", bounds=bounds)
    url: str | None = f"{options.endpoint}/subscriptions/{options.subscription}/{path}?api-version={version}"
    headers = {"Accept": "application/json", "Authorization": f"Bearer {token}"}
    items: list[dict[str, Any]] = []
    while url:
        shown = url.split("?", 1)[0]
        answer = transport.get_retried(source, url, bounds, headers, options.retries)
        try:
            page = json.loads(answer.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise IngestError(f"{source}: {shown} answered a page that is not JSON: {exc}") from None
        if not isinstance(page, dict) or not isinstance(page.get("value"), list):
            raise IngestError(f"{source}: {shown} answered a page without a value list")
        items += [i for i in page["value"] if isinstance(i, dict)]
        url = pages.follow(page.get("nextLink") or None)
    return items
