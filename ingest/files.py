"""Local file discovery shared by file-based ingestors: globs, fingerprints, change detection."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from ingest.registry import IngestError


def expand_paths(source: str, patterns: str | list[str], base_dir: str | None = None) -> list[str]:
    """Every file matching the configured glob(s), sorted; an error if a pattern is not a glob and is missing."""
    if isinstance(patterns, str):
        patterns = [patterns]
    files: set[str] = set()
    for pattern in patterns:
        if pattern.startswith("s3://") or "://" in pattern:
            raise IngestError(f"{source}: path {pattern!r}: remote paths are read by the cloud ingestors "
                              f"(type aws_cur); focus_files reads local paths and globs")
        full = os.path.expanduser(pattern)
        if base_dir and not os.path.isabs(full):
            full = os.path.join(base_dir, full)
        matched = [p for p in glob.glob(full, recursive=True) if os.path.isfile(p)]
        if not matched and not glob.has_magic(full):
            raise IngestError(f"{source}: path {pattern!r} does not exist")
        files.update(os.path.abspath(p) for p in matched)
    return sorted(files)


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
