"""Bad input gets one clear sentence, a failed run in the ledger, exit 1, and loses nothing."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.core.runner import run_source
from tests.conftest import FOCUS_SAMPLE, query, table_digest


def bad_missing_column(path: Path) -> str:
    with open(FOCUS_SAMPLE, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = [c for c in rows[0] if c != "BilledCost"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows[:20])
    return "missing mandatory FOCUS column(s) BilledCost"


def bad_non_numeric_cost(path: Path) -> str:
    with open(FOCUS_SAMPLE, newline="") as f:
        rows = list(csv.DictReader(f))
    rows[7]["EffectiveCost"] = "twelve dollars"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerows(rows[:50])
    return "row 8: column EffectiveCost value 'twelve dollars' is not a number"


def bad_truncated_parquet(path: Path) -> str:
    whole = path.with_suffix(".whole.parquet")
    pq.write_table(pacsv.read_csv(FOCUS_SAMPLE), whole)
    data = whole.read_bytes()
    whole.unlink()
    path.write_bytes(data[: len(data) // 2])  # a half-written upload
    return "can not be read as parquet"


def bad_empty_file(path: Path) -> str:
    path.write_bytes(b"")
    return "is empty"


def bad_header_only(path: Path) -> str:
    with open(FOCUS_SAMPLE) as f:
        path.write_text(f.readline())
    return "holds no rows"


CASES = {
    "missing_column.csv": bad_missing_column,
    "non_numeric.csv": bad_non_numeric_cost,
    "truncated.parquet": bad_truncated_parquet,
    "empty.csv": bad_empty_file,
    "header_only.csv": bad_header_only,
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_file_fails_the_run_and_keeps_the_warehouse(focus_registry, warehouse, tmp_path, name):
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(FOCUS_SAMPLE, export / "good.csv")
    options = {"path": str(export / "*")}
    assert run_source(focus_registry, warehouse, "focus", "focus_files", options).status == "succeeded"
    before = table_digest(warehouse, "cost_line_items")
    state_before = query(warehouse, "SELECT state FROM ingest_state WHERE source = 'focus'")

    bad = export / name
    expected = CASES[name](bad)
    result = run_source(focus_registry, warehouse, "focus", "focus_files", options)

    assert result.status == "failed"
    assert str(bad) in result.error and expected in result.error, result.error
    assert "\n" not in result.error
    assert table_digest(warehouse, "cost_line_items") == before
    assert query(warehouse, "SELECT state FROM ingest_state WHERE source = 'focus'") == state_before
    ledger = query(warehouse, "SELECT status, error FROM ingest_runs WHERE run_id = ?", [result.run_id])
    assert ledger == [("failed", result.error)]

    bad.unlink()  # fixed at the source: the next run retries and completes
    retry = run_source(focus_registry, warehouse, "focus", "focus_files", options)
    assert retry.status in ("skipped", "succeeded")
    assert table_digest(warehouse, "cost_line_items")[0] == before[0]


def test_cli_exit_1_with_one_sentence_on_stderr(tmp_path):
    bad = tmp_path / "bad.csv"
    bad_non_numeric_cost(bad)
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "wh.duckdb"\n[sources.focus]\ntype = "focus_files"\npath = "{bad}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(config), "ingest"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "focus" in proc.stdout and "failed" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gpufinops:")]
    assert len(errors) == 1 and str(bad) in errors[0] and "EffectiveCost" in errors[0]
