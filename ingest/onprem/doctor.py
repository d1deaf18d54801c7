"""``gpufinops doctor``'s check of the on-prem clusters (``ingest.core.doctor``: each spec carries its check)."""

from __future__ import annotations

from pathlib import Path

from gpufinops.ingest.core.doctor import OK, ConfiguredSource, Result, options


def onprem(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    groups = options(source).node_groups or []
    nodes = sum(len(g.get("nodes") or []) for g in groups if isinstance(g, dict))
    return OK, f"{len(groups)} node group(s), {nodes} node(s) (costed from the GPU metrics sources)", None
