"""`gpufinops export {json,kueue,karpenter,skypilot}`: recommendations in a scheduler's own format.

Everything is read through one read-only connection; the output is text (JSON, or multi-document
YAML for the Kubernetes and SkyPilot formats) written to a file or stdout by the CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from jobs.export import karpenter, kueue, objects, plan, skypilot, yamlout

FORMATS = ("json", "kueue", "karpenter", "skypilot")


def render(con, fmt: str, *, team: str | None = None) -> str:
    """The export in ``fmt`` for one team (None: every team)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    recs = objects.load(con, team=team)
    if fmt == "json":
        return json.dumps(recs, indent=2) + "\n"
    actionable = objects.actionable(recs)
    if fmt == "skypilot":
        docs = skypilot.documents(actionable)
    else:
        from warehouse import queries
        capacity = queries.team_gpu_capacity(con, team=team).to_dicts()
        pools = plan.build(capacity, actionable)
        docs = kueue.documents(pools) if fmt == "kueue" else karpenter.documents(pools)
    if not docs:
        return f"# gpufinops export {fmt}: nothing to export{' for team ' + team if team else ''}\n"
    return yamlout.dump_all(docs)


def write(text: str, out: str | os.PathLike | None) -> None:
    """To ``out`` through a temporary file and a rename (never half-written), else stdout."""
    if out is None:
        print(text, end="")
        return
    path = Path(out)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
