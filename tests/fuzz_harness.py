"""The hostile-input cases' harness (tests/test_fuzz.py, tests/test_fuzz_metrics.py): the real CLI run
in-process, an empty migrated warehouse per case, and the assertion every refused case makes: exit
status, one ``gpufinops:`` sentence naming what and why, no traceback, the target table and the
source's cursor exactly as before."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from gpufinops.interfaces import cli
from tests.conftest import query, table_digest

SEED = 16
OUTCOMES: dict[str, int] = {}  # outcome -> cases (printed at the end of the module)


def ingest(config: Path) -> tuple[int, str]:
    """``gpufinops --config CONFIG ingest`` in-process: (exit status, stderr)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main(["--config", str(config), "ingest"])
    return code, err.getvalue()


_TEMPLATE: list[Path] = []


def _empty_warehouse(target: Path) -> None:
    """A copy of one migrated, empty warehouse (creating and migrating one costs more than a case)."""
    if not _TEMPLATE:
        import tempfile

        from gpufinops.warehouse import db

        template = Path(tempfile.mkdtemp(prefix="fuzz-template-")) / "wh.duckdb"
        with db.writer(template):
            pass
        _TEMPLATE.append(template)
    shutil.copy(_TEMPLATE[0], target)


def write_config(home: Path, source: str) -> Path:
    if not (home / "wh.duckdb").exists():
        _empty_warehouse(home / "wh.duckdb")
    path = home / "gpufinops.toml"
    path.write_text(f'[warehouse]\npath = "{home / "wh.duckdb"}"\n\n{source}\n')
    return path


def state(db: Path) -> list:
    return query(db, "SELECT source, state FROM ingest_state ORDER BY source")


def assert_refused(home: Path, config: Path, table: str, names: str, reason: str, code: int = 1) -> None:
    db = home / "wh.duckdb"
    before, cursor = table_digest(db, table), state(db)
    status, err = ingest(config)
    lines = [ln for ln in err.splitlines() if ln.startswith("gpufinops:")]
    assert status == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert names in lines[0] and reason in lines[0], lines[0]
    # the engine's own text never reaches the user: no SQL excerpt, no caret, no 300-digit dump
    assert "LINE 1" not in lines[0] and "^^^" not in lines[0] and not re.search(r"\d{20}", lines[0]), lines[0]
    assert table_digest(db, table) == before and state(db) == cursor
    OUTCOMES[f"refused (exit {code})"] = OUTCOMES.get(f"refused (exit {code})", 0) + 1


def good_run(config: Path) -> None:
    status, err = ingest(config)
    assert status == 0, err


def count(outcome: str, cases: int = 1) -> None:
    OUTCOMES[outcome] = OUTCOMES.get(outcome, 0) + cases


def report_outcomes(request: pytest.FixtureRequest) -> None:
    """Print how many hostile cases of the module ended how (its closing note's figures), then reset."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and OUTCOMES:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(f"\nfuzz outcomes ({request.module.__name__}): {json.dumps(OUTCOMES, sort_keys=True)}")
    OUTCOMES.clear()
