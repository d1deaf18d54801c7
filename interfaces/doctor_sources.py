"""``gpufinops doctor``'s reachability check of each configured source, with a timeout.

Each source type's spec carries its check (``IngestorMeta.doctor``: a callable defined in the doctor module of the
source's own room, ``ingest/<room>/doctor.py``, with the shared pieces in ``ingest/core/doctor.py``) and the extra it
needs (``IngestorMeta.extra``); doctor iterates the registry and asks each spec. A plug-in may name its check as
``"module:function"`` instead. Each check reads the source's typed options and returns ``(status, detail, fix)``;
an exception becomes a failed check naming the call.
"""

from __future__ import annotations

import functools
import importlib

from gpufinops.ingest.core.doctor import (  # the statuses every check module shares
    FAIL,
    OK,
    SKIP,
    WARN,
    Check,
    Result,
    options,
)
from gpufinops.ingest.core.registry import IngestorMeta, Registry, default_registry
from gpufinops.jobs.config import SourceConfig

__all__ = [
    "FAIL",
    "OK",
    "SKIP",
    "WARN",
    "Check",
    "Result",
    "check_of",
    "needs_extra",
    "options",
]


@functools.cache
def _builtin() -> Registry:
    return default_registry()


def _meta(source_type: str, registry: Registry | None = None) -> IngestorMeta:
    return (registry or _builtin()).get(source_type).meta


def check_of(source_type: str, registry: Registry | None = None) -> Check | None:
    """The reachability check a source type's spec carries (``IngestorMeta.doctor``: the callable, or a
    plug-in's "module:function"), None when it declares none (it reaches nothing) or the type is unknown."""
    registry = registry or _builtin()
    if source_type not in registry:
        return None
    declared = _meta(source_type, registry).doctor
    if declared is None or callable(declared):
        return declared
    module, _, function = declared.partition(":")
    check: Check = getattr(importlib.import_module(module), function)
    return check


def needs_extra(source: SourceConfig, registry: Registry | None = None) -> str | None:
    """The extra a source's API calls need (its spec's ``extra``; None: it reads files or plain HTTP)."""
    registry = registry or _builtin()
    if source.type not in registry:
        return None
    meta = _meta(source.type, registry)
    if meta.extra is None:
        return None
    return meta.extra.needed(source.parsed)
