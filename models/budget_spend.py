"""An enforced budget's figures as of the cost data's edge: the spend in its period (the budget alert's
sum, per team), the burn per hour over the newest complete day of its scope, and the hours left to the
period's end. Shared by the quota inputs (jobs/enforce/inputs.py) and the enforcement alert rule."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import polars as pl

from gpufinops.models import outlook
from gpufinops.models.budgets import Budget, period_bounds

CENT = Decimal("0.01")
HOUR = Decimal(3600)


def budget_spend(con, budget: Budget, edge: datetime) -> tuple[Decimal, dict[str, Decimal], Decimal | None]:
    """The budget's spend in the period holding the data's edge, per team, and the burn per hour over the
    newest complete day of its scope (None: no such day)."""
    start, end, _label = period_bounds(edge - timedelta(microseconds=1), budget.period)
    series = outlook.scope_series(con, budget.scope, edge=edge)
    in_period = series.filter((pl.col("day") >= start) & (pl.col("day") < end))
    per_team: dict[str, Decimal] = defaultdict(Decimal)
    for row in in_period.iter_rows(named=True):
        per_team[row["team"] or ""] += Decimal(str(row["cost"]))
    spent = sum(per_team.values(), Decimal(0)).quantize(CENT)
    last_day = (edge - timedelta(microseconds=1)).astimezone(UTC).date()
    if edge.astimezone(UTC).time() != datetime.min.time():
        last_day -= timedelta(days=1)  # the edge's own day is partial
    day = series.filter(pl.col("day") == last_day)
    burn = Decimal(str(day["cost"].sum())) / 24 if not day.is_empty() else None  # exact: rounded where shown
    return spent, dict(per_team), burn


def hours_left(edge: datetime, period: str) -> tuple[Decimal, str, datetime]:
    """Hours from the data's edge to the period's end (the spend is known to the edge), the period's label
    and its end."""
    _start, end, label = period_bounds(edge - timedelta(microseconds=1), period)
    end_at = datetime(end.year, end.month, end.day, tzinfo=UTC)
    seconds = Decimal(str(max((end_at - edge).total_seconds(), 0)))
    return (seconds / HOUR).quantize(CENT), label, end_at


def runs_out_at(edge: datetime, remaining: Decimal, burn: Decimal | None) -> datetime | None:
    """When the money left runs out at the current burn (the edge itself when it is gone; None: no burn)."""
    if remaining <= 0:
        return edge
    if burn is None or burn <= 0:
        return None
    at = edge + timedelta(hours=float(remaining / burn))
    return (at + timedelta(seconds=30)).replace(second=0, microsecond=0)  # to the minute
