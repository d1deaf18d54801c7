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


def _table_after(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line starting with ``heading``."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_readme_command_table_lists_every_cli_command_and_no_other():
    import argparse

    from gpufinops.jobs import cli

    parser = cli._parser()  # noqa: SLF001
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    documented = {cells[0].strip("`").split()[1] for cells in _table_after("| command | does |")}
    assert documented == set(sub.choices)


def test_the_readme_daemon_table_gives_the_code_s_default_schedules():
    from gpufinops.jobs.serve_settings import DEFAULT_FEED, DEFAULT_RECOMMEND, DEFAULT_REPORT

    rows = {cells[0].strip("`"): cells[1] for cells in _table_after("| job | default schedule |")}
    for job, cron in (("recommend", DEFAULT_RECOMMEND), ("report", DEFAULT_REPORT), ("feed", DEFAULT_FEED)):
        assert rows[job].startswith(f"`{cron}`"), (job, rows[job])


def test_the_readme_freshness_table_gives_the_code_s_expected_lags():
    import re

    from gpufinops.warehouse.freshness import EXPECTED_LAG_HOURS

    documented: dict[str, float] = {}
    for types, lag in _table_after("| source types | expected lag |"):
        # "`aws_spot_prices` | 24 h; `aws_pricing`, `gcp_catalog` 7 days": each name takes the next figure
        text = f"{types} {lag}"
        pending: list[str] = []
        for token in re.finditer(r"`(\w+)`|(\d+) (h|days?)\b", text):
            if token.group(1):
                pending.append(token.group(1))
            else:
                hours = float(token.group(2)) * (24 if token.group(3).startswith("day") else 1)
                documented |= {name: hours for name in pending}
                pending = []
    assert documented == {name: hours for name, (_, hours) in EXPECTED_LAG_HOURS.items()}
