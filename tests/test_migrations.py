"""Frozen migrations: a warehouse of any old version, and real warehouse files made by old commits
(tests/data/old_warehouses/SOURCE.md), migrated to head equal a fresh warehouse (tables, columns,
types, defaults, constraints, indexes, views) and keep their data; a fresh warehouse has the columns
warehouse/schema.py declares; a writer refuses an old warehouse instead of migrating it."""

from __future__ import annotations

import gzip
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpufinops.derived import rollups
from gpufinops.warehouse import column_types, db, reference, schema

OLD = Path(__file__).parent / "data" / "old_warehouses"
OLD_FILES = sorted(OLD.glob("v*.duckdb.gz"))


def catalog(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Everything about the schema a user could see, from DuckDB's own catalogue functions."""
    queries = {
        "columns": "SELECT table_name, column_index, column_name, data_type, column_default, is_nullable, "
        "numeric_precision, numeric_scale FROM duckdb_columns() WHERE NOT internal",
        "constraints": "SELECT table_name, constraint_type, constraint_text, expression, constraint_column_names "
        "FROM duckdb_constraints()",
        "indexes": "SELECT table_name, index_name, is_unique, is_primary, expressions, sql FROM duckdb_indexes()",
        "views": "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal",
        "tables": "SELECT table_name, column_count, has_primary_key FROM duckdb_tables() WHERE NOT internal",
    }
    return {name: con.execute(f"SELECT * FROM ({sql}) ORDER BY ALL").fetchall() for name, sql in queries.items()}


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> dict[str, list[tuple]]:
    path = tmp_path_factory.mktemp("fresh") / "head.duckdb"
    with db.writer(path) as con:
        return catalog(con)


def build_at(path: Path, version: int) -> None:
    """A warehouse made by migrations 1..version, with a few rows in the tables every version has."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    for number, migration in enumerate(schema.MIGRATIONS[:version], start=1):
        for statement in migration():
            con.execute(statement)
        con.execute("INSERT INTO schema_version VALUES (?, now())", [number])
    con.execute(
        'INSERT INTO cost_line_items ("ChargePeriodStart", "ProviderName", "ServiceName", "ChargeCategory", '
        '"EffectiveCost", "BilledCost", "x_GpuCount", "x_Team", "x_Source", "ResourceId") VALUES '
        "(TIMESTAMPTZ '2026-11-01 05:00:00+00', 'AWS', 'Amazon EC2', 'Usage', 1.000000000000001, "
        "1.000000000000001, 8, 'research', 'cur', 'i-1')"
    )
    con.execute("INSERT INTO recommendations (id, kind, status) VALUES ('r1', 'idle_gpu', 'dismissed')")
    con.close()


@pytest.mark.parametrize("version", range(1, schema.SCHEMA_VERSION))
def test_each_old_version_migrated_to_head_equals_a_fresh_warehouse(tmp_path, head, version):
    path = tmp_path / f"v{version}.duckdb"
    build_at(path, version)
    assert db.prepare(path) == schema.SCHEMA_VERSION
    with db.reader(path) as con:
        assert catalog(con) == head
        assert con.execute('SELECT "EffectiveCost", "x_Team" FROM cost_line_items').fetchall() == [
            (Decimal("1.000000000000001"), "research")
        ]
        assert con.execute("SELECT id, status FROM recommendations").fetchall() == [("r1", "dismissed")]
        assert con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall() == [
            (v,) for v in range(1, schema.SCHEMA_VERSION + 1)
        ]


def _rows(con: duckdb.DuckDBPyConnection, table: str, columns: str) -> list[tuple]:
    return con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()


KEPT = {  # what make_old.py wrote, in columns every version has
    "cost_line_items": '"ChargePeriodStart", "ProviderName", "EffectiveCost", "BilledCost", "ListCost", '
    '"ResourceId", "x_GpuCount", "x_GpuModel", "x_Team", "x_Source", "x_InstanceType"',
    "recommendations": "id, kind, team, status, monthly_savings_usd",
    "decisions": "*",
    "gpu_metrics_hourly": "hour, gpu_uuid, resource_id, source",
}


@pytest.mark.parametrize("old_file", OLD_FILES, ids=[f.name.split(".")[0] for f in OLD_FILES])
def test_a_warehouse_made_by_an_old_commit_migrates_to_head(tmp_path, head, old_file):
    path = tmp_path / "old.duckdb"
    with gzip.open(old_file) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with duckdb.connect(str(path), read_only=True) as con:
        before = {table: _rows(con, table, columns) for table, columns in KEPT.items()}
    assert before["cost_line_items"] and before["decisions"]

    assert db.prepare(path) == schema.SCHEMA_VERSION
    with db.writer(path) as con:
        assert catalog(con) == head
        assert {table: _rows(con, table, columns) for table, columns in KEPT.items()} == before
        if old_file.name < "v06":  # v6: GPU-hours loaded before it keep their resolved id as the hint
            assert _rows(con, "gpu_metrics_hourly", "resource_hint") == [("i-0",)]
        rollup = _rows(con, "cost_daily", "*")
        rollups.refresh_cost_daily(con, "cur")  # what today's code makes of the same line items
        assert rollup == _rows(con, "cost_daily", "*") and len(rollup) == 2
        assert con.execute("SELECT count(*) FROM gpu_instance_reference").fetchall()[0][0] > 100
        assert con.execute("SELECT count(*) FROM gpu_specs").fetchall()[0][0] >= 10


def test_the_old_files_cover_every_shipped_version():
    versions = {int(f.name[1:3]) for f in OLD_FILES}
    assert versions == set(range(1, 11)), "add a file made by the first commit of each new version"


def test_a_fresh_warehouse_has_the_columns_schema_declares(tmp_path):
    """A pyarrow schema changed without a migration (the v5 / v6 edits that v011 repairs) fails here."""
    with db.writer(tmp_path / "fresh.duckdb") as con:
        for table in schema.TABLES.values():
            got = con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
                [table.name],
            ).fetchall()
            want = [
                (f.name, column_types.sql_type(f).replace("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE"))
                for f in table.schema
            ]
            assert got == want, table.name


def test_a_writer_refuses_an_old_warehouse_naming_the_upgrade_command(tmp_path):
    path = tmp_path / "v5.duckdb"
    build_at(path, 5)
    with pytest.raises(db.WarehouseOutdated, match=r"schema version 5, older than this gpufinops .*gpufinops migrate"):
        with db.writer(path):
            pass
    with duckdb.connect(str(path), read_only=True) as con:  # untouched
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(5,)]


def test_the_migrate_command_upgrades_and_says_the_version(tmp_path, capsys):
    from gpufinops.interfaces import cli

    path = tmp_path / "v3.duckdb"
    build_at(path, 3)
    assert cli.main(["--db", str(path), "migrate"]) == 0
    assert f"schema version {schema.SCHEMA_VERSION}" in capsys.readouterr().out
    with db.writer(path) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(schema.SCHEMA_VERSION,)]


def test_a_connection_after_prepare_runs_no_migration_nor_reference_refresh(tmp_path, monkeypatch):
    path = tmp_path / "w.duckdb"
    with db.writer(path):  # a new warehouse: built, once
        pass
    calls: list[str] = []
    for name in ("migrate", "_upgrade"):
        monkeypatch.setattr(db, name, lambda con, name=name: calls.append(name))
    for name in ("refresh_gpu_specs", "refresh_gpu_instance_types"):
        monkeypatch.setattr(reference, name, lambda con, name=name: calls.append(name))
    assert db.prepare(path) == schema.SCHEMA_VERSION  # current already: only read
    for _ in range(3):
        with db.writer(path) as con:
            con.execute("SELECT 1")
    assert calls == []


def test_v16_backfills_each_built_in_run_s_freshness_and_leaves_other_types_unset(tmp_path):
    """The frozen table in v016 is the specs' freshness as it shipped; a run of a type it does not name
    keeps NULLs (read as ``freshness.UNREGISTERED``). The specs may change after it: new runs record theirs."""
    path = tmp_path / "v15.duckdb"
    build_at(path, 15)
    with duckdb.connect(str(path)) as con:
        con.execute(
            "INSERT INTO ingest_runs (run_id, source, source_type, status) VALUES "
            "('a', 'cur', 'aws_cur', 'succeeded'), ('b', 'dcgm', 'dcgm_exporter', 'failed'), "
            "('c', 'old', 'a_removed_type', 'succeeded')"
        )
    assert db.prepare(path) == schema.SCHEMA_VERSION
    with db.reader(path) as con:
        assert _rows(con, "ingest_runs", "run_id, freshness_kind, expected_lag_hours") == [
            ("a", "cost", 24.0),
            ("b", "metrics", 1.0),
            ("c", None, None),
        ]
