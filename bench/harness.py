"""A small benchmark harness: time one callable, sample its peak memory, print one aligned line.

``measure(label, fn)`` runs ``fn`` in this process and returns a figure (a plain dict): rows,
seconds, rows/s and peak RSS. Peak RSS is the larger of

* a psutil sample, every ~20 ms in a background thread, of this process plus all its children
  (summed), and
* ``getrusage(RUSAGE_SELF).ru_maxrss`` as a floor, which catches a spike of this process shorter
  than the sampling period.

``ru_maxrss`` is the peak over the process's whole life, so a per-load peak needs a fresh process
per load: ``measure_in_subprocess(label, "module:function", kwargs)`` runs ``measure`` in a new
Python process (``python -m bench.harness``) and returns the figure it reports.

Figures can be checked against targets (``Target``), printed with PASS/FAIL, and appended as JSON
lines to a results file. Nothing here exits non-zero for a missed target: these are figures, not tests.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULT_MARKER = "BENCH_FIGURE "
SAMPLE_INTERVAL_S = 0.02
MIB = 1024 * 1024


class RssSampler:
    """Samples the RSS of a process and its children (summed) in a daemon thread; keeps the peak."""

    def __init__(self, pid: int | None = None, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._process = psutil.Process(pid)
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_bytes = 0
        self.samples = 0

    def _sample(self) -> int:
        total = 0
        try:
            total += self._process.memory_info().rss
            for child in self._process.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:  # the child ended between listing and reading
                    pass
        except psutil.Error:
            pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self.samples += 1
            self._stop.wait(self._interval_s)

    def __enter__(self) -> RssSampler:
        self.peak_bytes = self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._sample())


def _cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU time of the process and its waited-for children, in seconds."""
    t = process.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def ru_maxrss_bytes() -> int:
    """Lifetime peak RSS of this process in bytes (Linux reports KiB, macOS bytes).

    Only RUSAGE_SELF: RUSAGE_CHILDREN is the peak of any child ever waited for (earlier
    measurements' children included), which would misattribute their peak to this figure; the
    children of the measured call are covered by the sampler.
    """
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


@dataclass(frozen=True)
class Target:
    """A figure's target, e.g. Target("rows_per_s", ">=", 1_000_000, "≥ 1M rows/s")."""

    key: str
    op: str  # ">=", "<=", "<", ">"
    threshold: float
    text: str

    def check(self, figure: dict[str, Any]) -> bool | None:
        value = figure.get(self.key)
        if value is None:
            return None
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
        }[self.op]


def _rows_of(result: Any) -> int | None:
    if isinstance(result, bool):
        return None
    if isinstance(result, int):
        return result
    if isinstance(result, dict) and isinstance(result.get("rows"), int):
        return result["rows"]
    return None


def measure(
    label: str,
    fn: Callable[[], Any],
    *,
    results_file: str | os.PathLike | None = None,
    extra: dict[str, Any] | None = None,
    targets: Iterable[Target] = (),
    quiet: bool = False,
) -> dict[str, Any]:
    """Run ``fn`` once; return (and print) its figure.

    ``fn`` returns the number of rows it handled, or a dict with ``rows`` and any other plain
    values to report (they are merged into the figure).
    """
    me = psutil.Process()
    baseline = me.memory_info().rss
    cpu_before = _cpu_seconds(me)
    load_before = os.getloadavg()[0]
    with RssSampler() as sampler:
        started = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - started
    cpu_seconds = _cpu_seconds(me) - cpu_before
    peak = max(sampler.peak_bytes, ru_maxrss_bytes())
    rows = _rows_of(result)
    figure: dict[str, Any] = {
        "label": label,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds) if rows and seconds > 0 else None,
        "cpu_seconds": round(cpu_seconds, 2),
        "peak_rss_mib": round(peak / MIB, 1),
        "baseline_rss_mib": round(baseline / MIB, 1),
        # Other processes on the machine skew wall time: the 1-minute load average before and after.
        "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "rss_samples": sampler.samples,
        "pid": os.getpid(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if isinstance(result, dict):
        figure.update({k: v for k, v in result.items() if k != "rows"})
    if extra:
        figure.update(extra)
    report(figure, targets=targets, results_file=results_file, quiet=quiet)
    return figure


def check_targets(figure: dict[str, Any], targets: Iterable[Target]) -> list[str]:
    """'PASS ≥ 1M rows/s' / 'FAIL …' per target; also stored in figure['checks']."""
    checks = []
    for target in targets:
        ok = target.check(figure)
        checks.append(f"{'n/a ' if ok is None else 'PASS' if ok else 'FAIL'} {target.text}")
    figure.setdefault("checks", []).extend(checks)
    return checks


def format_line(figure: dict[str, Any]) -> str:
    def num(value: Any, spec: str) -> str:
        return format(value, spec) if isinstance(value, (int, float)) else "-"

    line = (
        f"{figure['label']:<34} rows {num(figure.get('rows'), ',d'):>12}  "
        f"{num(figure.get('seconds'), '8.2f')} s  "
        f"{num(figure.get('rows_per_s'), ',d'):>11} rows/s  "
        f"peak RSS {num(figure.get('peak_rss_mib'), '7.0f')} MiB  "
        f"cpu {num(figure.get('cpu_seconds'), '7.1f')} s  "
        f"load {num((figure.get('loadavg_1m') or [None])[0], '4.1f')}"
    )
    if figure.get("checks"):
        line += "   " + "  ".join(f"[{c}]" for c in figure["checks"])
    return line


def report(
    figure: dict[str, Any],
    *,
    targets: Iterable[Target] = (),
    results_file: str | os.PathLike | None = None,
    quiet: bool = False,
) -> None:
    """Check targets, print the aligned line (unless quiet) and append a JSON line to results_file."""
    check_targets(figure, targets)
    if not quiet:
        print(format_line(figure), flush=True)
    if results_file:
        Path(results_file).parent.mkdir(parents=True, exist_ok=True)
        with open(results_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(figure, sort_keys=True, default=str) + "\n")


def reuse_or_clear(home: Path, marker: str = ".generated") -> bool:
    """Whether ``home`` holds a finished generation (its ``marker`` file, written last); if not, whatever a
    generation cut short left there is removed, for a new one."""
    if (home / marker).exists():
        return True
    shutil.rmtree(home, ignore_errors=True)
    return False


def cached_warehouse(home: Path, fill: Callable[[Path], None]) -> Path:
    """``home``'s warehouse: the one a finished generation left there, or a new one ``fill`` writes into
    a fresh ``home`` (its ``.generated`` marker written last, see :func:`reuse_or_clear`)."""
    path = home / "gpufinops.duckdb"
    if not reuse_or_clear(home):
        home.mkdir(parents=True)
        fill(path)
        (home / ".generated").write_text("ok\n")
    return path


def write_sample_day(con: Any, store: Path, day: Any, select: str, parquet_options: str = "") -> None:
    """The rows of ``select`` (one day's samples) written as the store's partition of ``day`` (a date or
    datetime): ``day=YYYY-MM-DD/base.parquet``, zstd-compressed (plus ``parquet_options``), then named."""
    folder = store / f"day={day.strftime('%Y-%m-%d')}"
    folder.mkdir(parents=True)
    con.execute(f"COPY ({select}) TO '{folder / 'base.parquet'}' (FORMAT parquet, COMPRESSION zstd{parquet_options})")


def fill_warehouse(
    path: Path, statements: Iterable[str], memory_limit: str, then: Callable[[Any], Any] | None = None
) -> None:
    """A bench warehouse at ``path`` from ``statements`` (SQL on its schema, each named as it finishes),
    ``then`` called on the connection (a derived table refreshed), checkpointed."""
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit=memory_limit) as con:
        con.execute("SET enable_progress_bar = false")
        for statement in statements:
            con.execute(statement)
            print(f"  generated {statement.split()[2]}", file=sys.stderr, flush=True)
        if then is not None:
            then(con)
        con.execute("CHECKPOINT")


