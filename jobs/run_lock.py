"""One run at a time per warehouse for a job that waits its turn (alerts, report delivery): an exclusive
``fcntl`` lock on a file beside the warehouse, retried until a deadline, released when the block ends
(or by the OS if the process dies). The daemon's own lock, which never waits, is in ``serve_ledger``.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator

from gpufinops.jobs.config import Config


@contextlib.contextmanager
def waiting_lock(cfg: Config, job: str, holder: str, timeout_s: float = 600.0) -> Iterator[None]:
    """Hold ``<warehouse>.<job>.lock``; after ``timeout_s`` of waiting, "another <holder> holds <path>"."""
    path = cfg.warehouse_path.parent / f"{cfg.warehouse_path.name}.{job}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"another {holder} holds {path}") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
