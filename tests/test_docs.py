"""The README's tables that describe options are generated from the code, and checked (as Datasette does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpufinops.ingest.core import docs
from gpufinops.ingest.core.registry import default_registry

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_source_table_is_the_one_the_specs_generate():
    expected = docs.source_table()
    assert docs.readme_block(README.read_text()) == expected, (
        "README.md's source table drifted from the ingestor specs: run "
        "`python -m gpufinops.ingest.core.docs --write README.md` and commit the result"
    )


def test_the_table_lists_every_source_type_with_its_keys():
    table = docs.source_table()
    registry = default_registry()
    rows = [line for line in table.splitlines()[2:]]
    assert [row.split("|")[1].strip() for row in rows] == [f"`{name}`" for name in registry.names()]
    prometheus = next(row for row in rows if row.startswith("| `prometheus`"))
    assert "`url`; optional" in prometheus and "`lookback_hours` (3)" in prometheus and "`7 * * * *`" in prometheus


def test_a_drifted_readme_is_caught_and_rewritten(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(f"# x\n\n{docs.BEGIN}\n| `type` | an old hand-copied table |\n{docs.END}\n\nafter\n")
    assert docs.readme_block(stale.read_text()) != docs.source_table()
    subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "--write", str(stale)], check=True, cwd=README.parent
    )
    text = stale.read_text()
    assert docs.readme_block(text) == docs.source_table() and text.startswith("# x\n") and text.endswith("after\n")


def test_one_type_reference_prints_types_defaults_and_descriptions():
    out = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "cloudwatch_gpu"],
        capture_output=True,
        text=True,
        check=True,
        cwd=README.parent,
    ).stdout
    assert "  region (a string; required): " in out
    assert "  lookback_hours (a number; default 3): " in out
    bad = subprocess.run(
        [sys.executable, "-m", "gpufinops.ingest.core.docs", "nope"], capture_output=True, text=True, cwd=README.parent
    )
    assert bad.returncode == 2 and "unknown source type 'nope'" in bad.stderr
