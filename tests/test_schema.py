"""The warehouse's columns match the FOCUS 1.2 specification and the contract's tables."""

from __future__ import annotations

import csv
from decimal import Decimal

import duckdb
import pytest

from gpufinops.warehouse import column_types, cost_schema, db, recommendation_read, schema
from tests.conftest import FOCUS_SPEC_COLUMNS

SPEC_TO_DUCKDB = {"String": "VARCHAR", "Decimal": "DECIMAL", "Date/Time": "TIMESTAMP WITH TIME ZONE", "JSON": "JSON"}


def spec_columns(version: str = "v1.2") -> dict[str, dict]:
    with open(FOCUS_SPEC_COLUMNS, newline="") as f:
        return {r["column_id"]: r for r in csv.DictReader(f) if r["focus_version"] == version}


def described(warehouse, table: str) -> dict[str, str]:
    with db.writer(warehouse) as con:
        return {r[0]: r[1] for r in con.execute(f"DESCRIBE {table}").fetchall()}


def test_every_focus_12_column_is_present_with_the_spec_type(warehouse):
    columns = described(warehouse, "cost_line_items")
    spec = spec_columns()
    assert len(spec) == 57
    for name, row in spec.items():
        assert name in columns, f"FOCUS 1.2 column {name} missing"
        assert columns[name].startswith(SPEC_TO_DUCKDB[row["data_type"]]), (name, columns[name])
    mandatory = {n for n, r in spec.items() if r["feature_level"] == "Mandatory"}
    assert mandatory == set(cost_schema.FOCUS_MANDATORY)


def test_money_is_exact_decimal(warehouse):
    columns = described(warehouse, "cost_line_items")
    for name in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity"):
        assert columns[name] == "DECIMAL(38,15)"
    with db.writer(warehouse) as con:
        con.execute(
            "INSERT INTO cost_line_items (BilledCost) SELECT CAST('0.000000000000001' AS DECIMAL(38,15)) "
            "FROM range(100000)"
        )
        total = con.execute("SELECT sum(BilledCost) FROM cost_line_items").fetchall()[0][0]
    assert isinstance(total, Decimal) and total == Decimal("0.0000000001")


@pytest.mark.parametrize(
    "table, columns",
    [
        ("spot_prices", ["provider", "region", "zone", "instance_type", "product", "ts", "price_usd"]),
        (
            "instance_types",
            [
                "provider",
                "region",
                "instance_type",
                "gpu_model",
                "gpu_count",
                "gpu_memory_gib",
                "vcpus",
                "memory_gib",
                "on_demand_usd_per_hour",
                "source",
                "updated_at",
            ],
        ),
        (
            "gpu_specs",
            [
                "gpu_model",
                "memory_gib",
                "memory_bandwidth_gbps",
                "fp32_tflops",
                "fp16_tflops",
                "bf16_tflops",
                "int8_tops",
                "tdp_w",
                "list_price_usd",
                "source_url",
            ],
        ),
        (
            "gpu_metrics_hourly",
            [
                "hour",
                "gpu_uuid",
                "gpu_model",
                "mig_instance",
                "host",
                "resource_id",
                "team",
                "util_mean",
                "util_p95",
                "util_max",
                "mem_used_max_mib",
                "mem_total_mib",
                "sm_active_mean",
                "tensor_active_mean",
                "power_mean_w",
                "samples",
            ],
        ),
        (
            "gpu_processes_hourly",
            [
                "hour",
                "gpu_uuid",
                "host",
                "pid",
                "process_name",
                "mem_used_max_mib",
                "mem_used_mean_mib",
                "samples",
                "resource_id",
                "team",
                "source",
                "ingest_run_id",
            ],
        ),
        ("decisions", ["recommendation_id", "decision", "reason", "actor", "decided_at"]),
        ("ingest_runs", ["run_id", "source", "started_at", "finished_at", "status", "rows", "watermark", "error"]),
        ("recommendations", list(recommendation_read.STORED_COLUMNS)),  # the one read model's
    ],
)
def test_contract_tables_have_their_columns(warehouse, table, columns):
    present = described(warehouse, table)
    assert [c for c in columns if c not in present] == []


def test_tables_match_their_arrow_schemas(warehouse):
    for table in schema.TABLES.values():
        present = described(warehouse, table.name)
        assert list(present) == table.schema.names
        for field in table.schema:
            assert present[field.name] == column_types.sql_type(field).replace(
                "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE"
            )


def test_migrations_run_once_and_record_the_version(warehouse):
    with db.writer(warehouse) as con:
        pass
    with db.writer(warehouse) as con:
        versions = con.execute("SELECT version FROM schema_version").fetchall()
        assert versions == [(v,) for v in range(1, schema.SCHEMA_VERSION + 1)]  # each migration once
        assert con.execute("SELECT count(*) FROM gpu_specs").fetchall()[0][0] >= 10


def test_newer_warehouse_is_refused(warehouse):
    with db.writer(warehouse) as con:
        con.execute("INSERT INTO schema_version VALUES (?, now())", [schema.SCHEMA_VERSION + 1])
    with pytest.raises(RuntimeError, match="newer than this gpufinops"):
        with db.writer(warehouse):
            pass


def test_reader_is_read_only(warehouse):
    with db.writer(warehouse):
        pass
    with db.reader(warehouse) as con:
        with pytest.raises(duckdb.Error):
            con.execute("DELETE FROM gpu_specs")
