"""The bill's columns: FOCUS 1.2 cost line items with the product's x_ extensions, and their daily rollup.

Written by every cost ingestor (``ingest/aws``, ``ingest/gcp``, ``ingest/onprem``, FOCUS files) and kept in
step by ``derived/rollups.py``; ``warehouse/schema.py`` lists these tables with the others.
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_types import DECIMAL, JSON_META, UTC_TS
from gpufinops.warehouse.focus_spec import FOCUS_12_COLUMNS

_SPEC_TYPES = {"String": pa.string(), "Decimal": DECIMAL, "Date/Time": UTC_TS, "JSON": pa.string()}


def _focus_field(name: str, spec_type: str) -> pa.Field:
    metadata = JSON_META if spec_type == "JSON" else None
    return pa.field(name, _SPEC_TYPES[spec_type], nullable=True, metadata=metadata)


FOCUS_MANDATORY = tuple(name for name, _, level in FOCUS_12_COLUMNS if level == "Mandatory")

# x_ extensions (FOCUS's own convention for provider / tool columns).
COST_EXTENSIONS = (
    pa.field("x_InstanceType", pa.string()),
    pa.field("x_GpuModel", pa.string()),
    pa.field("x_GpuCount", pa.int32()),
    pa.field("x_Team", pa.string()),
    pa.field("x_Source", pa.string()),  # the configured source that loaded the row (slice key)
    pa.field("x_IngestRunId", pa.string()),
    pa.field("x_ProviderColumns", pa.string()),  # the provider's own x_ columns of the line, as JSON (Azure's)
)

COST_LINE_ITEMS = pa.schema(
    [_focus_field(name, spec_type) for name, spec_type, _ in FOCUS_12_COLUMNS] + list(COST_EXTENSIONS)
)

# Daily cost per source, provider, team and service, kept in step with cost_line_items by every cost
# load (derived/rollups.py): the dashboard's spend pages read days, not millions of line items.
COST_DAILY = pa.schema(
    [
        ("day", UTC_TS),
        ("source", pa.string()),
        ("provider", pa.string()),
        ("team", pa.string()),
        ("service", pa.string()),
        ("gpu_model", pa.string()),
        ("billed_cost", DECIMAL),
        ("effective_cost", DECIMAL),
        ("gpu_cost", DECIMAL),  # EffectiveCost of lines with a GPU (any charge category)
        ("gpu_usage_cost", DECIMAL),
        ("gpu_usage_lines", pa.int64()),  # GPU usage lines of a billed resource
        ("line_items", pa.int64()),
        ("last_charge", UTC_TS),
    ]
)
