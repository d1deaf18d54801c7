"""Benchmark: what one writer connection costs (a dashboard decision click, an API decision, a job).

Opens and closes ``warehouse.db.writer`` on an existing warehouse ``--rounds`` times and reports, per
connection, the migration checks and reference refreshes it ran (counted by wrapping
``warehouse.db.migrate`` / the version check and ``warehouse.reference.refresh_*``) and its median
wall time, beside DuckDB's floor measured in the same run: ``duckdb.connect`` + close of the same file.
Runs against whichever ``warehouse`` package is first on ``sys.path`` (so the same script measures an
older checkout: ``cd <checkout> && PYTHONPATH=. python <this file> WAREHOUSE``).

    python -m bench.bench_connect data/gpufinops.duckdb --rounds 50
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.warehouse import db, reference

COUNTED = {
    db: ("migrate", "current_version", "_stored_version", "prepare"),
    reference: ("refresh_gpu_specs", "refresh_gpu_instance_types"),
}


def _counting(calls: Counter, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return func(*args, **kwargs)

    return wrapper


def instrument() -> Counter:
    calls: Counter = Counter()
    for module, names in COUNTED.items():
        for name in names:
            if hasattr(module, name):
                setattr(module, name, _counting(calls, name, getattr(module, name)))
    return calls


def median_ms(action: Callable[[], None], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    if hasattr(db, "prepare"):
        db.prepare(args.warehouse)  # once, as a process's start does
    calls = instrument()

    def open_writer() -> None:
        with db.writer(args.warehouse) as con:
            con.execute("SELECT 1")

    def floor() -> None:
        con = duckdb.connect(str(args.warehouse))
        con.execute("SELECT 1")
        con.close()

    open_writer()  # warm the OS cache
    calls.clear()
    writer_ms = median_ms(open_writer, args.rounds)
    per_connection = {name: count / args.rounds for name, count in sorted(calls.items())}
    floor_ms = median_ms(floor, args.rounds)
    print(
        f"writer connection: {writer_ms:.2f} ms median over {args.rounds}; DuckDB floor (connect + close) "
        f"{floor_ms:.2f} ms; ratio {writer_ms / floor_ms:.2f}"
    )
    print(f"per writer connection: {per_connection or 'no migration check, no reference refresh'}")


if __name__ == "__main__":
    main()