def sized_main(
    argv: list[str] | None,
    doc: str,
    run: Callable[..., int],
    sizes: dict[str, int],
    quick: tuple[int, ...],
    title: str,
) -> int:
    """A bench's command line: ``--quick`` (the ``quick`` sizes, a smoke run) or one ``--<size>`` per
    ``sizes`` entry (its default); prints ``title`` formatted with the sizes, then ``run(*sizes)``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{title.format(*quick)} (a smoke run)")
    for name, default in sizes.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    chosen = quick if args.quick else tuple(getattr(args, name) for name in sizes)
    print(title.format(*chosen), flush=True)
    return run(*chosen)


def rows_main(argv: list[str] | None, doc: str, run: Callable[[int], int], default: int, quick: int) -> int:
    """A bench's command line that takes a number of line items: ``--rows`` or ``--quick``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help=f"line items (default {default:,d})")
    parser.add_argument("--quick", action="store_true", help=f"{quick:,d} rows")
    args = parser.parse_args(argv)
    return run(args.rows or (quick if args.quick else default))


def _resolve(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def measure_in_subprocess(
    label: str,
    target: str,
    kwargs: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run ``measure(label, target(**kwargs))`` in a fresh Python process; return its figure.

    ``target`` is "package.module:function"; kwargs must be JSON-serialisable. The child's figure
    comes back on stdout after a marker; its stderr is shown only when it fails. The figure is
    not printed here: call ``report`` with the targets that apply.
    """
    command = [
        sys.executable,
        "-m",
        "bench.harness",
        "--label",
        label,
        "--call",
        target,
        "--kwargs",
        json.dumps(kwargs or {}),
    ]
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), child_env.get("PYTHONPATH")]))
    child_env.update(env or {})
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=child_env, capture_output=True, text=True, errors="replace", timeout=timeout_s
    )
    figures = [
        json.loads(line[len(RESULT_MARKER) :]) for line in done.stdout.splitlines() if line.startswith(RESULT_MARKER)
    ]
    if done.returncode != 0 or not figures:
        # The child's stderr (DuckDB progress bars included) is shown only when it failed.
        sys.stderr.write(done.stderr[-4000:])
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no output"
        raise RuntimeError(f"{label}: child process failed (exit {done.returncode}): {last}")
    return figures[-1]


def _child_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one measured call (used by measure_in_subprocess).")
    parser.add_argument("--label", required=True)
    parser.add_argument("--call", required=True, help="package.module:function")
    parser.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments")
    args = parser.parse_args(argv)
    fn = _resolve(args.call)
    kwargs = json.loads(args.kwargs)
    # Any output of fn goes to stderr so that stdout carries only the figure.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        figure = measure(args.label, lambda: fn(**kwargs), quiet=True)
    finally:
        sys.stdout = real_stdout
    print(RESULT_MARKER + json.dumps(figure, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
