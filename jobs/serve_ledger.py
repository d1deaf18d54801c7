"""`gpufinops serve`'s lock (one daemon per warehouse) and its ledger of job runs (``job_runs``).

The lock is an exclusive ``fcntl`` lock on a file beside the warehouse, held for the daemon's life and
released by the OS if it dies; the file holds the daemon's pid, for the message a second one prints.
Every job but an ingest (recorded in ``ingest_runs`` by the runner) is one ``job_runs`` row: written
``running`` when it starts, closed when it ends; runs a killed daemon left ``running`` are closed as
interrupted by the next one.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from gpufinops.jobs.config import Config

# --- the lock ------------------------------------------------------------------------------------


class AlreadyRunning(RuntimeError):
    """Another daemon holds the lock for this warehouse."""


def lock_path(cfg: Config) -> Path:
    return cfg.warehouse_path.parent / f"{cfg.warehouse_path.name}.serve.lock"


def acquire_lock(path: Path) -> IO[str]:
    """An exclusive fcntl lock held for the daemon's life (released by the OS if it dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise AlreadyRunning(
            f"another `gpufinops serve` (pid {holder}) already runs on this warehouse (lock {path})"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


# --- the ledger (job_runs) -----------------------------------------------------------------------


def now_utc() -> datetime:
    return datetime.now(UTC)


def ledger_start(cfg: Config, job: str) -> str:
    from gpufinops.warehouse import db

    run_id = uuid.uuid4().hex
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        con.execute("INSERT INTO job_runs VALUES (?, ?, ?, NULL, 'running', NULL)", [run_id, job, now_utc()]).fetchall()
    return run_id


def ledger_finish(cfg: Config, run_id: str, status: str, error: str | None = None) -> None:
    from gpufinops.warehouse import db

    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        con.execute(
            "UPDATE job_runs SET finished_at = ?, status = ?, error = ? WHERE run_id = ?",
            [now_utc(), status, error, run_id],
        ).fetchall()


def close_interrupted_runs(cfg: Config) -> int:
    """Runs a killed daemon left 'running': we hold the daemon lock, so none of them is alive."""
    from gpufinops.warehouse import db

    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        rows = con.execute(
            "UPDATE job_runs SET status = 'failed', finished_at = now(), "
            "error = 'interrupted: the daemon ended before the run finished' "
            "WHERE status = 'running'"
        ).fetchall()
    return int(rows[0][0]) if rows else 0
