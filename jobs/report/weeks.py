"""ISO weeks (``YYYY-Www``) and their bounds in the report's time zone.

A report week runs Monday 00:00 to the next Monday 00:00 in ``[report].timezone``; the bounds are
aware datetimes, so the warehouse (UTC) is filtered on the right instants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


@dataclass(frozen=True, order=True)
class Week:
    year: int
    number: int

    def __str__(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    @property
    def monday(self) -> date:
        return date.fromisocalendar(self.year, self.number, 1)

    def start(self, tz: tzinfo) -> datetime:
        return datetime.combine(self.monday, time(0), tzinfo=tz)

    def end(self, tz: tzinfo) -> datetime:
        """The next Monday 00:00 (exclusive)."""
        return datetime.combine(self.monday + timedelta(days=7), time(0), tzinfo=tz)

    def shift(self, weeks: int) -> Week:
        return week_of(self.monday + timedelta(weeks=weeks))

    @property
    def days(self) -> list[date]:
        return [self.monday + timedelta(days=i) for i in range(7)]


def week_of(day: date) -> Week:
    iso = day.isocalendar()
    return Week(iso.year, iso.week)


def parse_week(text: str) -> Week:
    """'2026-W44' → Week; ValueError naming the expected form otherwise."""
    match = _WEEK.match(text.strip())
    if not match:
        raise ValueError(f"not an ISO week: {text!r} (expected YYYY-Www, e.g. 2026-W44)")
    year, number = int(match.group(1)), int(match.group(2))
    try:
        date.fromisocalendar(year, number, 1)
    except ValueError:
        raise ValueError(f"not an ISO week: {text!r} ({year} has no week {number})") from None
    return Week(year, number)


def previous_week(now: datetime, tz: tzinfo) -> Week:
    """The last complete week before ``now`` (what Monday's report covers)."""
    return week_of(now.astimezone(tz).date()).shift(-1)


def latest_complete_week(
    now: datetime, data_end: datetime | None, tz: tzinfo, data_start: datetime | None = None
) -> Week:
    """The previous week, or the last week the data fully covers when the data ends earlier (a demo
    warehouse, or billing that stopped arriving): a report on an empty week helps no one. Where the data
    (from ``data_start``) covers no week whole, the week that holds most of it; the report then says how far
    its data reaches."""
    week = previous_week(now, tz)
    if data_end is None:
        return week
    while week.end(tz) > data_end and week.start(tz) > data_end - timedelta(days=365):
        week = week.shift(-1)
    if data_start is None or week.start(tz) >= data_start:
        return week
    newest = week.shift(1)
    return newest if _held(newest, data_start, data_end, tz) > _held(week, data_start, data_end, tz) else week


def _held(week: Week, start: datetime, end: datetime, tz: tzinfo) -> timedelta:
    """How much of ``week`` the data from ``start`` to ``end`` covers."""
    return max(min(end, week.end(tz)) - max(start, week.start(tz)), timedelta(0))
