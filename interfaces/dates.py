"""Dates on the command line (``--from``, ``--to``, ``--since``, ``--until``, ``--now``): a date or
date-time, UTC unless it carries an offset, within the window the API accepts too (1970-01-01 …
2199-12-31); anything else is a usage error (exit 2) naming the value, never an OverflowError."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

FIRST_DATE, LAST_DATE = datetime(1970, 1, 1, tzinfo=UTC), datetime(2199, 12, 31, tzinfo=UTC)  # as the API's


def parse(text: str) -> datetime:
    """A date or date-time on the command line, within FIRST_DATE … LAST_DATE; without an offset it is UTC."""
    try:
        value = datetime.fromisoformat(text)
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (expected YYYY-MM-DD)") from None
    except OverflowError:  # an offset that takes year 1 or 9999 out of the calendar
        value = FIRST_DATE - timedelta(days=1)
    if not FIRST_DATE <= value <= LAST_DATE + timedelta(days=1):
        raise argparse.ArgumentTypeError(
            f"{text}: outside the supported dates {FIRST_DATE:%Y-%m-%d} … {LAST_DATE:%Y-%m-%d}"
        ) from None
    return value
