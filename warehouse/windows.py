"""The one window model every surface uses (CLI, API, MCP, dashboard, report).

A window is ``[start, end)`` in UTC, always on UTC day boundaries: a calendar month ``2026-10`` is
2026-10-01 00:00 … 2026-11-01 00:00 UTC on every surface, ``--from D --to D`` is the whole of both days
(``to`` inclusive), and "the last N days" says so in its label and ends with the newest day the data
holds. A window never starts or ends mid-day: :func:`partial_days` says which of its edge days the data
covers only in part, so a page can label them rather than cut them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

MONTH = re.compile(r"^(\d{4})-(\d{2})$")


class WindowError(ValueError):
    """A window that cannot be built from what was asked: one sentence naming the value."""


@dataclass(frozen=True)
class Window:
    """``[start, end)`` in UTC on day boundaries (None: unbounded on that side) and what to call it."""

    start: datetime | None
    end: datetime | None
    label: str

    @property
    def first_day(self) -> date | None:
        return self.start.date() if self.start is not None else None

    @property
    def last_day(self) -> date | None:
        """The last day inside the window (``end`` is exclusive)."""
        return (self.end - timedelta(days=1)).date() if self.end is not None else None

    def as_dict(self) -> dict[str, str | None]:
        """The window as every surface states it: its label, first and last day (inclusive)."""
        first, last = self.first_day, self.last_day
        return {
            "label": self.label,
            "from": first.isoformat() if first else None,
            "to": last.isoformat() if last else None,
        }


def midnight(day: date | datetime) -> datetime:
    """The UTC midnight that starts ``day`` (a datetime is taken in UTC and truncated to its day)."""
    if isinstance(day, datetime):
        day = (day.astimezone(UTC) if day.tzinfo else day).date()
    return datetime.combine(day, time(), UTC)


def month_of(day: date | datetime) -> Window:
    """The calendar month (UTC) ``day`` falls in."""
    start = midnight(day).replace(day=1)
    end = (start + timedelta(days=32)).replace(day=1)
    return Window(start, end, f"{start:%B %Y}")


def month(text: str) -> Window:
    """``YYYY-MM`` → that calendar month in UTC."""
    found = MONTH.match(text.strip()) if isinstance(text, str) else None
    if found is None or not 1 <= int(found.group(2)) <= 12 or not 1970 <= int(found.group(1)) <= 2199:
        raise WindowError(f"month: not a month between 1970-01 and 2199-12: {str(text)[:40]!r} (expected YYYY-MM)")
    return month_of(date(int(found.group(1)), int(found.group(2)), 1))


def days(first: date | datetime | None, last: date | datetime | None) -> Window:
    """From the start of ``first`` to the end of ``last`` (both whole UTC days; either may be open)."""
    if first is not None and last is not None and midnight(last) < midnight(first):
        raise WindowError(f"to: {midnight(last):%Y-%m-%d} is before from {midnight(first):%Y-%m-%d}")
    start = midnight(first) if first is not None else None
    end = midnight(last) + timedelta(days=1) if last is not None else None
    if start is not None and end is not None:
        label = f"{start:%Y-%m-%d} – {end - timedelta(days=1):%Y-%m-%d}"
    elif start is not None:
        label = f"from {start:%Y-%m-%d}"
    elif end is not None:
        label = f"up to {end - timedelta(days=1):%Y-%m-%d}"
    else:
        label = "all data"
    return Window(start, end, label)


def last_days(newest: date | datetime, n: int) -> Window:
    """The last ``n`` whole UTC days ending with ``newest``'s day, labelled so."""
    end = midnight(newest) + timedelta(days=1)
    start = end - timedelta(days=n)
    return Window(start, end, f"last {n} days ({start:%Y-%m-%d} – {end - timedelta(days=1):%Y-%m-%d})")


def pick(
    month_text: str | None = None, first: date | datetime | None = None, last: date | datetime | None = None
) -> Window:
    """The window a command or request asked for: ``month`` or ``from``/``to``, never both."""
    if month_text is not None and (first is not None or last is not None):
        raise WindowError("month: give a month or from/to, not both")
    return month(month_text) if month_text is not None else days(first, last)


def partial_days(window: Window, first_hour: datetime | None, last_hour: datetime | None) -> list[str]:
    """The edge days of ``window`` the data covers only in part (its first hour after the day's
    midnight, its last hour before the day's end), as labels: ``2026-10-01 from 23:00 UTC``."""
    notes = []
    if first_hour is not None and (window.start is None or first_hour > window.start):
        if first_hour != midnight(first_hour):
            notes.append(f"{first_hour:%Y-%m-%d} from {first_hour:%H:%M} UTC")
    if last_hour is not None and (window.end is None or last_hour < window.end):
        end_of_day = midnight(last_hour) + timedelta(days=1)
        if last_hour + timedelta(hours=1) < end_of_day:
            notes.append(f"{last_hour:%Y-%m-%d} to {last_hour + timedelta(hours=1):%H:%M} UTC")
    return notes


def period_label(period: str, first: str | date, window: Window) -> str:
    """A row's period as every surface labels it: ``2026-10`` (a month), a week's Monday or a day, with the
    part of it ``window`` covers where that is not all of it: ``2026-10 (03 – 05 Oct)``."""
    if period == "month":
        whole = month(str(first))
    else:
        day = first if isinstance(first, date) else date.fromisoformat(str(first))
        whole = Window(midnight(day), midnight(day) + timedelta(days=7 if period == "week" else 1), "")
    text = str(first)
    assert whole.start is not None and whole.end is not None  # a period is bounded
    start = max(whole.start, window.start) if window.start is not None else whole.start
    end = min(whole.end, window.end) if window.end is not None else whole.end
    if (start, end) == (whole.start, whole.end):
        return text
    last = end - timedelta(days=1)
    if last.date() == start.date():
        return f"{text} ({start:%d %b} only)"
    return (
        f"{text} ({start:%d} – {last:%d %b})" if start.month == last.month else f"{text} ({start:%d %b} – {last:%d %b})"
    )
