"""What the command line prints: tables a person reads at a glance, and CSV / JSON a machine reads.

Tables are drawn with rich and fit the terminal (``$COLUMNS``, else the terminal's size, else
``FALLBACK_WIDTH`` when the output is not a terminal): long ids lose their middle, not their end
(``//compute.googleapis.com/proj…/instances/nlp-llm7b-serve``), long text wraps, money reads
``$4,548.50``, and an unknown value is a dash, never ``None``. Any command builds a table from rows
(dicts) or a polars frame and a list of :class:`Col` specs::

    output.print_table(rows, [Col("resource_id", "Resource", ID), Col("monthly_savings_usd", "Savings/mo", MONEY)])

The machine-readable formats are untouched by all of this: ``csv_text`` is flat columns (nested
values as their JSON text) with no trailing blank line, ``to_json`` plain JSON.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import IO, Any

import polars as pl
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufinops.jobs.cells import ID, INT, NUMBER, RIGHT_ALIGNED, TEXT, TIME, WRAP, Col, MiddleElided, cell_text

FALLBACK_WIDTH = 120  # output to a file or a pipe: wide enough for a recommendation's row


def terminal_width(stream: IO[str] | None = None) -> int:
    """``$COLUMNS``, else the terminal's width, else FALLBACK_WIDTH (a file, a pipe)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns
    except (AttributeError, ValueError, OSError):
        pass
    return FALLBACK_WIDTH


def console(file: IO[str] | None = None, *, stderr: bool = False, width: int | None = None) -> Console:
    """A rich console on ``file`` (default stdout / stderr): colour only on a terminal, no markup."""
    target = file or (sys.stderr if stderr else sys.stdout)
    return Console(
        file=target, width=width or terminal_width(target), highlight=False, markup=False, emoji=False, soft_wrap=False
    )


