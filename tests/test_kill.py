"""A load killed with SIGKILL half-way leaves the previous slices intact; the next run completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb

from gpufinops.ingest.core.runner import run_source
from tests.conftest import FOCUS_SAMPLE, query, table_digest

CHILD = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from gpufinops.ingest.core.focus_files import FocusFiles
    from gpufinops.ingest.core.registry import Registry
    from gpufinops.ingest.core.runner import run_source
    registry = Registry(); registry.register(FocusFiles)
    run_source(registry, sys.argv[1], "focus", "focus_files", {"path": sys.argv[2]})
""")


def big_restatement(path: Path, copies: int) -> int:
    """The sample's September restated as `copies` times as many rows (a large re-delivery)."""
    with duckdb.connect() as con:
        con.execute(f"""COPY (SELECT s.* FROM read_csv('{FOCUS_SAMPLE}', all_varchar = true, nullstr = 'NULL') s,
                        range({copies}) WHERE s.BillingPeriodStart LIKE '2024-09%') TO '{path}' (FORMAT parquet)""")
        return con.execute(f"SELECT count(*) FROM '{path}'").fetchall()[0][0]


def test_sigkill_during_load_keeps_previous_slices(focus_registry, warehouse, tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "focus.csv").write_bytes(FOCUS_SAMPLE.read_bytes())
    assert run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(export / "*")}).rows == 1000
    before = table_digest(warehouse, "cost_line_items")

    (export / "focus.csv").unlink()
    rows = big_restatement(export / "restated.parquet", 500)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(warehouse), str(export / "*")],
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[1],
    )
    for line in child.stderr:
        if "loading" in line:  # inside the load: the transaction is about to start
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait(timeout=120)
    assert child.returncode == -signal.SIGKILL

    assert table_digest(warehouse, "cost_line_items") == before
    assert query(warehouse, "SELECT status FROM ingest_runs ORDER BY started_at") == [("succeeded",), ("running",)]

    retry = run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(export / "*")})
    assert retry.status == "succeeded" and retry.rows == rows
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == rows
    assert query(warehouse, "SELECT status, error FROM ingest_runs ORDER BY started_at")[1] == (
        "failed",
        "interrupted: the process ended before the run finished",
    )
