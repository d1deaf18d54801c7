"""The ``budget_enforcement`` alert rule: warn before a budget's cap or hold bites.

For each budget with ``enforce = "cap" | "hold" | "drain"``: at the current burn (the scope's spend per
hour over its newest complete day) the money left runs out at some hour; from then on the team's quota is
what its running work holds (``cap``, ``hold``: nothing new is admitted; ``hold`` also sets Kueue's
``stopPolicy: Hold``) or zero (``drain``: ``HoldAndDrain``). When that hour is within
``[alerts] enforce_warn_hours`` of now — or has passed — one alert opens for the budget's period, naming
the team(s), the budget, the date the money runs out and what the quota becomes. The ledger announces an
alert once per period (warehouse/alerts_store.py), however many runs see it.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import duckdb

from gpufinops.models.alert_records import Alert, AlertSettings, RuleOutcome
from gpufinops.models.budget_quota import STOP_POLICIES
from gpufinops.models.budget_spend import budget_spend, hours_left, runs_out_at
from gpufinops.models.budgets import Budget
from gpufinops.warehouse.queries import enforcement as eq


def _usd(value: Decimal) -> str:
    return f"${value.quantize(Decimal('0.01')):,.2f}"


def enforcement_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime) -> RuleOutcome:
    outcome = RuleOutcome("budget_enforcement", ("budget_enforcement",))
    enforced = [b for b in settings.budgets if b.enforce != "warn" and b.scope.teams]
    if not enforced:
        outcome.live = lambda rule, scope, period: False
        return outcome
    edge = outcome.data_edge(con, now, "budget_enforcement: no cost data yet")
    if edge is None:
        return outcome
    usage = eq.flavor_usage(con).to_dicts()
    current: dict[str, str] = {}
    for budget in enforced:
        current[budget.name] = _evaluate(con, budget, settings, now, edge, usage, outcome)
    outcome.live = lambda rule, scope, period: current.get(scope) == period
    return outcome


def _becomes(budget: Budget, usage: list[dict]) -> str:
    running = sum(int(r["running_gpus"]) for r in usage if r["team"] in budget.scope.teams)
    if budget.enforce == "drain":
        return f"0 GPUs and stopPolicy HoldAndDrain (the {running} GPU(s) running now are evicted)"
    text = f"{running} GPU(s), what running work holds now: nothing new is admitted"
    if budget.enforce in STOP_POLICIES:
        text += f", and stopPolicy {STOP_POLICIES[budget.enforce]}"
    return text


def _evaluate(con, budget, settings, now, edge, usage, outcome) -> str:
    spent, _per_team, burn = budget_spend(con, budget, edge)
    _hours, label, end_at = hours_left(edge, budget.period)
    remaining = budget.amount - spent
    out_at = runs_out_at(edge, remaining, burn)
    teams = ", ".join(budget.scope.teams)
    if out_at is None or out_at >= end_at:
        outcome.context[budget.name] = f"{_usd(spent)} of {_usd(budget.amount)} spent in {label}; " + (
            "no burn known" if out_at is None else "the money lasts the period at the current burn"
        )
        return label
    hours_to = (out_at - now).total_seconds() / 3600
    if hours_to > settings.enforce_warn_hours:
        outcome.context[budget.name] = f"the money runs out {out_at:%Y-%m-%d %H:%M} UTC, {hours_to:.0f} h from now"
        return label
    becomes = _becomes(budget, usage)
    when = f"{out_at:%Y-%m-%d %H:%M} UTC"
    passed = hours_to <= 0
    title = (
        f"Budget {budget.name}: {budget.enforce} in effect since {when}"
        if passed
        else f"Budget {budget.name}: {budget.enforce} takes effect in {hours_to:.0f} h ({when})"
    )
    summary = (
        f"Team {teams}: {_usd(spent)} of the {_usd(budget.amount)} {budget.period}ly budget {budget.name} spent in "
        f"{label}; at the current burn of {_usd(burn or Decimal(0))}/h the money runs out on {when}; then the "
        f"quota becomes {becomes}."
    )
    outcome.alerts.append(
        Alert(
            "budget_enforcement",
            budget.name,
            label,
            "enforce",
            "critical" if passed else "warning",
            title=title,
            summary=summary,
            teams=budget.scope.teams,
            value_usd=spent,
            limit_usd=budget.amount,
            details={
                "budget": budget.to_dict(),
                "spent_usd": float(spent),
                "burn_usd_per_hour": None if burn is None else float(burn),
                "runs_out_at": out_at.isoformat(),
                "quota_becomes": becomes,
                "warn_hours": settings.enforce_warn_hours,
                "data_until": edge.isoformat(),
            },
        )
    )
    return label