def _rows(data: pl.DataFrame | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    rows: Iterable[Mapping[str, Any]] = data.to_dicts() if isinstance(data, pl.DataFrame) else data
    return list(rows)


def _cell(value: Any, col: Col) -> Any:
    if isinstance(value, (Text, MiddleElided)):
        return value
    text = cell_text(value, col)
    if col.kind == ID and not col.no_wrap:
        return MiddleElided(text)
    return Text(text, overflow="fold")


def shown_columns(columns: Sequence[Col], width: int) -> list[Col]:
    return [c for c in columns if width >= c.hide_below]


FLEXIBLE_MIN = {ID: MiddleElided.MIN_WIDTH, WRAP: 16, TEXT: 12}
ID_WANTED = 44  # a shrinking table gives an id at most this much: past it, the room goes to text


def _natural_width(cell: Any) -> int:
    if isinstance(cell, MiddleElided):
        return len(cell.text)
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max((len(line) for line in text.splitlines()), default=0)


def _last_segments(cells: list[list[Any]], index: int) -> int:
    """Room for the longest last path segment of a column of ids (an instance's name), plus ``…/``."""
    texts = [row[index].text for row in cells if isinstance(row[index], MiddleElided) and "/" in row[index].text]
    return max((len(t) - t.rstrip("/").rfind("/") + 3 for t in texts), default=0)


def _plan_widths(columns: Sequence[Col], cells: list[list[Any]], header: list[str], width: int) -> list[int | None]:
    """Widths for the columns that may shrink (ids, wrapped text) so the table fits ``width``: each
    gets its minimum, then the room left in proportion to what it would like. Fixed columns (numbers,
    times, ``no_wrap``) keep their natural width; None: let rich decide (the table fits as it is)."""
    natural = [
        min(max([len(h)] + [_natural_width(row[i]) for row in cells]), c.max_width or 10_000)
        for i, (c, h) in enumerate(zip(columns, header))
    ]
    if sum(natural) + 3 * (len(columns) - 1) > width:  # it must shrink: ids want no more than ID_WANTED
        natural = [min(n, ID_WANTED) if c.kind == ID and not c.no_wrap else n for c, n in zip(columns, natural)]
    flexible = [not (c.no_wrap or c.kind in RIGHT_ALIGNED or c.kind == TIME) for c in columns]
    padding = 3 * (len(columns) - 1)  # a space of padding either side of a one-space rule
    room = width - padding - sum(n for n, f in zip(natural, flexible) if not f)
    wanted = sum(n for n, f in zip(natural, flexible) if f)
    if wanted <= room or not any(flexible):
        return [None] * len(columns)
    minimum = [
        min(n, max(len(h), FLEXIBLE_MIN.get(c.kind, 12), _last_segments(cells, i) if c.kind == ID else 0)) if f else n
        for i, (c, n, f, h) in enumerate(zip(columns, natural, flexible, header))
    ]
    over = sum(m for m, f in zip(minimum, flexible) if f) - room

    def base(i: int) -> int:
        return max(len(header[i]), FLEXIBLE_MIN.get(columns[i].kind, 12))

    while over > 0:  # too narrow for every minimum: take from the widest flexible column, down to its base;
        # wrapped text first (it only wraps more), ids last (an elided id loses its name)
        shrinkable = [i for i, f in enumerate(flexible) if f and minimum[i] > base(i)]
        if not shrinkable:
            break
        widest = max(shrinkable, key=lambda i: (columns[i].kind != ID, minimum[i]))
        minimum[widest] -= 1
        over -= 1
    spare = max(0, room - sum(m for m, f in zip(minimum, flexible) if f))
    extra = [n - m if f else 0 for n, m, f in zip(natural, minimum, flexible)]
    given = [0] * len(columns)
    waiting = sorted((i for i, f in enumerate(flexible) if f and extra[i] > 0), key=lambda i: extra[i])
    while waiting and spare > 0:  # the room left, shared evenly: a column that wants little (a label) gets it all
        share = max(1, spare // len(waiting))
        i = waiting[0]
        if extra[i] - given[i] <= share:
            spare -= extra[i] - given[i]
            given[i] = extra[i]
            waiting.pop(0)
        else:  # every column left wants more than an even share: give each its share
            for j in waiting:
                step = min(share, spare)
                given[j] += step
                spare -= step
            break
    return [m + g if f else None for m, g, f in zip(minimum, given, flexible)]


def build_table(
    data: pl.DataFrame | Iterable[Mapping[str, Any]],
    columns: Sequence[Col],
    *,
    title: str | None = None,
    caption: str | None = None,
    width: int | None = None,
) -> Table:
    """A rich Table of ``data``'s rows in ``columns`` (a row may hold a ready rich Text), fitting
    ``width``: columns with ``hide_below`` above it are left out, ids and text shrink."""
    table = Table(
        box=box.SIMPLE_HEAD,
        title=title,
        caption=caption,
        title_justify="left",
        show_edge=False,
        caption_justify="left",
        pad_edge=False,
        expand=False,
        header_style="bold",
    )
    columns = shown_columns(columns, width) if width else list(columns)
    cells = [[_cell(row.get(col.key), col) for col in columns] for row in _rows(data)]
    planned = _plan_widths(columns, cells, [c.title for c in columns], width) if width else [None] * len(columns)
    for col, planned_width in zip(columns, planned):
        table.add_column(
            col.title,
            justify="right" if col.kind in RIGHT_ALIGNED else "left",
            no_wrap=col.no_wrap or col.kind in RIGHT_ALIGNED or col.kind == TIME,
            min_width=col.min_width,
            max_width=col.max_width,
            width=planned_width,
            overflow="fold",
        )
    for row in cells:
        table.add_row(*row)
    return table


def print_table(
    data: pl.DataFrame | Iterable[Mapping[str, Any]],
    columns: Sequence[Col],
    *,
    out: IO[str] | None = None,
    title: str | None = None,
    caption: str | None = None,
    width: int | None = None,
) -> None:
    target = console(out, width=width)
    rows = list(_rows(data))
    shown = shown_columns(columns, target.width)
    cells = [[_cell(row.get(col.key), col) for col in shown] for row in rows]
    if shown and cells and _narrowest(shown, cells) > target.width:  # a table would cut words: one block a row
        if title:
            target.file.write(f"{title}\n")
        plain = [[_plain(c) for c in row] for row in cells]
        for block in records(shown, plain, target.width):
            emit(target, block)
        if caption:
            target.file.write(f"{caption}\n")
        return
    emit(target, build_table(rows, columns, title=title, caption=caption, width=target.width))


def records(columns: Sequence[Col], cells: list[list[str]], width: int) -> list[Any]:
    """One block per row: a rule naming the row, then ``column  value`` lines (values wrap, whole)."""
    key_width = min(max(len(c.title) for c in columns), max(8, width // 3))
    blocks: list[Any] = []
    for n, row in enumerate(cells, 1):
        grid = Table.grid(padding=(0, 2))
        grid.add_column(width=key_width, no_wrap=False, overflow="fold", style="bold")
        grid.add_column(overflow="fold")
        for col, value in zip(columns, row):
            grid.add_row(Text(col.title, overflow="fold"), Text(value, overflow="fold"))
        heading = f"── row {n} of {len(cells)} "
        blocks.append(Text(heading + "─" * max(0, min(width, 60) - len(heading))))
        blocks.append(grid)
    return blocks


BREAKABLE_WORD = 20  # a longer "word" is a path or URL (s3://bucket/prefix/): it may fold inside a cell


def _narrowest(columns: Sequence[Col], cells: list[list[Any]]) -> int:
    """The narrowest the table can be with whole headers, whole numbers, ids elided and text wrapped
    between words only (a path or URL longer than BREAKABLE_WORD may fold)."""
    need = 3 * (len(columns) - 1)
    for i, col in enumerate(columns):
        natural = max([len(col.title)] + [_natural_width(row[i]) for row in cells])
        if col.no_wrap or col.kind in RIGHT_ALIGNED or col.kind == TIME:
            need += natural
        elif col.kind == ID:
            need += min(natural, max(len(col.title), FLEXIBLE_MIN[ID]))
        else:
            words = max(len(w) for row in cells for w in [*_plain(row[i]).split(), ""])
            need += min(natural, max(len(col.title), min(words, BREAKABLE_WORD)))
    return need


def _plain(cell: Any) -> str:
    return cell.text if isinstance(cell, MiddleElided) else cell.plain if isinstance(cell, Text) else str(cell)


def emit(target: Console, renderable: Any) -> None:
    """Print ``renderable`` without the padding rich leaves at the end of every line."""
    with target.capture() as captured:
        target.print(renderable)
    target.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def table_text(
    data: pl.DataFrame | Iterable[Mapping[str, Any]],
    columns: Sequence[Col],
    *,
    width: int,
    title: str | None = None,
    caption: str | None = None,
) -> str:
    """The table as plain text at ``width`` columns (for files, mails and tests)."""
    buffer = io.StringIO()
    print_table(data, columns, out=buffer, title=title, caption=caption, width=width)
    return buffer.getvalue()


def frame_columns(frame: pl.DataFrame) -> list[Col]:
    """Column specs for an arbitrary frame (``gpufinops sql``): numbers right-aligned and grouped,
    times to the minute, everything else wrapped."""
    cols = []
    for name, dtype in frame.schema.items():
        if dtype.is_integer():
            kind = INT
        elif dtype.is_numeric():
            kind = NUMBER
        elif dtype.is_temporal():
            kind = TIME
        else:
            kind = TEXT
        cols.append(Col(name, name, kind))
    return cols


def table(frame: pl.DataFrame, width: int | None = None) -> str:
    """Any frame as a table fitting ``width`` (default: the terminal's)."""
    return table_text(frame, frame_columns(frame), width=width or terminal_width())


# --- machine-readable -------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):  # a BLOB column: its bytes as hex, as DuckDB's hex() writes
        return bytes(value).hex().upper()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, default=_json_default, indent=2)


def csv_text(frame: pl.DataFrame) -> str:
    """Flat CSV: one header line, one line per row, nested values as their JSON text, binary ones as hex (what
    DuckDB's ``hex()`` writes: CSV holds text)."""
    out = io.StringIO()
    flat = frame.with_columns(
        [
            pl.col(c).map_elements(
                lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str), return_dtype=pl.Utf8
            )
            for c, t in frame.schema.items()
            if t.is_nested()
        ]
        + [pl.col(c).bin.encode("hex").str.to_uppercase() for c, t in frame.schema.items() if t == pl.Binary]
    )
    flat.write_csv(out)
    return out.getvalue()


def render(frame: pl.DataFrame, fmt: str) -> str:
    """``frame`` as ``json`` / ``csv`` / a ``table``. CSV ends with its last row's newline: write it
    with ``write``, not ``print`` (no blank line after it)."""
    if fmt == "json":
        return to_json(frame.to_dicts())
    if fmt == "csv":
        return csv_text(frame)
    return table(frame)


def write(text: str, out: IO[str] | None = None) -> None:
    """``text`` with exactly one trailing newline."""
    (out or sys.stdout).write(text if text.endswith("\n") else text + "\n")


def delivery_lines(outcomes: Iterable[tuple[Iterable[str], str]], out: IO[str]) -> None:
    """One line per delivery (a recipient, a notification), outcome by outcome: each outcome's ``template``
    with the delivery's label at its ``{}`` (``"  sent     {}"``, ``"{:<40} failed (…)"``)."""
    for labels, template in outcomes:
        for label in labels:
            print(template.format(label), file=out)
