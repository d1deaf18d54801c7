"""Budgets: what a ``[[budgets]]`` entry says (validated by jobs/alerts/settings.py), as plain data.

A budget is an amount of money for a calendar period (a UTC month or quarter) over a scope of the
cost lines: every line, or the lines of some teams, providers, GPU models and/or tags (several
filters narrow it: a line must match each). ``thresholds`` are shares of the amount that raise an
alert when spend reaches them; with ``forecast`` the period-end forecast reaching one raises an
alert first. The dashboard's ``monthly_budget_usd`` / ``team_budgets`` keys are budgets too
(:func:`from_dashboard`), so the dashboard compares spend with the same numbers the alerts use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from gpufinops.models.recommendation import provider_code

PERIODS = ("month", "quarter")
DEFAULT_THRESHOLDS = (0.5, 0.75, 0.9, 1.0)


@dataclass(frozen=True)
class BudgetScope:
    teams: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()  # provider codes: aws | gcp | onprem | …
    gpu_models: tuple[str, ...] = ()
    tags: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, allowed values), every key must match

    @property
    def everything(self) -> bool:
        return not (self.teams or self.providers or self.gpu_models or self.tags)

    @property
    def needs_line_items(self) -> bool:
        """Tags are only on the line items; every other filter is answered by the daily rollup."""
        return bool(self.tags)

    def matches_provider(self, provider_name: str | None) -> bool:
        return not self.providers or provider_code(provider_name) in self.providers

    def describe(self) -> str:
        parts = []
        for label, values in (("team", self.teams), ("provider", self.providers), ("GPU", self.gpu_models)):
            if values:
                parts.append(f"{label} {', '.join(values)}")
        parts += [f"tag {key}={'|'.join(values)}" for key, values in self.tags]
        return "; ".join(parts) or "every team"

    def to_dict(self) -> dict[str, Any] | str:
        """The scope as JSON: its dimensions, or ``"all"`` when it limits nothing."""
        out: dict[str, Any] = {}
        for key in ("teams", "providers", "gpu_models"):
            if getattr(self, key):
                out[key] = list(getattr(self, key))
        if self.tags:
            out["tags"] = {key: list(values) for key, values in self.tags}
        return out or "all"


@dataclass(frozen=True)
class Budget:
    name: str
    amount: Decimal
    period: str = "month"
    scope: BudgetScope = field(default_factory=BudgetScope)
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    forecast: bool = False
    origin: str = "budgets"  # the config key it came from (an alias says so)
    enforce: str = "warn"  # warn | cap | hold | drain (models/budget_quota.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "amount": str(self.amount),
            "period": self.period,
            "scope": self.scope.to_dict(),
            "thresholds": list(self.thresholds),
            "forecast": self.forecast,
            "origin": self.origin,
            "enforce": self.enforce,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        given = data.get("scope") or "all"
        scope: dict[str, Any] = {}
        if isinstance(given, dict):
            scope = given
        elif given != "all":
            raise ValueError(f'budget {data.get("name")!r}: scope must be "all" or a table (got {given!r})')
        return cls(
            name=str(data["name"]),
            amount=Decimal(str(data["amount"])),
            period=data.get("period", "month"),
            scope=BudgetScope(
                tuple(scope.get("teams", ())),
                tuple(scope.get("providers", ())),
                tuple(scope.get("gpu_models", ())),
                tuple((k, tuple(v)) for k, v in (scope.get("tags") or {}).items()),
            ),
            thresholds=tuple(float(t) for t in data.get("thresholds", DEFAULT_THRESHOLDS)),
            forecast=bool(data.get("forecast", False)),
            origin=data.get("origin", "budgets"),
            enforce=data.get("enforce", "warn"),
        )


def from_dashboard(section: dict[str, Any]) -> list[Budget]:
    """``[dashboard] monthly_budget_usd`` and ``team_budgets`` as the budgets they stand for."""
    out = []
    if section.get("monthly_budget_usd") is not None:
        out.append(
            Budget("monthly", Decimal(str(section["monthly_budget_usd"])), origin="dashboard.monthly_budget_usd")
        )
    for team, amount in sorted((section.get("team_budgets") or {}).items()):
        out.append(
            Budget(
                f"team:{team}",
                Decimal(str(amount)),
                scope=BudgetScope(teams=(team,)),
                origin=f"dashboard.team_budgets.{team}",
            )
        )
    return out


def period_bounds(day: date | datetime, period: str) -> tuple[date, date, str]:
    """[start, end) of the UTC calendar month or quarter holding ``day``, and its label (2026-10, 2026-Q4)."""
    if isinstance(day, datetime):
        day = (day.astimezone(UTC) if day.tzinfo else day).date()
    if period == "month":
        start = day.replace(day=1)
        end = date(start.year + start.month // 12, start.month % 12 + 1, 1)
        return start, end, f"{start:%Y-%m}"
    if period == "quarter":
        first_month = 3 * ((day.month - 1) // 3) + 1
        start = date(day.year, first_month, 1)
        end = date(day.year + (first_month + 3 > 12), (first_month + 2) % 12 + 1, 1)
        return start, end, f"{day.year}-Q{(first_month - 1) // 3 + 1}"
    raise ValueError(f"unknown budget period {period!r} (known: {', '.join(PERIODS)})")


def monthly_budget_for(budgets: list[Budget] | tuple[Budget, ...], teams: list[str] | None) -> Decimal | None:
    """The monthly budget of what a viewer sees, for the dashboard's "under / over budget": with every
    team in view, the budget over every cost line (else the sum of the single-team budgets); for some
    teams, the sum of the monthly budgets whose scope is only teams, all of them in view."""
    monthly = [b for b in budgets if b.period == "month"]
    if teams is None:
        whole = [b.amount for b in monthly if b.scope.everything]
        if whole:
            return whole[0]
        per_team = [b.amount for b in monthly if _teams_only(b) and len(b.scope.teams) == 1]
        return sum(per_team, Decimal(0)) if per_team else None
    found = [b.amount for b in monthly if _teams_only(b) and set(b.scope.teams) <= set(teams)]
    return sum(found, Decimal(0)) if found else None


def _teams_only(budget: Budget) -> bool:
    s = budget.scope
    return bool(s.teams) and not (s.providers or s.gpu_models or s.tags)
