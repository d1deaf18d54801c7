"""The validation rules against the FOCUS spec's own column list, and the schema 6 upgrade."""

from __future__ import annotations

import csv

import duckdb

from gpufinops.ingest.core import validate
from gpufinops.warehouse import db, runs_schema, schema
from tests.conftest import FOCUS_SPEC_COLUMNS


def test_the_not_null_columns_are_the_specs_mandatory_non_nullable_ones():
    with open(FOCUS_SPEC_COLUMNS, newline="") as f:
        spec = [r for r in csv.DictReader(f) if r["focus_version"] == "v1.2"]
    required = {r["column_id"] for r in spec if r["feature_level"] == "Mandatory" and r["allows_nulls"] == "False"}
    # ContractedCost is left out on purpose: the FinOps Foundation's own FOCUS sample leaves it empty
    assert set(validate.COST_NOT_NULL) == required - {"ContractedCost"}
    assert "ContractedCost" in required


def test_an_older_warehouse_upgrades_to_ingest_rejects(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    for version, migration in enumerate(schema.MIGRATIONS[:8], start=1):
        for statement in migration():
            con.execute(statement.replace(', "rows_rejected" BIGINT', ""))  # ingest_runs as version 8 made it
        con.execute("INSERT INTO schema_version VALUES (?, now())", [version])
    con.execute("ALTER TABLE ingest_runs DROP COLUMN IF EXISTS rows_rejected")
    con.execute("DROP TABLE IF EXISTS ingest_rejects")
    con.execute("INSERT INTO ingest_runs (run_id, source, status, rows) VALUES ('old', 's', 'succeeded', 3)")
    con.close()
    db.prepare(path)  # a process's start upgrades it (a writer alone refuses an old warehouse)
    with db.writer(path) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0] == schema.SCHEMA_VERSION
        columns = [r[0] for r in con.execute("DESCRIBE ingest_rejects").fetchall()]
        assert columns == [f.name for f in runs_schema.INGEST_REJECTS]
        assert con.execute("SELECT run_id, rows, rows_rejected FROM ingest_runs").fetchall() == [("old", 3, None)]
