"""Progress for the long runs (demo, ingest, recommend, evaluate, bench): a bar over the steps, the
step running now and the time it has taken, drawn on stderr with rich.

Drawn only when both stdout and stderr are terminals (a script, a pipe, a CI log or a test sees
nothing: their output stays exactly what it was) and ``GPUFINOPS_NO_PROGRESS`` is unset. The bar
is transient: when the run ends it disappears and the command's own output follows; what is
printed meanwhile (a benchmark's figures) scrolls above it.

    with progress.steps(3, "demo") as step:
        step.start("simulating the fleet"); ...; step.done()
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


def enabled(stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> bool:
    if os.environ.get("GPUFINOPS_NO_PROGRESS"):
        return False
    streams = (stdout or sys.stdout, stderr or sys.stderr)
    try:
        return all(s.isatty() for s in streams)
    except (AttributeError, ValueError, OSError):
        return False


class Steps:
    """The handle a ``steps`` block gets: ``start(description)`` a step, ``done()`` when it ends."""

    def __init__(self, bar: Progress | None, total: int, label: str) -> None:
        # the bar and this block's task on it; None: not on a terminal
        self._bar: tuple[Progress, TaskID] | None = (bar, bar.add_task(label, total=total)) if bar else None
        self.label = label

    def start(self, description: str) -> None:
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, description=description)

    def done(self, steps: int = 1) -> None:
        if self._bar is not None:
            bar, task = self._bar
            bar.advance(task, steps)

    def grow(self, steps: int) -> None:
        """More steps than announced (a run that learns its size as it goes)."""
        if self._bar is not None:
            bar, task = self._bar
            bar.update(task, total=(bar.tasks[task].total or 0) + steps)


@contextlib.contextmanager
def steps(total: int, label: str, *, stderr: IO[str] | None = None, stdout: IO[str] | None = None) -> Iterator[Steps]:
    """A transient progress bar of ``total`` steps on stderr (a no-op when not on a terminal)."""
    if not enabled(stdout, stderr):
        yield Steps(None, total, label)
        return
    console = Console(file=stderr or sys.stderr, highlight=False)
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        redirect_stdout=True,
        redirect_stderr=True,
    )  # both are this terminal: lines printed meanwhile go above the bar
    with bar:
        yield Steps(bar, total, label)


class LineSteps(Steps):
    """Steps as plain lines on a stream that is no terminal (a long run's log: ``evaluate 2> eval.log``): one
    line as each step starts, with its number and the time since the run began."""

    def __init__(self, total: int, label: str, stream: IO[str]) -> None:
        super().__init__(None, total, label)
        self.total, self.stream, self.n = total, stream, 0
        self.began = time.monotonic()

    def start(self, description: str) -> None:
        self.n += 1
        elapsed = time.monotonic() - self.began
        print(f"gpufinops {self.label}: [{self.n}/{self.total}] {description} ({elapsed:.0f} s)", file=self.stream)
        self.stream.flush()

    def grow(self, steps: int) -> None:
        self.total += steps


@contextlib.contextmanager
def steps_or_lines(total: int, label: str) -> Iterator[Steps]:
    """The bar on a terminal, else one line a step on stderr (unless ``GPUFINOPS_NO_PROGRESS`` is set): for
    runs long enough that silence reads as a hang."""
    if enabled() or os.environ.get("GPUFINOPS_NO_PROGRESS"):
        with steps(total, label) as step:
            yield step
        return
    yield LineSteps(total, label, sys.stderr)
