"""What every MCP tool shares (interfaces/mcp_tools.py and interfaces/mcp_reads.py): the refusal, the
registry entry, plain JSON, the caller's teams, day and window arguments, row limits."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from gpufinops.warehouse.scope import Scope

MAX_ROWS = 500  # the most rows any tool returns: an assistant's context is not a data export


class ToolRefused(ValueError):
    """A call the caller may not make or whose arguments are wrong: one sentence, shown to the caller."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    fn: Callable[..., dict[str, Any]]
    costs: bool  # reads spend (or alerts, budgets): refused to a scheduler token
    description: str


def plain(value: Any) -> Any:
    """JSON-safe: Decimal and float as numbers (NaN and ±inf as null), times ISO-8601 UTC."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    return value


def teams_for(scope: Scope, team: str | None) -> list[str] | None:
    """The team filter of a call: an explicit team outside the caller's scope is refused."""
    if team is not None:
        if not scope.allows(team):
            raise ToolRefused(f"team: this token may not see team {team!r}")
        return [team]
    return scope.team_filter


def day(text: str | None, name: str) -> date | None:
    if text is None or text == "":
        return None
    try:
        parsed = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        parsed = None
    if parsed is None or not date(1970, 1, 1) <= parsed <= date(2199, 12, 31):
        raise ToolRefused(f"{name}: not a date between 1970-01-01 and 2199-12-31: {text[:40]!r} (expected YYYY-MM-DD)")
    return parsed


def days(start: str | None, end: str | None) -> tuple[date | None, date | None]:
    """``start``/``end`` as days (an ``end`` before ``start`` refused)."""
    first, last = day(start, "start"), day(end, "end")
    if first and last and last < first:
        raise ToolRefused(f"end: {last} is before start {first}")
    return first, last


def window(start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    """``start``/``end`` as inclusive days → [begin, stop) UTC bounds."""
    first, last = days(start, end)
    begin = datetime.combine(first, time(), UTC) if first else None
    stop = datetime.combine(last + timedelta(days=1), time(), UTC) if last else None
    return begin, stop


def limited(rows: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    if not 1 <= limit <= MAX_ROWS:
        raise ToolRefused(f"limit: must be between 1 and {MAX_ROWS}, not {limit}")
    return {"rows": rows[:limit], "total_rows": len(rows), "truncated": len(rows) > limit}


def one_of(value: str | None, known: tuple[str, ...] | list[str], name: str) -> None:
    if value is not None and value not in known:
        raise ToolRefused(f"{name}: unknown {name} {value!r} (known: {', '.join(known)})")
