"""The warehouse's column contract: pyarrow schemas, the DDL derived from them, and migrations.

Every table's columns are defined once, here, as a pyarrow schema. The DuckDB DDL is generated from
the schema, and every ingestor returns data in exactly that schema, so a column can not drift
between the loader, the tables and the queries. When a table changes, append a migration to
``warehouse/migrations/`` (the shipped ones are frozen: tests/test_migrations.py checks that a warehouse
migrated from any old version equals a fresh one, and that a fresh one has these schemas' columns);
``warehouse.db.prepare()`` applies the missing ones once, at a process's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from gpufinops.warehouse.focus_spec import FOCUS_12_COLUMNS as FOCUS_12_COLUMNS
from gpufinops.warehouse.migrations import MIGRATIONS as MIGRATIONS
from gpufinops.warehouse.migrations import SCHEMA_VERSION as SCHEMA_VERSION
from gpufinops.warehouse.storage_schema import STORAGE_TABLES

FOCUS_MANDATORY = tuple(name for name, _, level in FOCUS_12_COLUMNS if level == "Mandatory")

# Money and quantities: exact decimals. 15 fractional digits hold every value of the real FOCUS and
# CUR files (their finest is 15, quantities); 23 integral digits hold any bill.
DECIMAL = pa.decimal128(38, 15)
UTC_TS = pa.timestamp("us", tz="UTC")
JSON_META = {b"sql_type": b"JSON"}

_SPEC_TYPES = {"String": pa.string(), "Decimal": DECIMAL, "Date/Time": UTC_TS, "JSON": pa.string()}


def _focus_field(name: str, spec_type: str) -> pa.Field:
    metadata = JSON_META if spec_type == "JSON" else None
    return pa.field(name, _SPEC_TYPES[spec_type], nullable=True, metadata=metadata)


# x_ extensions (FOCUS's own convention for provider / tool columns).
COST_EXTENSIONS = (
    pa.field("x_InstanceType", pa.string()),
    pa.field("x_GpuModel", pa.string()),
    pa.field("x_GpuCount", pa.int32()),
    pa.field("x_Team", pa.string()),
    pa.field("x_Source", pa.string()),  # the configured source that loaded the row (slice key)
    pa.field("x_IngestRunId", pa.string()),
)

COST_LINE_ITEMS = pa.schema(
    [_focus_field(name, spec_type) for name, spec_type, _ in FOCUS_12_COLUMNS] + list(COST_EXTENSIONS)
)

SPOT_PRICES = pa.schema([
    ("provider", pa.string()), ("region", pa.string()), ("zone", pa.string()),
    ("instance_type", pa.string()), ("product", pa.string()), ("ts", UTC_TS),
    ("price_usd", pa.decimal128(18, 8)),
])

INSTANCE_TYPES = pa.schema([
    ("provider", pa.string()), ("region", pa.string()), ("instance_type", pa.string()),
    ("gpu_model", pa.string()), ("gpu_count", pa.int32()), ("gpu_memory_gib", pa.float64()),
    ("vcpus", pa.int32()), ("memory_gib", pa.float64()),
    ("on_demand_usd_per_hour", pa.decimal128(18, 8)), ("source", pa.string()),
    ("updated_at", UTC_TS),
])

GPU_SPECS = pa.schema([
    ("gpu_model", pa.string()), ("memory_gib", pa.float64()), ("memory_bandwidth_gbps", pa.float64()),
    ("fp32_tflops", pa.float64()), ("fp16_tflops", pa.float64()), ("bf16_tflops", pa.float64()),
    ("int8_tops", pa.float64()), ("tdp_w", pa.float64()), ("list_price_usd", pa.decimal128(12, 2)),
    ("source_url", pa.string()),
])

# The shipped GPU instance inventory (warehouse/data/gpu_instance_types.csv): what each AWS instance type and
# GCP machine type carries, independent of the bill. gpu_* describe GPUs (accelerator 'gpu'); accelerator_*
# describe Trainium/Inferentia chips, which have gpu_count 0. GPU-equivalents = gpu_count * gpu_fraction
# (a g6f.large is gpu_count 1, gpu_fraction 0.125). vcpus/memory_gib are NULL only for GCP n1+GPU rows.
GPU_INSTANCE_REFERENCE = pa.schema([
    ("provider", pa.string()), ("instance_type", pa.string()), ("accelerator", pa.string()),
    ("gpu_model", pa.string()), ("gpu_count", pa.int32()), ("gpu_fraction", pa.float64()),
    ("gpu_memory_gib", pa.float64()), ("accelerator_model", pa.string()), ("accelerator_count", pa.int32()),
    ("accelerator_memory_gib", pa.float64()), ("vcpus", pa.int32()), ("memory_gib", pa.float64()),
    ("source_url", pa.string()),
])

GPU_METRICS_HOURLY = pa.schema([
    ("hour", UTC_TS), ("gpu_uuid", pa.string()), ("gpu_model", pa.string()),
    ("mig_instance", pa.string()), ("host", pa.string()), ("resource_id", pa.string()),
    ("team", pa.string()),
    ("util_mean", pa.float64()), ("util_p95", pa.float64()), ("util_max", pa.float64()),
    ("mem_used_max_mib", pa.float64()), ("mem_total_mib", pa.float64()),
    ("sm_active_mean", pa.float64()), ("tensor_active_mean", pa.float64()),
    ("power_mean_w", pa.float64()), ("samples", pa.int32()),
    ("source", pa.string()), ("ingest_run_id", pa.string()),
    # v6: the exporter's own hints, kept so that a bill arriving later (or restated) can always be
    # matched: resource_id / team are derived from them (warehouse/attribution.py).
    ("resource_hint", pa.string()), ("provider_id", pa.string()), ("namespace", pa.string()),
    ("pod", pa.string()), ("container", pa.string()),
])
GPU_METRICS_HINTS = ("resource_hint", "provider_id", "namespace", "pod", "container")

# Per-process GPU memory (nvidia-smi --query-compute-apps), hourly per (host, gpu_uuid, pid, process_name).
GPU_PROCESSES_HOURLY = pa.schema([
    ("hour", UTC_TS), ("gpu_uuid", pa.string()), ("host", pa.string()), ("pid", pa.int32()),
    ("process_name", pa.string()), ("mem_used_max_mib", pa.float64()), ("mem_used_mean_mib", pa.float64()),
    ("samples", pa.int32()), ("resource_id", pa.string()), ("team", pa.string()),
    ("source", pa.string()), ("ingest_run_id", pa.string()),
])

RECOMMENDATIONS = pa.schema([
    ("id", pa.string()), ("kind", pa.string()), ("team", pa.string()), ("provider", pa.string()),
    ("resource_id", pa.string()), ("workload", pa.string()),
    pa.field("current", pa.string(), metadata=JSON_META),
    pa.field("proposed", pa.string(), metadata=JSON_META),
    ("monthly_savings_usd", pa.decimal128(18, 2)), ("confidence", pa.float64()), ("risk", pa.string()),
    pa.field("evidence", pa.string(), metadata=JSON_META),
    ("created_at", UTC_TS), ("status", pa.string()),
    # v4: which model version made the finding, and a fingerprint of what a decision was made on
    # (a dismissed finding reopens only when this changes).
    ("model_version", pa.string()), ("evidence_hash", pa.string()),
    # v8: one plan per resource (models/plans.py): primary | step | alternative, and the plan's id
    ("plan", pa.string()), ("plan_id", pa.string()),
])

# v8: the on-prem comparison: every node group's (and workload's) verdict of the last model run —
# keep, shrink, burst — with its cost per used GPU-hour and break-even. Facts, not recommendations.
ONPREM_COMPARISON = pa.schema([
    ("id", pa.string()), ("team", pa.string()), ("resource_id", pa.string()), ("workload", pa.string()),
    ("pattern", pa.string()), ("action", pa.string()),
    pa.field("current", pa.string(), metadata=JSON_META), pa.field("proposed", pa.string(), metadata=JSON_META),
    ("monthly_savings_usd", pa.decimal128(18, 2)), ("confidence", pa.float64()),
    pa.field("evidence", pa.string(), metadata=JSON_META), ("model_version", pa.string()), ("created_at", UTC_TS),
])

DECISIONS = pa.schema([
    ("recommendation_id", pa.string()), ("decision", pa.string()), ("reason", pa.string()),
    ("actor", pa.string()), ("decided_at", UTC_TS),
])

INGEST_RUNS = pa.schema([
    ("run_id", pa.string()), ("source", pa.string()), ("source_type", pa.string()),
    ("started_at", UTC_TS), ("finished_at", UTC_TS), ("status", pa.string()),
    ("rows", pa.int64()), ("watermark", pa.string()), ("error", pa.string()),
    ("rows_rejected", pa.int64()),  # rows quarantined into ingest_rejects (on_invalid = "skip_rows"); schema 9
])

# Per-source incremental state (file fingerprints, cursors), written in the load's transaction.
INGEST_STATE = pa.schema([
    ("source", pa.string()), pa.field("state", pa.string(), metadata=JSON_META),
    ("updated_at", UTC_TS),
])

# AWS spot advisor interruption-frequency bands (reference for the spot model): band_index 0–4 is
# "<5%" … ">20%" of spot instances interrupted per month; savings_pct is the saving over on-demand.
SPOT_INTERRUPTION_BANDS = pa.schema([
    ("provider", pa.string()), ("region", pa.string()), ("os", pa.string()), ("instance_type", pa.string()),
    ("band_index", pa.int32()), ("band_label", pa.string()), ("band_max_pct", pa.int32()),
    ("savings_pct", pa.int32()), ("source", pa.string()), ("updated_at", UTC_TS),
])

# Cloud price catalogues as published, one row per SKU price tier and region (GCP Cloud Billing
# Catalog, …). Prices stay in their own currency, exact; a SKU whose unit or currency is not
# understood is kept with `flag` saying why, never silently converted.
PRICE_CATALOG = pa.schema([
    ("provider", pa.string()), ("service_id", pa.string()), ("sku_id", pa.string()),
    ("description", pa.string()), ("resource_family", pa.string()), ("resource_group", pa.string()),
    ("usage_type", pa.string()), ("region", pa.string()), ("gpu_model", pa.string()),
    ("usage_unit", pa.string()), ("currency", pa.string()), ("start_usage_amount", pa.decimal128(38, 15)),
    ("unit_price", pa.decimal128(38, 15)), ("effective_time", UTC_TS), ("flag", pa.string()),
    ("source", pa.string()), ("ingest_run_id", pa.string()),
])

# A machine type's price over time (each row effective from `effective_from` until the next one):
# on-demand, spot and commitment prices per provider, region and instance/machine type.
PRICE_HISTORY = pa.schema([
    ("provider", pa.string()), ("region", pa.string()), ("instance_type", pa.string()),
    ("pricing", pa.string()),  # on_demand | spot | commit_1y | commit_3y
    ("effective_from", UTC_TS), ("price", pa.decimal128(18, 8)), ("currency", pa.string()),
    ("source", pa.string()), ("ingest_run_id", pa.string()),
])

# The weekly report: one row per (week, recipient) — sent once, even across re-runs and restarts.
REPORT_DELIVERIES = pa.schema([
    ("report", pa.string()), ("week", pa.string()), ("recipient", pa.string()), ("status", pa.string()),
    ("attempts", pa.int32()), ("message_id", pa.string()), ("sent_at", UTC_TS), ("error", pa.string()),
    ("updated_at", UTC_TS),
])

# Webhook pushes of new recommendations (signed, retried).
WEBHOOK_DELIVERIES = pa.schema([
    ("delivery_id", pa.string()), ("url", pa.string()), ("payload_sha256", pa.string()),
    ("recommendation_ids", pa.string()), ("status", pa.string()), ("attempts", pa.int32()),
    ("last_attempt_at", UTC_TS), ("http_status", pa.int32()), ("error", pa.string()),
])

# Non-ingest jobs the daemon runs (recommend, report, feed push): the same ledger shape as ingest_runs.
JOB_RUNS = pa.schema([
    ("run_id", pa.string()), ("job", pa.string()), ("started_at", UTC_TS), ("finished_at", UTC_TS),
    ("status", pa.string()), ("error", pa.string()),
])

# Daily cost per source, provider, team and service, kept in step with cost_line_items by every cost
# load (warehouse/rollups.py): the dashboard's spend pages read days, not millions of line items.
COST_DAILY = pa.schema([
    ("day", UTC_TS), ("source", pa.string()), ("provider", pa.string()), ("team", pa.string()),
    ("service", pa.string()), ("gpu_model", pa.string()), ("billed_cost", DECIMAL), ("effective_cost", DECIMAL),
    ("gpu_cost", DECIMAL),  # EffectiveCost of lines with a GPU (any charge category)
    ("gpu_usage_cost", DECIMAL), ("gpu_usage_lines", pa.int64()),  # GPU usage lines of a billed resource
    ("line_items", pa.int64()), ("last_charge", UTC_TS),
])

# v6: the attribution rules of each source (a metrics source's resource_map and namespace_teams, an
# on-prem source's host_teams), kept in the warehouse so that every load resolves with them.
ATTRIBUTION_RULES = pa.schema([
    ("source", pa.string()), ("kind", pa.string()), ("key", pa.string()), ("value", pa.string()),
])

# v6: what each model run examined but did not recommend, why, and which fact / source was missing
# (replaced per kind by every model run, like the open recommendations).
WITHHELD_FINDINGS = pa.schema([
    ("kind", pa.string()), ("resource_id", pa.string()), ("team", pa.string()), ("provider", pa.string()),
    ("reason", pa.string()), ("detail", pa.string()), ("missing", pa.string()), ("source_hint", pa.string()),
    ("model_version", pa.string()), ("created_at", UTC_TS),
])

# v7: alerts (models/alerts.py rules, jobs/alerts delivery): one row per (rule, scope, period, threshold),
# its state open | resolved | expired | superseded, and what it said when it opened and when it closed.
ALERTS = pa.schema([
    ("alert_id", pa.string()), ("rule", pa.string()), ("scope", pa.string()), ("period", pa.string()),
    ("threshold", pa.string()), ("severity", pa.string()),
    pa.field("teams", pa.list_(pa.string()), metadata={b"sql_type": b"VARCHAR[]"}),  # [] = no team: finance only
    ("title", pa.string()), ("summary", pa.string()), ("value_usd", DECIMAL), ("limit_usd", DECIMAL),
    pa.field("details", pa.string(), metadata=JSON_META), ("status", pa.string()), ("resolution", pa.string()),
    ("opened_at", UTC_TS), ("evaluated_at", UTC_TS), ("closed_at", UTC_TS),
])

# The alert delivery ledger: one row per (alert, event, channel, target), written as 'pending' in the
# transaction that opens or resolves the alert; the alerts of one notification share its id.
ALERT_DELIVERIES = pa.schema([
    ("notification_id", pa.string()), ("alert_id", pa.string()), ("event", pa.string()),  # opened | resolved
    ("channel", pa.string()), ("target", pa.string()),  # email + address | slack / webhook + a hash of the URL
    ("status", pa.string()),  # pending | sending | sent | failed | cancelled
    ("attempts", pa.int32()), ("message_id", pa.string()), ("http_status", pa.int32()), ("error", pa.string()),
    ("created_at", UTC_TS), ("updated_at", UTC_TS), ("sent_at", UTC_TS),
])

# v9: rows a source with on_invalid = "skip_rows" refused (ingest/core/validate.py): one per bad row, the
# file and row (or line) it came from, the column, its value and why. A re-read of a file replaces
# that file's rows here, so the table holds what each file's latest read refused.
INGEST_REJECTS = pa.schema([
    ("source", pa.string()), ("run_id", pa.string()), ("file", pa.string()), ("row", pa.int64()),
    ("column", pa.string()), ("value", pa.string()), ("reason", pa.string()), ("rejected_at", UTC_TS),
])

# v10: what ran on each GPU (or MIG slice) in each hour, one row per workload: a Kubernetes pod /
# namespace / container from the exporter's labels, or a process from nvidia-smi's compute-apps log.
# Written by the metrics ingestors in the same batch set (and slices) as gpu_metrics_hourly.
GPU_WORKLOADS_HOURLY = pa.schema([
    ("hour", UTC_TS), ("gpu_uuid", pa.string()), ("mig_instance", pa.string()), ("host", pa.string()),
    ("namespace", pa.string()), ("pod", pa.string()), ("container", pa.string()),
    ("pid", pa.int32()), ("process", pa.string()),
    ("samples", pa.int32()),            # sample times the workload was seen on the GPU / slice in the hour
    ("occupied_samples", pa.int32()),   # sample times any workload was on it (NULL: the source can not tell)
    ("sharing", pa.string()),           # NULL | 'timeslice' | 'mps': what the source says about sharing
    ("util_mean", pa.float64()), ("sm_active_mean", pa.float64()), ("mem_used_max_mib", pa.float64()),
    ("source", pa.string()), ("ingest_run_id", pa.string()),
])

# v10: the GPU part of each billed resource-hour divided among what ran on it (warehouse/allocation.py);
# the rows of a (resource_id, hour) sum exactly to the EffectiveCost of its GPU usage lines.
GPU_ALLOCATION_HOURLY = pa.schema([
    ("hour", UTC_TS), ("resource_id", pa.string()), ("provider", pa.string()), ("host", pa.string()),
    ("gpu_uuid", pa.string()), ("mig_instance", pa.string()),
    ("namespace", pa.string()), ("pod", pa.string()), ("container", pa.string()), ("process", pa.string()),
    ("team", pa.string()),
    ("share", pa.float64()),            # GPU-hours: the fraction of one GPU for the hour
    ("cost_usd", DECIMAL),
    ("basis", pa.string()),             # whole | mig | timeslice | mps | unallocated
    ("method", pa.string()),            # how the share was measured: presence | slices | measured | equal | idle | unmeasured | spread
    ("source", pa.string()),            # the metrics source the workload came from
    ("owner_team", pa.string()),        # the team the bill tags the resource (or on-prem GPU) with
    ("service", pa.string()),           # the resource's ServiceName on the bill
])

# v12: what the inference servers' counters grew by, per hour, server, model and pod (ingest/metrics/serving_*.py);
# an increase between two samples belongs to the hour of the later one, a counter that fell restarted from zero.
SERVING_METRICS_HOURLY = pa.schema([
    ("hour", UTC_TS), ("server", pa.string()),   # vllm | tgi | triton | sglang
    ("model", pa.string()), ("namespace", pa.string()), ("pod", pa.string()), ("host", pa.string()),
    ("input_tokens", pa.float64()), ("output_tokens", pa.float64()), ("requests", pa.float64()),
    ("prefill_seconds", pa.float64()), ("decode_seconds", pa.float64()),  # NULL: the server does not export them
    ("counter_resets", pa.int32()),      # counters seen restarting in the hour (a pod restart)
    ("samples", pa.int32()),             # counter samples that ended in the hour
    ("source", pa.string()), ("ingest_run_id", pa.string()),
])

# v10: the [allocation] settings every load allocates with (kept in the warehouse like attribution_rules).
ALLOCATION_SETTINGS = pa.schema([("key", pa.string()), ("value", pa.string())])

# v13: energy and emissions per allocated GPU-hour (warehouse/carbon.py; docs/carbon.md). The rows of a
# (resource_id, hour) sum to the resource's measured energy; hours without a power measurement are
# rows with energy_basis = 'withheld' and NULL energy, never a guess.
CARBON_HOURLY = pa.schema([
    ("hour", UTC_TS), ("resource_id", pa.string()), ("provider", pa.string()), ("region", pa.string()),
    ("gpu_uuid", pa.string()), ("mig_instance", pa.string()), ("namespace", pa.string()), ("pod", pa.string()),
    ("team", pa.string()),
    ("gpu_hours", pa.float64()),        # GPU-hours the row covers (its allocation share)
    ("gpu_kwh", pa.float64()), ("node_kwh", pa.float64()),
    ("pue", pa.float64()),
    ("kwh", pa.float64()),              # facility energy: (gpu_kwh + node_kwh) x pue
    ("grid_g_co2e_per_kwh", pa.float64()),
    ("kg_co2e", pa.float64()),
    ("embodied_kg_co2e", pa.float64()),  # optional ([carbon] embodied_kg_co2e_per_gpu_hour), not in kg_co2e
    ("energy_basis", pa.string()),      # measured | withheld
    ("node_basis", pa.string()), ("pue_source", pa.string()), ("intensity_source", pa.string()),
    ("allocation_basis", pa.string()),  # the gpu_allocation_hourly basis, or 'resource' (not allocated)
])

# v13: the [carbon] settings every load computes carbon_hourly with.
CARBON_SETTINGS = pa.schema([("key", pa.string()), ("value", pa.string())])

# v15: results the load job computes for the dashboard (dashboard/precomputed.py), an Arrow IPC frame each.
STORED_RESULTS = pa.schema([("name", pa.string()), ("scope", pa.string()), ("data_version", pa.string()),
                            ("computed_at", UTC_TS), ("seconds", pa.float64()),
                            pa.field("frame", pa.binary(), metadata={"sql_type": "BLOB"})])

RUN_STATUSES = ("running", "succeeded", "failed", "skipped")


@dataclass(frozen=True)
class Table:
    name: str
    schema: pa.Schema
    order_by: tuple[str, ...] = ()


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("cost_line_items", COST_LINE_ITEMS),
    Table("spot_prices", SPOT_PRICES),
    Table("instance_types", INSTANCE_TYPES),
    Table("gpu_specs", GPU_SPECS),
    Table("gpu_metrics_hourly", GPU_METRICS_HOURLY),
    Table("recommendations", RECOMMENDATIONS),
    Table("decisions", DECISIONS),
    Table("ingest_runs", INGEST_RUNS),
    Table("ingest_state", INGEST_STATE),
    Table("spot_interruption_bands", SPOT_INTERRUPTION_BANDS),
    Table("gpu_processes_hourly", GPU_PROCESSES_HOURLY),
    Table("price_catalog", PRICE_CATALOG),
    Table("price_history", PRICE_HISTORY),
    Table("report_deliveries", REPORT_DELIVERIES),
    Table("webhook_deliveries", WEBHOOK_DELIVERIES),
    Table("job_runs", JOB_RUNS),
    Table("cost_daily", COST_DAILY),
    Table("attribution_rules", ATTRIBUTION_RULES),
    Table("withheld_findings", WITHHELD_FINDINGS),
    Table("gpu_instance_reference", GPU_INSTANCE_REFERENCE),
    Table("onprem_comparison", ONPREM_COMPARISON),
    Table("alerts", ALERTS),
    Table("alert_deliveries", ALERT_DELIVERIES),
    Table("ingest_rejects", INGEST_REJECTS),
    Table("gpu_workloads_hourly", GPU_WORKLOADS_HOURLY),
    Table("gpu_allocation_hourly", GPU_ALLOCATION_HOURLY),
    Table("allocation_settings", ALLOCATION_SETTINGS),
    Table("carbon_hourly", CARBON_HOURLY),
    Table("carbon_settings", CARBON_SETTINGS),

    Table("stored_results", STORED_RESULTS),
    *(Table(name, table_schema) for name, table_schema in STORAGE_TABLES.items()),  # v14
    Table("serving_metrics_hourly", SERVING_METRICS_HOURLY),
)}


def sql_type(field: pa.Field) -> str:
    """The DuckDB type of one arrow field."""
    if field.metadata and field.metadata.get(b"sql_type"):
        return field.metadata[b"sql_type"].decode()
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    simple = {pa.int32(): "INTEGER", pa.int64(): "BIGINT", pa.float64(): "DOUBLE",
              pa.bool_(): "BOOLEAN", pa.date32(): "DATE"}
    if t in simple:
        return simple[t]
    raise TypeError(f"no DuckDB type for arrow type {t} of column {field.name}")


def create_table_sql(table: Table) -> str:
    cols = ",\n  ".join(f'"{f.name}" {sql_type(f)}' for f in table.schema)
    return f"CREATE TABLE IF NOT EXISTS {table.name} (\n  {cols}\n)"


def select_list(schema: pa.Schema) -> str:
    """A SELECT list that casts a relation's same-named columns to the schema's types."""
    return ", ".join(f'CAST("{f.name}" AS {sql_type(f)}) AS "{f.name}"' for f in schema)
