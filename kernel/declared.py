"""How a registry finds its plug-ins: the modules under a folder that declare a name at their top level.

The one discovery both registries use (docs/architecture.md, *Add a source* and *Add a model kind*): the
ingest registry finds every module declaring ``INGESTORS``, the model registry every module declaring
``MODEL_KINDS``, so a new source or kind is found where it lies, with no list to add it to. It lives in this
room because it is the lowest both ingest and models may import (like ``kernel/options.py``, the option
specs both declare their settings with). Files are read as text, never imported here: the registry
imports what it finds.
"""

from __future__ import annotations

import re
from pathlib import Path


def modules_declaring(name: str, root: Path, package: str) -> tuple[str, ...]:
    """The dotted names (``package`` + the path under ``root``) of the modules under ``root`` with a line
    starting ``name``, in path order."""
    line = re.compile(rf"^{re.escape(name)}\b", re.MULTILINE)
    return tuple(
        ".".join([package, *path.relative_to(root).with_suffix("").parts])
        for path in sorted(root.rglob("*.py"))
        if line.search(path.read_text(encoding="utf-8"))
    )
