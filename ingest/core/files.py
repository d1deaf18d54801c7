"""Local file discovery shared by file-based ingestors: globs, fingerprints, change detection."""

from __future__ import annotations

import fnmatch
import glob
import os
from pathlib import Path
from typing import Any

from gpufinops.ingest.core.registry import IngestError


def expand_paths(source: str, patterns: str | list[str], base_dir: str | None = None) -> list[str]:
    """Every file matching the configured glob(s), sorted, each real file once.

    A file reached twice (two patterns, a symlink to a file already matched, a symlink loop under a
    ``**`` pattern) is one file: paths are de-duplicated by the real file (device and inode), and a
    directory met again while walking a ``**`` pattern is not entered twice. A matched symlink
    whose target is missing is an error naming it; so is a missing path that is not a glob."""
    if isinstance(patterns, str):
        patterns = [patterns]
    by_file: dict[tuple[int, int], str] = {}
    for pattern in patterns:
        if pattern.startswith("s3://") or "://" in pattern:
            raise IngestError(
                f"{source}: path {pattern!r}: remote paths are read by the cloud ingestors "
                f"(type aws_cur); focus_files reads local paths and globs"
            )
        full = os.path.expanduser(pattern)
        if base_dir and not os.path.isabs(full):
            full = os.path.join(base_dir, full)
        matched = _glob(full)
        if not matched and not glob.has_magic(full):
            raise IngestError(f"{source}: path {pattern!r} does not exist")
        for path in matched:
            check_link(source, path)
            if not os.path.isfile(path):
                continue
            st = os.stat(path)
            key = (st.st_dev, st.st_ino)
            path = os.path.abspath(path)
            by_file[key] = min(by_file.get(key, path), path)  # the same name every run
    return sorted(by_file.values())


def check_link(source: str, path: str) -> None:
    """A symlink whose target does not exist: one sentence naming the link and its target."""
    if os.path.islink(path) and not os.path.exists(path):
        raise IngestError(f"{source}: file {path} is a symbolic link to {os.readlink(path)!r}, which does not exist")


def _glob(pattern: str) -> list[str]:
    if "**" not in pattern:
        return glob.glob(pattern)
    parts = pattern.split(os.sep)
    fixed = next(i for i, p in enumerate(parts) if glob.has_magic(p))
    root = os.sep.join(parts[:fixed]) or (os.sep if pattern.startswith(os.sep) else ".")
    return _walk(root, parts[fixed:])


def _match(names: list[str], pattern: list[str]) -> bool:
    """Whether path segments match glob segments, ``**`` standing for any number of directories."""
    if not pattern:
        return not names
    if pattern[0] == "**":
        return any(
            _match(names[i:], pattern[1:])
            for i in range(len(names) + 1)
            if all(not n.startswith(".") for n in names[:i])
        )
    if not names or (names[0].startswith(".") and not pattern[0].startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], pattern[0]) and _match(names[1:], pattern[1:])


def _walk(root: str, pattern: list[str]) -> list[str]:
    """Files under ``root`` matching ``pattern``; symlinked directories followed, each directory once."""
    found, seen = [], set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:  # a symlink loop, or a second way into a directory
            dirnames[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        relative = os.path.relpath(dirpath, root)
        base = [] if relative == "." else relative.split(os.sep)
        for name in filenames + [
            d
            for d in dirnames
            if os.path.islink(os.path.join(dirpath, d)) and not os.path.exists(os.path.join(dirpath, d))
        ]:
            if _match(base + [name], pattern):
                found.append(os.path.join(dirpath, name))
    return found


def fingerprint(path: str) -> list[int]:
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def changed_files(files: list[str], previous: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(new or modified files, files that were loaded before and are gone now)."""
    changed = [f for f in files if previous.get(f, {}).get("fp") != fingerprint(f)]
    removed = sorted(set(previous) - set(files))
    return changed, removed


def file_format(path: str) -> str:
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".snappy.parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz", ".csv.zst", ".tsv", ".txt", ".log")):
        return "csv"
    raise IngestError(f"file {path}: unknown format (expected .csv, .csv.gz or .parquet)")


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
