"""Layouts that fit the terminal for frames nobody designed a table for (``gpufinops sql``) and for
the alert list.

A frame is drawn as a table when every column fits whole: numbers and times at their full width,
text wrapped only between words, and every header on one line. When it cannot fit, each row is
drawn as a block of ``column  value`` lines instead, so no number is ever clipped and no id is cut
into pieces across a row. ``--format csv`` / ``json`` never pass through here.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from rich import box
from rich.table import Table
from rich.text import Text

from gpufinops.jobs import cells, output
from gpufinops.jobs.cells import ID, RIGHT_ALIGNED, TEXT, TIME, WRAP, Col
from gpufinops.kernel import labels

PADDING = 3  # a space either side of a one-space rule between columns
WORD_MAX = 40  # a longer word (a URL, a hash) does not make a table: the record layout shows it whole


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _text_cells(frame: pl.DataFrame, columns: Sequence[Col]) -> list[list[str]]:
    return [[cells.cell_text(row.get(c.key), c) for c in columns] for row in frame.to_dicts()]


def table_widths(columns: Sequence[Col], cells: list[list[str]], width: int) -> list[int] | None:
    """Each column's width so the table fits ``width`` with whole numbers, whole headers and text
    wrapped between words only; None when that cannot be done."""
    natural, minimum = [], []
    for i, col in enumerate(columns):
        values = [row[i] for row in cells]
        full = max([len(col.title)] + [len(v) for v in values])
        natural.append(full)
        if col.kind in RIGHT_ALIGNED or col.kind == TIME:
            minimum.append(full)
        else:
            longest = max([len(col.title)] + [_longest_word(v) for v in values])
            if longest > WORD_MAX:
                return None
            minimum.append(min(full, max(longest, 12)))
    room = width - PADDING * (len(columns) - 1)
    if sum(minimum) > room:
        return None
    spare = room - sum(minimum)
    extra = [n - m for n, m in zip(natural, minimum)]
    total_extra = sum(extra)
    if total_extra <= spare:
        return natural
    return [m + spare * e // total_extra for m, e in zip(minimum, extra)]


def _table(columns: Sequence[Col], cells: list[list[str]], widths: list[int]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False, header_style="bold")
    for col, w in zip(columns, widths):
        table.add_column(
            col.title,
            justify="right" if col.kind in RIGHT_ALIGNED else "left",
            width=w,
            no_wrap=col.kind in RIGHT_ALIGNED or col.kind == TIME,
            overflow="fold",
        )
    for row in cells:
        table.add_row(*[Text(v, overflow="fold") for v in row])
    return table


def frame_text(frame: pl.DataFrame, width: int) -> str:
    """Any frame in ``width`` columns: a table when it fits whole, else one block per row."""
    columns = output.frame_columns(frame)
    if not columns:
        return "(no columns)\n"
    cells = _text_cells(frame, columns)
    target = output.console(io.StringIO(), width=width)
    widths = table_widths(columns, cells, width)
    if widths is not None:
        output.emit(target, _table(columns, cells, widths))
    else:
        for block in output.records(columns, cells, width):
            output.emit(target, block)
    text = target.file.getvalue()  # a StringIO
    rows = frame.height
    return text + f"({rows:,} row{'s' if rows != 1 else ''})\n"


# --- the alert list ------------------------------------------------------------------------------------

ALERT_COLUMNS = (
    Col("severity", "Severity", TEXT, no_wrap=True),
    Col("title", "Title", WRAP),
    Col("scope", "Scope", ID),
    Col("period", "Period", TEXT, no_wrap=True),
    Col("threshold", "Threshold", TEXT, no_wrap=True, hide_below=100),
    Col("rule", "Rule", TEXT, no_wrap=True, hide_below=115),
    Col("teams", "Teams", TEXT, no_wrap=True, hide_below=150),
    Col("opened_at", "Opened", TIME, hide_below=135),
    Col("status", "Status", TEXT, no_wrap=True, hide_below=170),
)
TOKEN_MAX = 32  # an id inside a title loses its middle past this, as in the Scope column


def _short_tokens(text: str) -> str:
    return " ".join(cells.elide_middle(w, TOKEN_MAX) if len(w) > TOKEN_MAX else w for w in text.split(" "))


def alert_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        teams = row.get("teams")
        out.append(
            {
                **row,
                "severity": labels.label(row.get("severity"), "severity"),
                "rule": labels.label(row.get("rule"), "rule"),
                "status": labels.label(row.get("status"), "status"),
                "title": _short_tokens(str(row.get("title") or cells.MISSING)),
                "period": labels.period_text(row.get("period")),
                "threshold": labels.threshold_text(row.get("rule"), row.get("threshold")),
                "teams": ", ".join(labels.team_label(t) for t in teams)
                if isinstance(teams, list) and teams
                else labels.NO_TEAM,
            }
        )
    return out


def alerts_text(rows: Sequence[Mapping[str, Any]], width: int) -> str:
    shown = output.shown_columns(ALERT_COLUMNS, width)
    hidden = [c.title.lower() for c in ALERT_COLUMNS if c not in shown]
    caption = f"({len(rows)} alert{'s' if len(rows) != 1 else ''}" + (
        f"; {', '.join(hidden)}: a wider terminal or --format csv / json)" if hidden else ")"
    )
    return output.table_text(alert_rows(rows), ALERT_COLUMNS, width=width, caption=caption)


# --- what a command wrote ------------------------------------------------------------------------------


def size_text(n_bytes: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes:,} bytes"


def wrote(path: Any, detail: str | None = None, *, out: Any = None) -> None:
    """The one line a command prints after writing a file: its path, its size, what it holds."""
    import os
    import sys

    try:
        size = f" ({size_text(os.path.getsize(path))})"
    except OSError:
        size = ""
    print(f"wrote {path}{size}" + (f": {detail}" if detail else ""), file=out or sys.stdout)


def export_detail(fmt: str, text: str) -> str:
    """What an export holds, read back from the text written: objects or documents, and the plan total."""
    import json

    from gpufinops.models import plans

    if fmt == "json":
        objects = json.loads(text)
        n = len(objects)
        return (
            f"{n:,} recommendation object{'s' if n != 1 else ''}, "
            f"{cells.money(plans.total(objects))}/month in primary and step objects"
        )
    chunks = text.split("\n---\n")
    docs = sum(1 for c in chunks if any(line.strip() and not line.lstrip().startswith("#") for line in c.splitlines()))
    total = next(
        (
            line.split(":", 1)[1].split("/month")[0].strip()
            for line in text.splitlines()
            if line.startswith("# plan total:")
        ),
        None,
    )
    noun = "task" if fmt == "skypilot" else "document"
    return f"{docs:,} {noun}{'s' if docs != 1 else ''}" + (f", plan total {total}/month" if total else "")
