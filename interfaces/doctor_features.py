"""``gpufinops doctor``'s feature matrix: which figures and recommendation kinds the configured sources can
compute, and which stay *unknown* until another source is added (a bill without GPU metrics cannot say a GPU
idled). Derived from the declarations: each figure's inputs (``warehouse/inputs.py``), each kind's ``needs``
(``models/kind_spec.py``), and each input's source types."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from gpufinops.warehouse.inputs import FIGURES, INPUTS


def features() -> list[tuple[str, tuple[str, ...]]]:
    """(feature label, the inputs it needs): every derived figure, then every registered kind."""
    from gpufinops.models import registry

    rows = [(f.label, f.needs) for f in FIGURES.values()]
    return rows + [(f"{spec.label} findings", spec.needs) for spec in registry.MODELS]


def unknown(configured: set[str]) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """The features some input of which no configured source type provides: (label, needs, missing inputs)."""
    provided = {name for name, i in INPUTS.items() if configured & set(i.source_types)}
    out = []
    for label, needs in features():
        missing = [n for n in needs if n not in provided]
        if missing:
            out.append((label, needs, missing))
    return out


def matrix(cfg) -> Table | None:
    """The table of features that stay unknown with this config's sources (None: every feature is computable,
    or no source is configured yet: the config check says that)."""
    configured = {s.type for s in cfg.sources.values() if s.enabled}
    rows = unknown(configured) if configured else []
    if not rows:
        return None
    table = Table(title="Features that stay unknown with these sources", title_justify="left", show_edge=False)
    table.add_column("Feature", no_wrap=True)
    table.add_column("Needs", overflow="fold")
    table.add_column("Add", overflow="fold")
    for label, needs, missing in rows:
        have = ", ".join(INPUTS[n].label if n not in missing else f"[red]{INPUTS[n].label}[/red]" for n in needs)
        add = "; ".join(f"{INPUTS[n].label}: {', '.join(INPUTS[n].source_types)}" for n in missing)
        table.add_row(label, Text.from_markup(have), add)
    return table
