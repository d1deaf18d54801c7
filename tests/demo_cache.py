"""`gpufinops demo` built once per (days, seed) in a test session and copied into each module's home.

Several modules need the same demo fleet (14 days, seed 3, ...), each in a home of its own because
their tests write to it. Building it takes 20-60 s on two cores, so the first module (in any
pytest-xdist worker: the cache sits in the session's shared temporary root, under a file lock)
runs ``demo.run`` into the cache and every module copies the result. A copy is the same home as a
build in its place: the demo's config names its paths relative to itself, the one absolute path the
warehouse keeps (the serving source's counter state is keyed by each target's file URL) is rewritten to
the copy's, and so is the demo's printed summary (its commands name the config by its path)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest


def _cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # shared by the workers


def _build(cache: Path, days: int, seed: int) -> None:
    from gpufinops.jobs import demo

    out = io.StringIO()
    assert demo.run(cache / "home", days=days, seed=seed, out=out) == 0, out.getvalue()
    (cache / "summary.txt").write_text(out.getvalue())
    (cache / "done").touch()


def demo_copy(tmp_path_factory: pytest.TempPathFactory, home: Path, *, days: int, seed: int = 7) -> str:
    """Fill `home` with the demo fleet of `days` days and `seed`, ingested and every model run, as
    ``demo.run(home, days=days, seed=seed)`` leaves it; returns what that run printed."""
    cache = _cache_root(tmp_path_factory) / f"demo-cache-{days}d-seed{seed}"
    cache.mkdir(exist_ok=True)
    with (cache / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds, the others wait for it
        if not (cache / "done").exists():
            _build(cache, days, seed)
    built, home = str((cache / "home").resolve()), home.resolve()
    shutil.copytree(cache / "home", home, dirs_exist_ok=True)
    with duckdb.connect(str(home / "data" / "gpufinops.duckdb")) as con:
        con.execute("UPDATE ingest_state SET state = replace(CAST(state AS VARCHAR), ?, ?)", [built, str(home)])
    return (cache / "summary.txt").read_text().replace(built, str(home))


def demo_home(tmp_path_factory: pytest.TempPathFactory, name: str, *, days: int, seed: int) -> Path:
    """A new home named after ``name`` holding the demo of ``days`` days and ``seed`` (see :func:`demo_copy`)."""
    home = tmp_path_factory.mktemp(name)
    demo_copy(tmp_path_factory, home, days=days, seed=seed)
    return home


def ground_truth(home: Path) -> dict:
    """What the demo in ``home`` planted (its ``ground_truth.json``)."""
    return json.loads((home / "ground_truth.json").read_text())


def assert_findings_match_truth(home: Path, planted: dict[str, dict], sql: str) -> None:
    """A demo's findings against its planted truth (``planted``: resource id -> entry with its
    ``monthly_savings_usd``): 95% of the found are planted and 95% of the planted are found, and each hit's
    saving (the second column ``sql`` selects after the resource id) is within 10% of the truth's."""
    from tests.conftest import query

    found = {r[0]: r for r in query(home / "data" / "gpufinops.duckdb", sql)}
    hits = set(planted) & set(found)
    assert planted and len(hits) / len(found) >= 0.95 and len(hits) / len(planted) >= 0.95
    for rid in hits:
        true = Decimal(planted[rid]["monthly_savings_usd"])
        assert abs(found[rid][1] - true) <= Decimal("0.10") * true
