"""Shared fixtures: a fresh warehouse per test, registries built per test, the real data files, the
export/API feed warehouse, the weekly report's demo; one ``free_port``; the markers' rules.

Test servers and data builders live in their own modules (``*_loopback.py``, ``*_fixture.py``,
``*_fleet.py``, ``bq_emulator.py``); a module that provides a fixture is listed in ``pytest_plugins``,
so no test module imports a fixture. Markers (pyproject.toml): ``browser``, ``emulator``, ``slow``;
``make test-fast`` deselects all three."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
from pathlib import Path

import duckdb
import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("POLARS_MAX_THREADS", "2")

DATA = Path(__file__).parent / "data"
FOCUS_SAMPLE = DATA / "focus-sample" / "focus_sample.csv"
FOCUS_SPEC_COLUMNS = DATA / "focus-spec" / "focus_columns_v1.0-v1.2.csv"

pytest_plugins = [
    "tests.bq_emulator",  # the `bq_emulator` fixture (the bqemulator BigQuery API server)
    "tests.aws_loopback",  # the `moto_endpoint` fixture (a moto S3 server per test module)
]

# A test that uses one of these fixtures or parameters runs an emulator (marked `emulator` for it).
EMULATOR_FIXTURES = {"bq_emulator"}
EMULATOR_SOURCE_TYPES = {"prometheus"}  # a parametrised source_type that starts a real Prometheus
# Module fixtures that build and ingest a demo fleet (20–70 s each in the full run at load average 10 on
# 2 cores, 2026-12-01): a test that uses one is `slow` (it pays the build, or shares it with its module).
SLOW_FIXTURES = {"report_demo", "demo_home", "demo_warehouse", "demo_run", "big_home", "exports", "scored"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what a test needs from its fixtures and parameters, so a new test cannot forget the marker."""
    for item in items:
        params = getattr(item, "callspec", None)
        source_type = params.params.get("source_type") if params is not None else None
        fixtures = set(getattr(item, "fixturenames", ()))
        if EMULATOR_FIXTURES & fixtures or source_type in EMULATOR_SOURCE_TYPES:
            item.add_marker(pytest.mark.emulator)
        if SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)


def free_port() -> int:
    """A TCP port free on loopback now (the test server binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "wh" / "gpufinops.duckdb"


@pytest.fixture
def focus_registry():
    from gpufinops.ingest.core.focus_files import FocusFiles
    from gpufinops.ingest.core.registry import Registry

    registry = Registry()
    registry.register(FocusFiles)
    return registry


@pytest.fixture(scope="session")
def feed_template(tmp_path_factory) -> Path:
    """A warehouse holding tests/feed_fleet.py's cost lines and every kind of finding, built once."""
    from gpufinops.models import plans
    from gpufinops.models.registry import KINDS
    from gpufinops.warehouse import db, recommendation_store
    from tests.feed_fleet import insert_cost_lines, realistic_recommendations

    path = tmp_path_factory.mktemp("feed") / "gpufinops.duckdb"
    with db.writer(path) as con:
        insert_cost_lines(con)
        recommendation_store.store_recommendations(con, plans.reconcile(realistic_recommendations()), KINDS)
    return path


@pytest.fixture
def feed_warehouse(feed_template: Path, warehouse: Path) -> Path:
    """A fresh copy per test of a warehouse holding FLEET's cost lines and every kind of finding."""
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(feed_template, warehouse)
    return warehouse


@pytest.fixture(scope="session")
def report_demo(tmp_path_factory) -> tuple[Path, str]:
    """The demo fleet (21 days, seed 3: planted idle GPUs in several teams), ingested, every model run;
    the weekly report's tests (test_report, test_report_resend) mail from copies of its warehouse."""
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs import demo
    from gpufinops.jobs.ingest_run import run_configured
    from gpufinops.models.run import run_models
    from gpufinops.simulator import demo_fleet
    from gpufinops.simulator.dcgm_export import write_dcgm_exports
    from gpufinops.warehouse import db

    home = tmp_path_factory.mktemp("demo")
    fleet = demo_fleet.generate(home, days=21, seed=3)
    write_dcgm_exports(fleet.metrics_dir, home / "metrics" / "dcgm")
    cfg = config_mod.load(demo.write_config(home, fleet.resource_map))
    assert all(r.ok for r in run_configured(cfg))
    with db.writer(cfg.warehouse_path) as con:  # every model: findings of many kinds, some without a team
        assert any(r.kind == "idle_gpu" for r in run_models(con))
    return home, ""


