"""Reference tables shipped with gpufinops (``gpu_specs``), kept in step with the bundled CSV."""

from __future__ import annotations

import hashlib
import json
import logging

import duckdb

from warehouse.gpu_models import GPU_SPECS_PATH, load_gpu_specs

log = logging.getLogger(__name__)

_STATE_KEY = "_reference:gpu_specs"


def refresh_gpu_specs(con: duckdb.DuckDBPyConnection) -> bool:
    """Load ``gpu_specs`` when the bundled CSV changed since the last load; returns whether it did."""
    digest = hashlib.sha256(GPU_SPECS_PATH.read_bytes()).hexdigest()
    rows = con.execute("SELECT state FROM ingest_state WHERE source = ?", [_STATE_KEY]).fetchall()
    if rows and json.loads(rows[0][0]).get("sha256") == digest:
        return False
    specs = load_gpu_specs()
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM gpu_specs")
        con.register("_gpu_specs", specs)
        con.execute("INSERT INTO gpu_specs BY NAME SELECT * FROM _gpu_specs")
        con.unregister("_gpu_specs")
        con.execute("DELETE FROM ingest_state WHERE source = ?", [_STATE_KEY])
        con.execute("INSERT INTO ingest_state VALUES (?, ?, now())", [_STATE_KEY, json.dumps({"sha256": digest})])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    log.info("gpu_specs loaded: %d GPU models", specs.num_rows)
    return True
