"""What each model kind could see: its ``needs`` (``models/kind_spec.py``) measured over the warehouse by
``warehouse/coverage.py``. A kind whose inputs are missing has findings that are *unknown*, not none: every
surface that lists findings (``recommend``, the Recommendations page, the weekly report, the API and MCP) says
which kinds, why, and which source would complete them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import duckdb

from gpufinops.models import registry
from gpufinops.warehouse import coverage


@dataclass(frozen=True)
class KindsUnknown:
    """Kinds sharing one reason they cannot see (part of) their scope."""

    labels: tuple[str, ...]
    kinds: tuple[str, ...]
    cover: coverage.Coverage

    def line(self) -> str:
        """ "Idle GPU, GPU type: unknown for all 1,872 GPU-hours …: no GPU utilisation metrics (…)"."""
        return f"{', '.join(self.labels)}: {self.cover.detail()}"

    def needs_line(self) -> str:
        """ "Idle GPU, GPU type need GPU utilisation metrics (cloudwatch_gpu, dcgm_exporter, … or prometheus)"."""
        inputs = [i for i, _ in self.cover.missing] or list(self.cover.needs)
        wanted = " and ".join(f"{i.label} ({_one_of(i.source_types)})" for i in inputs)
        return f"{', '.join(self.labels)} {'needs' if len(self.labels) == 1 else 'need'} {wanted}"

    def as_dict(self) -> dict[str, object]:
        c = self.cover
        return {
            "kinds": list(self.kinds),
            "state": c.state,
            "unit": c.unit,
            "covered": c.covered,
            "total": c.total,
            "missing": [{"input": i.name, "source_types": list(i.source_types), "unmeasured": n} for i, n in c.missing],
            "resources": c.resources,
            "days": c.days,
            "sentence": self.line(),
        }


def _one_of(names: Sequence[str]) -> str:
    *head, last = names
    return f"{', '.join(head)} or {last}" if head else last


def could_not_look(groups: Sequence[KindsUnknown]) -> str:
    """ "5 kinds could not look: Idle GPU, GPU type need GPU utilisation metrics (… or prometheus)"; empty
    where every kind could see its scope."""
    count = sum(len(group.kinds) for group in groups)
    if not count:
        return ""
    needs = "; ".join(group.needs_line() for group in groups)
    return f"{count} kind{'s' if count != 1 else ''} could not look: {needs}"


def savings_value(amount: str, found: bool, groups: Sequence[KindsUnknown]) -> str:
    """A savings figure beside the kinds that could not look: the amount where every kind could, "at least"
    the amount where some found savings and others were blind, *unknown* (never $0) where none were found."""
    if not any(group.kinds for group in groups):
        return amount
    return f"at least {amount}" if found else "unknown"


def unknown_kinds(
    con: duckdb.DuckDBPyConnection,
    kinds: list[str] | None = None,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[KindsUnknown]:
    """The kinds (all, or ``kinds``) whose inputs do not cover their scope, grouped by the same reason."""
    return unknown_kinds_of(coverage.gpu_hours(con, team=team, start=start, end=end), kinds)


def unknown_kinds_of(hours: coverage.GpuHours, kinds: list[str] | None = None) -> list[KindsUnknown]:
    """``unknown_kinds`` over a scope already read (a page reads ``coverage.gpu_hours`` once, cached)."""
    groups: dict[tuple[str, ...], list[tuple[str, str, coverage.Coverage]]] = {}
    for spec in registry.MODELS:
        if kinds is not None and spec.kind not in kinds:
            continue
        cover = coverage.of(hours, spec.kind, needs=spec.needs, label=spec.label)
        if cover.state in ("unknown", "partial", "empty"):
            groups.setdefault(spec.needs, []).append((spec.kind, spec.label, cover))
    return [
        KindsUnknown(tuple(label for _, label, _ in group), tuple(kind for kind, _, _ in group), group[0][2])
        for group in groups.values()
    ]


def report(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[str, object]:
    """Every derived figure's coverage and the kinds that could not look, as plain JSON (the API's
    ``GET /v1/coverage`` and the MCP ``coverage`` tool)."""
    figures = coverage.measure(con, team=team, start=start, end=end)
    return {
        "figures": {
            name: {
                "state": c.state,
                "unit": c.unit,
                "covered": c.covered,
                "total": c.total,
                "missing": [
                    {"input": i.name, "source_types": list(i.source_types), "unmeasured": n} for i, n in c.missing
                ],
                "sentence": c.sentence() or None,
            }
            for name, c in figures.items()
        },
        "unknown_kinds": [group.as_dict() for group in unknown_kinds(con, team=team, start=start, end=end)],
    }
