"""The simulator's export files written as a provider delivers them: one file per month, rewritten only
when its bytes change (so a re-run keeps their modification times and the ingest skips them), and the
months no longer generated removed."""

from __future__ import annotations

from pathlib import Path


def write_if_changed(path: Path, data: bytes) -> None:
    """``data`` at ``path`` (its folder made), unless the file already holds exactly those bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def write_months(folder: Path, pattern: str, files: dict[str, bytes]) -> Path:
    """``files`` (name -> bytes) in ``folder``; a file matching ``pattern`` that is not among them (a month
    an earlier run generated) removed. Returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(pattern):
        if stale.name not in files:
            stale.unlink()
    for name, data in sorted(files.items()):
        write_if_changed(folder / name, data)
    return folder
