"""Groups of spec facts that several built-in sources share because they load the same way, stated once.

A spec spreads a group into its ``IngestorMeta`` (``IngestorMeta(**spec_facts.PRICE_CATALOGUE, name=...)``)
and states every other fact itself; a group is only what follows from one way of loading, never a default.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gpufinops.ingest.core.registry import Cursor, Extra, Freshness, Transport

# Reads AWS APIs: the [aws] extra's boto3, at the options' endpoint_url, paged.
AWS_API: dict[str, Any] = {
    "provider": "aws",
    "extra": Extra(name="aws", unless=None),
    "transport": Transport(client="boto3", endpoint="endpoint_url", paged=True, unless=None),
}

# Reads local files (paths and globs) and remembers each one's fingerprint: a run reads the new and changed
# files only, so no lookback; no SDK and no network transport, whatever provider wrote the files.
LOCAL_FILES: dict[str, Any] = {
    "cursor": Cursor(remembers="file fingerprints (size, mtime)", resume_item=None),
    "lookback": timedelta(0),
    "provider": None,
    "extra": None,
    "transport": None,
}

# A provider's price catalogue: a run replaces the rows of the regions it read when the catalogue's digest
# changed (reference tables, no source column); providers revise list prices every few days at most.
PRICE_CATALOGUE: dict[str, Any] = {
    "slice_expr": "provider || '|' || region",
    "source_column": None,
    "cursor": Cursor(remembers="digest of the last catalogue loaded", resume_item=None),
    "lookback": timedelta(0),
    "time_range": False,
    "freshness": Freshness(kind="prices", lag_hours=168.0),
}

# A storage inventory (aws_storage, gcp_storage): the latest listing of the account replaces the source's
# inventory, at most once an hour (a second run within the hour over an unchanged account is skipped).
STORAGE_INVENTORY: dict[str, Any] = {
    "target_table": "storage_volumes",
    "key": ("source", "volume_id"),
    "slice_expr": "source",
    "source_column": "source",
    "cursor": Cursor(remembers="digest of the last inventory", resume_item=None),
    "lookback": timedelta(0),
    "time_range": False,
    "freshness": Freshness(kind="inventory", lag_hours=24.0),
}
