"""The warehouse's column contract: every table, the DDL derived from its pyarrow schema, and migrations.

Every table's columns are defined once, as a pyarrow schema in the module of its subject
(``cost_schema``, ``reference_schema``, ``metrics_schema``, ``allocation_schema``, ``findings_schema``,
``runs_schema``, ``notifications_schema``, ``storage_schema``); this module lists them as tables. The DuckDB
DDL is generated from the schema, and every ingestor returns data in exactly that schema, so a column can
not drift between the loader, the tables and the queries. When a table changes, append a migration to
``warehouse/migrations/`` (the shipped ones are frozen: tests/test_migrations.py checks that a warehouse
migrated from any old version equals a fresh one, and that a fresh one has these schemas' columns);
``warehouse.db.prepare()`` applies the missing ones once, at a process's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from gpufinops.warehouse import (
    allocation_schema,
    cost_schema,
    findings_schema,
    metrics_schema,
    notifications_schema,
    reference_schema,
    runs_schema,
)
from gpufinops.warehouse.column_types import sql_type
from gpufinops.warehouse.focus_spec import FOCUS_12_COLUMNS as FOCUS_12_COLUMNS
from gpufinops.warehouse.migrations import MIGRATIONS as MIGRATIONS
from gpufinops.warehouse.migrations import SCHEMA_VERSION as SCHEMA_VERSION
from gpufinops.warehouse.storage_schema import STORAGE_TABLES


@dataclass(frozen=True)
class Table:
    name: str
    schema: pa.Schema
    order_by: tuple[str, ...] = ()


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table("cost_line_items", cost_schema.COST_LINE_ITEMS),
        Table("spot_prices", reference_schema.SPOT_PRICES),
        Table("instance_types", reference_schema.INSTANCE_TYPES),
        Table("gpu_specs", reference_schema.GPU_SPECS),
        Table("gpu_metrics_hourly", metrics_schema.GPU_METRICS_HOURLY),
        Table("recommendations", findings_schema.RECOMMENDATIONS),
        Table("decisions", findings_schema.DECISIONS),
        Table("ingest_runs", runs_schema.INGEST_RUNS),
        Table("ingest_state", runs_schema.INGEST_STATE),
        Table("spot_interruption_bands", reference_schema.SPOT_INTERRUPTION_BANDS),
        Table("gpu_processes_hourly", metrics_schema.GPU_PROCESSES_HOURLY),
        Table("price_catalog", reference_schema.PRICE_CATALOG),
        Table("price_history", reference_schema.PRICE_HISTORY),
        Table("report_deliveries", notifications_schema.REPORT_DELIVERIES),
        Table("webhook_deliveries", notifications_schema.WEBHOOK_DELIVERIES),
        Table("job_runs", runs_schema.JOB_RUNS),
        Table("cost_daily", cost_schema.COST_DAILY),
        Table("attribution_rules", allocation_schema.ATTRIBUTION_RULES),
        Table("withheld_findings", findings_schema.WITHHELD_FINDINGS),
        Table("gpu_instance_reference", reference_schema.GPU_INSTANCE_REFERENCE),
        Table("onprem_comparison", findings_schema.ONPREM_COMPARISON),
        Table("alerts", notifications_schema.ALERTS),
        Table("alert_deliveries", notifications_schema.ALERT_DELIVERIES),
        Table("ingest_rejects", runs_schema.INGEST_REJECTS),
        Table("gpu_workloads_hourly", metrics_schema.GPU_WORKLOADS_HOURLY),
        Table("gpu_allocation_hourly", allocation_schema.GPU_ALLOCATION_HOURLY),
        Table("allocation_settings", allocation_schema.ALLOCATION_SETTINGS),
        Table("carbon_hourly", allocation_schema.CARBON_HOURLY),
        Table("carbon_settings", allocation_schema.CARBON_SETTINGS),
        Table("stored_results", findings_schema.STORED_RESULTS),
        *(Table(name, table_schema) for name, table_schema in STORAGE_TABLES.items()),  # v14
        Table("serving_metrics_hourly", metrics_schema.SERVING_METRICS_HOURLY),
        Table("serving_costs_hourly", allocation_schema.SERVING_COSTS_HOURLY),  # v17
        Table("unit_cost_settings", allocation_schema.UNIT_COST_SETTINGS),
    )
}


def create_table_sql(table: Table) -> str:
    cols = ",\n  ".join(f'"{f.name}" {sql_type(f)}' for f in table.schema)
    return f"CREATE TABLE IF NOT EXISTS {table.name} (\n  {cols}\n)"


def select_list(schema: pa.Schema) -> str:
    """A SELECT list that casts a relation's same-named columns to the schema's types."""
    return ", ".join(f'CAST("{f.name}" AS {sql_type(f)}) AS "{f.name}"' for f in schema)
