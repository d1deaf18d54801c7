"""The command line's own tables (recommendations, sources, ingest runs), built on ``jobs.output``.

Each function takes plain rows and prints them to fit the terminal; the column specs live here so
the table a command prints is defined once (``recommend``, ``demo`` and ``ingest`` share them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import IO, Any

from gpufinops.jobs import cells, output
from gpufinops.jobs.cells import ID, INT, MONEY, RATIO, TEXT, TIME, WRAP, Col
from gpufinops.kernel import labels
from gpufinops.models.recommendation import flat_row

RECOMMENDATION_COLUMNS = (
    Col("monthly_savings_usd", "Savings/mo", MONEY),
    Col("kind", "Kind", TEXT),  # (wraps a long label, "Checkpoint lifecycle", before an id is elided)
    Col("status", "Status", TEXT, no_wrap=True, hide_below=120),  # always shown once a finding is decided
    Col("team", "Team", TEXT, no_wrap=True),
    Col("provider", "Cloud", TEXT, no_wrap=True, hide_below=90),
    Col("resource_id", "Resource", ID),
    Col("what", "Action", WRAP),
    Col("confidence", "Conf.", RATIO, hide_below=90),
    Col("id", "ID", ID, no_wrap=True, hide_below=130),
)
HIDDEN_ID_CAPTION = "IDs (for decisions and the API): a wider terminal, or --format csv / json"


def recommendation_rows(recs: Iterable[Any]) -> list[dict[str, Any]]:
    """Recommendation objects (or their dicts) as table rows. The action is the sentence a reader
    acts on; what it changes key by key is in the CSV's ``change`` column (here it repeated the
    action and doubled every row's height)."""
    rows = []
    for rec in recs:
        flat = flat_row(rec.to_dict() if hasattr(rec, "to_dict") else dict(rec))
        rows.append(
            {
                **flat,
                "kind": labels.label(flat["kind"], "kind"),  # the code is in --format csv / json
                "team": labels.team_label(flat["team"]),
                "resource_id": flat["resource_id"] or rec_workload(rec) or cells.MISSING,
                "what": flat["action"] or flat["change"] or cells.MISSING,
            }
        )
    return rows


def rec_workload(rec: Any) -> str | None:
    return getattr(rec, "workload", None) if not isinstance(rec, Mapping) else rec.get("workload")


def print_recommendations(
    recs: Sequence[Any], *, out: IO[str] | None = None, width: int | None = None, title: str | None = None
) -> None:
    width = width or output.terminal_width(out)
    rows = recommendation_rows(recs)
    columns = RECOMMENDATION_COLUMNS
    if any(row.get("status") not in (None, "open") for row in rows):  # a decision: its status is always shown
        columns = tuple(replace(c, hide_below=0) if c.key == "status" else c for c in columns)
    hidden = [c for c in columns if c not in output.shown_columns(columns, width)]
    caption = HIDDEN_ID_CAPTION if any(c.key == "id" for c in hidden) else None
    output.print_table(rows, columns, out=out, width=width, title=title, caption=caption)


SOURCE_COLUMNS = (
    Col("source", "Source", TEXT, no_wrap=True),
    Col("type", "Type", TEXT, no_wrap=True, hide_below=110),
    Col("schedule", "Schedule", TEXT, no_wrap=True, hide_below=150),
    Col("last_run", "Last run", TIME),
    Col("status", "Status", TEXT, no_wrap=True),
    Col("data", "Data", WRAP),
    Col("watermark", "Watermark", WRAP, hide_below=130),
)

RUN_COLUMNS = (
    Col("source", "Source", TEXT, no_wrap=True),
    Col("status", "Status", TEXT, no_wrap=True),
    Col("rows", "Rows", INT),
    Col("seconds", "Time", TEXT, no_wrap=True),
    Col("watermark", "Watermark", WRAP),
)


def run_rows(results: Iterable[Any], seconds: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Ingest results (``ingest.core.runner.RunResult``) as rows: one line per source."""
    seconds = seconds or {}
    return [
        {
            "source": r.source,
            "status": r.status,
            "rows": r.rows,
            "seconds": f"{seconds[r.source]:.1f} s" if r.source in seconds else cells.MISSING,
            "watermark": r.watermark if r.ok else "failed: see the error below",
        }
        for r in results
    ]


def print_sources(rows: list[dict[str, Any]], *, out: IO[str] | None = None, width: int | None = None) -> None:
    output.print_table(rows, SOURCE_COLUMNS, out=out, width=width)


def print_runs(
    results: Iterable[Any],
    seconds: Mapping[str, float] | None = None,
    *,
    out: IO[str] | None = None,
    width: int | None = None,
    brief: bool = False,
) -> None:
    """One line per source; ``brief``: name, status and rows only (output that must not change between runs)."""
    columns = RUN_COLUMNS[:3] if brief else [c for c in RUN_COLUMNS if seconds is not None or c.key != "seconds"]
    output.print_table(run_rows(results, seconds), columns, out=out, width=width)


WITHHELD_COLUMNS = (
    Col("kind", "Kind", TEXT),  # (wraps a long label, "Checkpoint lifecycle", before an id is elided)
    Col("team", "Team", TEXT, no_wrap=True),
    Col("resource_id", "Resource", ID),
    Col("reason", "Reason", TEXT, no_wrap=True),
    Col("detail", "Why", WRAP),
    Col("source_hint", "What would provide it", WRAP, hide_below=110),
)


def print_withheld(withheld: Iterable[Any], *, out: IO[str] | None = None, width: int | None = None) -> None:
    """Each withheld finding: the model, the resource, the reason, the numbers, and the source to add."""
    rows = [
        {
            "kind": labels.label(w.kind, "kind"),
            "team": labels.team_label(w.team),
            "resource_id": w.resource_id or cells.MISSING,
            "reason": labels.label(w.reason, "reason"),
            "detail": w.detail,
            "source_hint": w.source_hint,
        }
        for w in withheld
    ]
    output.print_table(rows, WITHHELD_COLUMNS, out=out, width=width)