def table_digest(db_path: Path, table: str, exclude: tuple[str, ...] = ()) -> tuple[int, str]:
    """(row count, order-independent hash of every row) of a table: 'exactly the previous contents'."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in exclude]
        select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
        rows = con.execute(f"SELECT {select} FROM {table}").fetchall()
    digest = hashlib.sha256()
    for row in sorted(repr(r) for r in rows):
        digest.update(row.encode())
    return len(rows), digest.hexdigest()


def query(db_path: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db_path), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()


EXIT_GRACE_S = float(os.environ.get("GPUFINOPS_TEST_EXIT_GRACE_S", "120"))


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A watchdog for the process's exit, started by pytest's last hook: a test that leaves a
    non-daemon thread or an atexit hook blocking (a server that never answers its shutdown) would keep
    `make test` running after the summary until CI's time limit. After EXIT_GRACE_S the watchdog prints
    every thread's stack (so the culprit is named in the log) and ends the process with the session's
    own status."""
    import faulthandler
    import sys
    import threading
    import time

    status = _EXIT_STATUS[-1] if _EXIT_STATUS else 1

    def watchdog() -> None:
        time.sleep(EXIT_GRACE_S)
        err = sys.__stderr__
        if err is not None:
            print(
                f"\nthe test process had not exited {EXIT_GRACE_S:g} s after the session ended; its threads:",
                file=err,
                flush=True,
            )
            faulthandler.dump_traceback(file=err, all_threads=True)
        os._exit(status)

    threading.Thread(target=watchdog, name="exit-watchdog", daemon=True).start()


# Every error sentence the hostile suites produce passes through the one funnel (ingest.core.scrub.brief):
# recorded here and checked as users see it, in one place, so a new hostile test is covered without code.
HOSTILE_SUITES = (
    "hostile",  # test_conformance_hostile, the storage, Prometheus, CloudWatch and alert servers that misbehave
    "test_conformance_network",  # every networked source through servers that cycle, stall, trickle, 503
    "test_error_sentences",
    "test_bad_input",
    "test_errors",
    "test_counters_once",
)
SENTENCE_WHERE = r"^[^\s:][^:]{0,150}: \S"  # "source: file/call/object: …": a place before the reason


def check_sentence(shown: str) -> list[str]:
    """What is wrong with an error sentence as a user sees it (empty: nothing)."""
    import re

    problems = []
    if len(shown) > 200:
        problems.append(f"{len(shown)} characters")
    if re.search(r"[\x00-\x1f\x7f]", shown):
        problems.append("a raw control character")
    if not re.match(SENTENCE_WHERE, shown):
        problems.append("no source and place before the reason")
    return problems


@pytest.fixture(autouse=True)
def error_sentences(request, monkeypatch):
    """In the hostile suites: every sentence the funnel shapes, checked at the end of the test."""
    if not any(name in request.node.module.__name__ for name in HOSTILE_SUITES):
        yield []
        return
    from gpufinops.ingest.core import scrub

    seen: list[str] = []
    original = scrub.brief

    def recording(text: str, limit: int | None = scrub.LONGEST_SENTENCE) -> str:
        seen.append(original(text))  # the sentence brought to 200 characters, as the MCP server shows it
        return original(text, limit)

    monkeypatch.setattr(scrub, "brief", recording)
    yield seen
    bad = {s: check_sentence(s) for s in seen if check_sentence(s)}
    assert not bad, f"error sentences that do not say where in 200 characters: {bad}"


def pytest_configure(config):
    """Every test and fixture sees the width of a pipe (``jobs.output.FALLBACK_WIDTH``) unless it sets
    ``COLUMNS`` itself: pytest-xdist's workers export ``COLUMNS=80``, a run without it has none, and a table's
    layout (and a module fixture's output compared with a test's) must not depend on how the suite started."""
    os.environ.pop("COLUMNS", None)
