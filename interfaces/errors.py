"""The command line's one error funnel: every failure a user can cause is one sentence, one exit code.

``explain(exc)`` turns an exception into (sentence, exit status): 2 for a usage or config error
(a bad key, a warehouse path that is a directory or not a DuckDB file, a memory limit DuckDB does
not understand), 1 for a failed run (a warehouse locked, read-only or on a full disk, a missing
warehouse for a command that only reads, bad source data). The CLI prints the sentence; the
traceback only with ``-v``, through the scrubbing log formatter: no secret value and no
``user:password@`` of a URL reaches stderr at any verbosity.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from gpufinops.ingest.core import scrub as scrubber

log = logging.getLogger("gpufinops")


def remember_secrets(values: list[str]) -> None:
    """The secret values (from the config's ``*_env`` variables) every message is scrubbed of."""
    scrubber.remember(values)


scrub = scrubber.scrub
ScrubbingFormatter = scrubber.ScrubbingFormatter


@contextlib.contextmanager
def scrubbed_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` through the one scrubber while a command runs: every print,
    table, progress bar and log line of every command, without code of its own."""
    saved = sys.stdout, sys.stderr
    wrapped = [s if isinstance(s, scrubber.ScrubbingStream) else scrubber.ScrubbingStream(s) for s in saved]
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped:
            with contextlib.suppress(Exception):  # a closed pipe: nothing more to show
                stream.flush()
        sys.stdout, sys.stderr = saved


def configure_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ScrubbingFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def _disk_full(text: str) -> bool:
    return any(
        m in text
        for m in (
            "No space left on device",
            "File too large",
            "Disk quota exceeded",
            "could not write",
            "Could not write",
        )
    )


def explain(exc: BaseException, cfg: Any = None) -> tuple[str, int]:
    """(one sentence, exit status) for a failure the CLI reports."""
    from gpufinops.jobs.config_checks import ConfigError
    from gpufinops.warehouse import db

    setting = getattr(cfg, "warehouse_setting", None)
    from gpufinops.jobs.files import OutputRefused

    if isinstance(exc, OutputRefused):
        return str(exc), 2
    if isinstance(exc, ConfigError):
        return (f"config error in {exc.origin}: {exc}" if exc.origin else f"config error: {exc}"), 2
    if isinstance(exc, db.WarehouseError):
        text = str(exc)
        if setting and (exc.usage or isinstance(exc, db.WarehouseMissing)) and str(exc.path) in text:
            text = text.replace(str(exc.path), f"{exc.path} (set by {setting})", 1)
        if isinstance(exc, db.WarehouseMissing):
            text = _missing_hint(text)
        return text, 2 if exc.usage else 1
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        name = getattr(exc, "filename", None)
        return (f"{name}: {exc.strerror}" if name and exc.strerror else str(exc)), 1
    if isinstance(exc, OSError) and exc.errno in (28, 27, 122):  # ENOSPC, EFBIG, EDQUOT
        return f"{getattr(exc, 'filename', None) or 'a file'} can not be written: {exc.strerror} (the disk is full)", 1
    import duckdb

    if isinstance(exc, duckdb.Error):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        path = getattr(cfg, "warehouse_path", None)
        if _disk_full(str(exc)):
            return f"the warehouse {path or ''} can not be written: {first} (free disk space and run again)".replace(
                "warehouse  ", "warehouse "
            ), 1
        return f"the warehouse {path} failed: {first}" if path else first, 1
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    from gpufinops.ingest.core.credentials import hint

    if (credentials := hint(exc)) is not None:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())} ({credentials})", 1
    return f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} (run with -v for the traceback)", 1


def _missing_hint(text: str) -> str:
    """The missing-warehouse sentence with commands runnable as printed, and the demo's config named
    when a demo home (``./demo/gpufinops.toml``) exists: its warehouse is not the default one."""
    import os
    import shlex
    from pathlib import Path

    from gpufinops.jobs.demo_summary import exe_name

    exe = exe_name()
    text = text.replace("`gpufinops ", f"`{exe} ")
    demo_config = Path("demo") / "gpufinops.toml"
    chosen = (
        "--config" in sys.argv or any(a.startswith("--config=") for a in sys.argv) or "GPUFINOPS_CONFIG" in os.environ
    )
    if demo_config.is_file() and not chosen:
        again = shlex.join(sys.argv[1:]) if Path(sys.argv[0]).name in ("gpufinops", "cli.py") else "…"
        text += f"; a demo home exists here: run `{exe} --config {demo_config} {again}`"
    return text


def report(exc: BaseException, *, verbose: int, cfg: Any = None) -> int:
    """Print the failure as one sentence (and, under -v, its traceback, scrubbed); the exit status."""
    sentence, status = explain(exc, cfg)
    if verbose:
        log.error("traceback of the failure below", exc_info=exc)
    print(f"gpufinops: {scrubber.brief(sentence, None)}", file=sys.stderr)  # escaped, long values cut
    return status
