"""How one value reads in a command's table: the column specs (:class:`Col` and its kinds) and the
value formats (money ``$4,548.50``, numbers, times, a dash for an unknown value, ids that lose their
middle). jobs/output.py lays the cells out in tables that fit the terminal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

MISSING = "-"  # an unknown value, everywhere
ELLIPSIS = "…"
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹"}

# column kinds
TEXT, WRAP, ID, MONEY, INT, NUMBER, PCT, RATIO, TIME = (
    "text",
    "wrap",
    "id",
    "money",
    "int",
    "number",
    "pct",
    "ratio",
    "time",
)
RIGHT_ALIGNED = {MONEY, INT, NUMBER, PCT, RATIO}


@dataclass(frozen=True)
class Col:
    """One column: the row key it shows, its header, how its values read (a kind above)."""

    key: str
    header: str | None = None
    kind: str = TEXT
    min_width: int | None = None
    max_width: int | None = None
    currency: str = "USD"
    no_wrap: bool = False  # never wrapped nor cut (an id a reader copies)
    hide_below: int = 0  # left out of tables narrower than this (the caption says where it is)

    @property
    def title(self) -> str:
        return self.header if self.header is not None else self.key.replace("_", " ")


# --- values -----------------------------------------------------------------------------------------


def money(value: Decimal | float | int | str | None, currency: str = "USD", places: int = 2) -> str:
    """``$4,548.50``, ``-$12.00``, ``1,200.00 CHF``; an unknown amount is a dash."""
    if value is None or value == "":
        return MISSING
    amount = Decimal(str(value))
    if not amount.is_finite():
        return MISSING
    text = f"{abs(amount):,.{places}f}"
    sign = "-" if amount < 0 and text.strip("0.,") else ""
    symbol = CURRENCY_SYMBOLS.get(currency.upper())
    return f"{sign}{symbol}{text}" if symbol else f"{sign}{text} {currency.upper()}"


def number(value: Any, places: int | None = None) -> str:
    """Thousands separators; floats to ``places`` (default: up to 2, trailing zeros dropped)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Decimal):
        if not value.is_finite():
            return MISSING
        exact = value.normalize()
        exponent = exact.as_tuple().exponent
        shown = max(0, -exponent) if isinstance(exponent, int) else 0
        return f"{value:,.{shown if places is None else places}f}"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return MISSING
        if places is not None:
            return f"{value:,.{places}f}"
        return f"{value:,.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
    return str(value)


def when(value: datetime | date | str | None) -> str:
    """A time in UTC to the minute (``2026-12-01 09:39 UTC``); a date as a date."""
    if value is None:
        return MISSING
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.strftime("%Y-%m-%d %H:%M")
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def cell_text(value: Any, col: Col) -> str:
    """A value as the column's kind reads it."""
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if col.kind == MONEY:
        return money(value, col.currency)
    if col.kind == INT:
        return number(int(value))
    if col.kind == NUMBER:
        return number(value)
    if col.kind == RATIO:  # 0.95 -> 95%
        return f"{float(value):.0%}"
    if col.kind == PCT:  # 87.1 (already percent) -> 87.1%
        return f"{float(value):.1f}%"
    if col.kind == TIME or isinstance(value, (datetime, date)):
        return when(value)
    if isinstance(value, Decimal):
        return number(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    if isinstance(value, float):
        return number(value)
    return str(value)


def elide_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by an ellipsis. The end keeps two thirds
    of the room, and a path's last segment (an instance's name, an object's key) stays whole when
    it fits: ``//compute.goo…/instances/research-a2-sweep``."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = width - 1 - (width - 1) // 3
    last_segment = len(text) - text.rstrip("/").rfind("/")
    if "/" in text and tail < last_segment:  # the name first: the head shrinks to two characters
        tail = min(last_segment, width - 3)
    head = width - 1 - tail
    return text[:head] + ELLIPSIS + text[len(text) - tail :]


class MiddleElided:
    """A rich renderable that shrinks by eliding its middle (ids, paths, ARNs)."""

    MIN_WIDTH = 20  # an AWS instance id (19) stays whole

    def __init__(self, text: str, style: str = "") -> None:
        self.text, self.style = text, style

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        room = options.max_width
        return Measurement(min(len(self.text), self.MIN_WIDTH, room), min(len(self.text), room))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(elide_middle(self.text, options.max_width), style=self.style, no_wrap=True, overflow="crop")


# --- tables -----------------------------------------------------------------------------------------
