"""Prices and hardware as published: instance and machine types, GPU specifications, the shipped GPU
instance inventory, spot prices and interruption bands, price catalogues and price history.

Written by the price ingestors (``ingest/aws/aws_*.py``, ``ingest/gcp/gcp_catalog.py``, …) and by
``warehouse/reference.py`` (the bundled CSVs); read by the models that price a change.
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_groups import LOADED_BY
from gpufinops.warehouse.column_types import UTC_TS

# An instance or machine type in one provider's region (what a price applies to).
_REGIONAL_TYPE: tuple[pa.Field, ...] = (
    pa.field("provider", pa.string()),
    pa.field("region", pa.string()),
    pa.field("instance_type", pa.string()),
)

# Where a reference row was published (the source that refreshed it) and when it was refreshed.
_PUBLISHED: tuple[pa.Field, ...] = (
    pa.field("source", pa.string()),
    pa.field("updated_at", UTC_TS),
)

SPOT_PRICES = pa.schema(
    [
        ("provider", pa.string()),
        ("region", pa.string()),
        ("zone", pa.string()),
        ("instance_type", pa.string()),
        ("product", pa.string()),
        ("ts", UTC_TS),
        ("price_usd", pa.decimal128(18, 8)),
    ]
)

INSTANCE_TYPES = pa.schema(
    [
        *_REGIONAL_TYPE,
        ("gpu_model", pa.string()),
        ("gpu_count", pa.int32()),
        ("gpu_memory_gib", pa.float64()),
        ("vcpus", pa.int32()),
        ("memory_gib", pa.float64()),
        ("on_demand_usd_per_hour", pa.decimal128(18, 8)),
        *_PUBLISHED,
    ]
)

GPU_SPECS = pa.schema(
    [
        ("gpu_model", pa.string()),
        ("memory_gib", pa.float64()),
        ("memory_bandwidth_gbps", pa.float64()),
        ("fp32_tflops", pa.float64()),
        ("fp16_tflops", pa.float64()),
        ("bf16_tflops", pa.float64()),
        ("int8_tops", pa.float64()),
        ("tdp_w", pa.float64()),
        ("list_price_usd", pa.decimal128(12, 2)),
        ("source_url", pa.string()),
    ]
)

# The shipped GPU instance inventory (warehouse/data/gpu_instance_types.csv): what each AWS instance type and
# GCP machine type carries, independent of the bill. gpu_* describe GPUs (accelerator 'gpu'); accelerator_*
# describe Trainium/Inferentia chips, which have gpu_count 0. GPU-equivalents = gpu_count * gpu_fraction
# (a g6f.large is gpu_count 1, gpu_fraction 0.125). vcpus/memory_gib are NULL only for GCP n1+GPU rows.
GPU_INSTANCE_REFERENCE = pa.schema(
    [
        ("provider", pa.string()),
        ("instance_type", pa.string()),
        ("accelerator", pa.string()),
        ("gpu_model", pa.string()),
        ("gpu_count", pa.int32()),
        ("gpu_fraction", pa.float64()),
        ("gpu_memory_gib", pa.float64()),
        ("accelerator_model", pa.string()),
        ("accelerator_count", pa.int32()),
        ("accelerator_memory_gib", pa.float64()),
        ("vcpus", pa.int32()),
        ("memory_gib", pa.float64()),
        ("source_url", pa.string()),
    ]
)

# AWS spot advisor interruption-frequency bands (reference for the spot model): band_index 0–4 is
# "<5%" … ">20%" of spot instances interrupted per month; savings_pct is the saving over on-demand.
SPOT_INTERRUPTION_BANDS = pa.schema(
    [
        ("provider", pa.string()),
        ("region", pa.string()),
        ("os", pa.string()),
        ("instance_type", pa.string()),
        ("band_index", pa.int32()),
        ("band_label", pa.string()),
        ("band_max_pct", pa.int32()),
        ("savings_pct", pa.int32()),
        *_PUBLISHED,
    ]
)

# Cloud price catalogues as published, one row per SKU price tier and region (GCP Cloud Billing
# Catalog, …). Prices stay in their own currency, exact; a SKU whose unit or currency is not
# understood is kept with `flag` saying why, never silently converted.
PRICE_CATALOG = pa.schema(
    [
        ("provider", pa.string()),
        ("service_id", pa.string()),
        ("sku_id", pa.string()),
        ("description", pa.string()),
        ("resource_family", pa.string()),
        ("resource_group", pa.string()),
        ("usage_type", pa.string()),
        ("region", pa.string()),
        ("gpu_model", pa.string()),
        ("usage_unit", pa.string()),
        ("currency", pa.string()),
        ("start_usage_amount", pa.decimal128(38, 15)),
        ("unit_price", pa.decimal128(38, 15)),
        ("effective_time", UTC_TS),
        ("flag", pa.string()),
        *LOADED_BY,
    ]
)

# A machine type's price over time (each row effective from `effective_from` until the next one):
# on-demand, spot and commitment prices per provider, region and instance/machine type.
PRICE_HISTORY = pa.schema(
    [
        *_REGIONAL_TYPE,
        ("pricing", pa.string()),  # on_demand | spot | commit_1y | commit_3y
        ("effective_from", UTC_TS),
        ("price", pa.decimal128(18, 8)),
        ("currency", pa.string()),
        *LOADED_BY,
    ]
)
