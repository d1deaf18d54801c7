"""What a storage inventory reads: regions, the configured bucket prefixes (globs), the team tags, bounds.

Never a whole account's objects: only the prefixes named here are listed (a prefix whose part before its
first wildcard is empty, ``?*/`` or ``*/ckpt/``, would list the whole bucket and is refused), each bounded by
``max_objects_per_prefix`` (a prefix past it is recorded as partial, and no finding is made on it).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from gpufinops.ingest.aws.aws_common import AwsClientOptions
from gpufinops.ingest.core.spec import OptionProblem, option

PURPOSES = ("checkpoint", "dataset")
WILDCARDS = "*?["


def literal_part(prefix: str) -> str:
    """The part of a prefix before its first wildcard: what a listing asks the service for."""
    cut = min((prefix.find(c) for c in WILDCARDS if c in prefix), default=len(prefix))
    return prefix[:cut]


def unscoped(prefix: str) -> str | None:
    """Why listing ``prefix`` would read the whole bucket (its literal part is empty), or None."""
    if literal_part(prefix.lstrip("/")).strip("/ "):
        return None
    return (
        f"the part before the first wildcard is empty (got {prefix!r}): the listing would ask for the whole "
        f"bucket; start with a literal folder (e.g. 'train/*/ckpt/')"
    )


@dataclass(frozen=True)
class PrefixRule:
    """One configured location: ``bucket`` and ``prefix`` (``ckpt/*/`` style globs allowed)."""

    bucket: str
    prefix: str
    purpose: str = "checkpoint"
    team: str | None = None
    read_filter: str | None = None  # the S3 request-metrics filter (FilterId) counting GETs on the prefix

    @classmethod
    def parse(cls, table: dict[str, Any], where: str) -> PrefixRule:
        unknown = sorted(set(table) - {"bucket", "prefix", "purpose", "team", "read_filter"})
        if unknown:
            raise OptionProblem(
                f"{where}.{unknown[0]}", "unknown key (known: bucket, prefix, purpose, team, read_filter)"
            )
        bucket, prefix = table.get("bucket"), table.get("prefix")
        if not isinstance(bucket, str) or not bucket.strip() or any(c in bucket for c in WILDCARDS + "/"):
            raise OptionProblem(f"{where}.bucket", f"a bucket name is required, without wildcards (got {bucket!r})")
        if not isinstance(prefix, str) or not prefix.strip("/* "):
            raise OptionProblem(
                f"{where}.prefix", f"a prefix is required: listing a whole bucket is refused (got {prefix!r})"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in bucket + prefix):
            raise OptionProblem(f"{where}.prefix", "a control character in the bucket or prefix")
        if problem := unscoped(prefix):
            raise OptionProblem(f"{where}.prefix", problem)
        purpose = table.get("purpose", "checkpoint")
        if purpose not in PURPOSES:
            raise OptionProblem(f"{where}.purpose", f"one of {', '.join(PURPOSES)} (got {purpose!r})")
        return cls(bucket, prefix.lstrip("/"), purpose, table.get("team"), table.get("read_filter"))

    @property
    def literal(self) -> str:
        """The part of the prefix before its first wildcard: what the listing asks the service for."""
        return literal_part(self.prefix)

    def root(self, key: str) -> str | None:
        """The configured location ``key`` lies under (the glob's match, ending at a ``/``), or None."""
        if not any(c in self.prefix for c in WILDCARDS):
            return self.prefix if key.startswith(self.prefix) else None
        depth = self.prefix.rstrip("/").count("/") + 1
        parts = key.split("/")
        if len(parts) <= depth:
            return None
        head = "/".join(parts[:depth]) + "/"
        return (
            head if fnmatch.fnmatchcase(head, self.prefix if self.prefix.endswith("/") else self.prefix + "/") else None
        )


class PrefixRules:
    """The ``prefixes`` option of a storage source's options, parsed into rules (the parsing is its check)."""

    prefixes: list[dict]

    @property
    def rules(self) -> list[PrefixRule]:
        return [PrefixRule.parse(t, f"prefixes[{i}]") for i, t in enumerate(self.prefixes)]

    def validate(self) -> None:
        self.rules  # noqa: B018  # parsing is the check


@dataclass(frozen=True, kw_only=True)
class StorageOptions(PrefixRules, AwsClientOptions):
    regions: list[str] = option(["us-east-1"], "the regions whose volumes and snapshots are listed")
    prefixes: list[dict] = option([], "bucket prefixes to inventory: [{bucket, prefix, purpose, team, read_filter}]")
    team_tag_keys: list[str] = option(["team"], "tags that name a volume's or snapshot's team")
    metrics_days: int = option(14, "days of CloudWatch AWS/EBS operations read per provisioned-IOPS volume")
    max_objects_per_prefix: int = option(10_000_000, "objects listed under one prefix before it is recorded as partial")

    @classmethod
    def of(cls, **values: Any) -> StorageOptions:
        options = cls(**values)
        options.validate()
        return options
