"""The objects under one configured prefix, folded into (root, run, checkpoint, storage class) groups,
and the ``storage_objects`` rows they become: the same for S3 and GCS listings (each inventory lists its
own service and says what each object's key, class, size and modification time are)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpufinops.ingest.storage.options import PrefixRule


def _group_key(root: str, key: str) -> tuple[str, str]:
    """(run, checkpoint) of ``key`` under ``root``: the first two path segments below the prefix."""
    rest = key[len(root) :].lstrip("/").split("/")
    if len(rest) == 1:
        return "", rest[0]
    return rest[0], rest[1] + "/" if len(rest) > 2 else rest[1]  # a folder ends with "/"


class PrefixGroups:
    """Objects counted per (root, run, checkpoint, storage class): [objects, bytes, oldest, newest]."""

    def __init__(self, rule: PrefixRule) -> None:
        self.rule = rule
        self.groups: dict[tuple[str, str, str, str], list] = {}
        self.seen = 0  # objects under the rule's roots so far

    def holds(self, key: str) -> bool:
        return self.rule.root(key) is not None

    def add(self, key: str, storage_class: str | None, size: int | None, modified: datetime | None) -> None:
        """Count one object whose key ``holds``."""
        root = self.rule.root(key)
        assert root is not None
        self.seen += 1
        run, checkpoint = _group_key(root, key)
        group = self.groups.setdefault((root, run, checkpoint, storage_class or "STANDARD"), [0, 0, None, None])
        group[0] += 1
        group[1] += int(size or 0)
        group[2] = modified if group[2] is None or modified < group[2] else group[2]
        group[3] = modified if group[3] is None or modified > group[3] else group[3]

    def rows(self, source: str, provider: str, access: str, now: datetime) -> list[dict[str, Any]]:
        """One row per group; with none, one empty row for the prefix: it is recorded even when empty or
        refused (a finding names it)."""
        rule = self.rule
        base = {
            "source": source,
            "provider": provider,
            "bucket": rule.bucket,
            "purpose": rule.purpose,
            "team": rule.team,
            "access": access,
            "observed_at": now,
        }
        if not self.groups:
            return [
                {
                    **base,
                    "prefix": rule.literal,
                    "run": None,
                    "checkpoint": None,
                    "storage_class": None,
                    "objects": 0,
                    "bytes": 0,
                    "oldest_at": None,
                    "newest_at": None,
                }
            ]
        return [
            {
                **base,
                "prefix": root,
                "run": run,
                "checkpoint": checkpoint,
                "storage_class": storage_class,
                "objects": count,
                "bytes": size,
                "oldest_at": oldest,
                "newest_at": newest,
            }
            for (root, run, checkpoint, storage_class), (count, size, oldest, newest) in self.groups.items()
        ]
