"""The read tools of `gpufinops mcp`: what an assistant may ask the warehouse, scoped like the API.

Each tool is ``(con, scope, **arguments) -> JSON object`` over a read-only connection, built on the
queries the HTTP API and the dashboard read (``warehouse.allocation_queries``, ``warehouse.queries``,
``warehouse.recommendation_read``, ``warehouse.alerts_queries``), so an answer here is the figure the API and the
dashboard show. :data:`TOOLS` is the one registry: the server (interfaces/mcp_server.py) serves each entry
through one guard that checks the caller's role before any query runs (a ``scheduler`` token reads
recommendations and plans only, never money spent) and turns every value into plain JSON. A ``lead``
token sees its teams only: a team outside them is refused by name, never answered empty.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from gpufinops.interfaces.mcp_args import (
    MAX_ROWS,
    ToolRefused,
    ToolSpec,
    days,
    limited,
    one_of,
    plain,
    teams_for,
    window,
)
from gpufinops.interfaces.mcp_reads import READS
from gpufinops.kernel.labels import NO_TEAM, team_label
from gpufinops.warehouse.scope import Scope

# ---- the tools ----------------------------------------------------------------------------------


def costs_daily(
    con, scope: Scope, team: str | None = None, start: str | None = None, end: str | None = None, detail: bool = False
) -> dict[str, Any]:
    """Daily cost per team (the API's /v1/costs/daily rows: shared GPUs charged by allocation), summed
    over providers and services unless ``detail``; totals per team over the window."""
    from gpufinops.interfaces.api_costs import COST_FIELDS, cost_rows

    teams = teams_for(scope, team)
    first, last = days(start, end)
    rows = cost_rows(con, teams, first, last)
    if not detail:
        merged: dict[tuple[str, str | None], dict[str, Any]] = {}
        for row in rows:
            into = merged.setdefault((row["day"], row["team"]), {"day": row["day"], "team": row["team"]})
            for key in COST_FIELDS:
                if row[key] is not None:
                    into[key] = into.get(key, 0.0) + row[key]
        rows = list(merged.values())
    totals: dict[str, float] = {}
    for row in rows:
        row["team"] = team_label(row["team"])
        totals[row["team"]] = totals.get(row["team"], 0.0) + (row.get("effective_cost") or 0.0)
    out = limited(sorted(rows, key=lambda r: (r["day"], r["team"])), MAX_ROWS)
    return {"effective_cost_by_team": totals, "currency": "USD", **out}


def gpu_allocation(
    con, scope: Scope, team: str | None = None, start: str | None = None, end: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """Shared GPUs (``gpu_allocation_hourly``): GPU cost and GPU-hours per team and workload, and the
    idle (unallocated) capacity each team carries per node."""
    from gpufinops.warehouse import allocation_queries as aq

    teams = teams_for(scope, team)
    begin, stop = window(start, end)
    workloads = aq.allocation_by_workload(con, team=teams, start=begin, end=stop).to_dicts()
    idle = aq.unallocated_by_node(con, team=teams, start=begin, end=stop).to_dicts()
    if teams is not None:  # a node's whole cost covers other teams' use of it
        for row in idle:
            row.pop("node_gpu_cost", None)
    return {"workloads": limited(workloads, limit), "unallocated": limited(idle, limit), "currency": "USD"}


def recommendations(
    con,
    scope: Scope,
    team: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    """Stored recommendations, largest monthly saving first, each with its status and its latest
    decision (who accepted or dismissed it, when, why)."""
    from gpufinops.models.registry import KINDS
    from gpufinops.warehouse import queries, recommendation_read

    one_of(kind, KINDS, "kind")
    one_of(status, recommendation_read.STATUSES, "status")
    teams = teams_for(scope, team)
    recs = recommendation_read.load(con, team=teams, kind=kind, status=status)
    latest: dict[str, dict[str, Any]] = {}
    for row in queries.decisions_log(con, team=teams).to_dicts():  # newest first
        latest.setdefault(row["recommendation_id"], row)
    for rec in recs:
        decision = latest.get(rec["id"])
        rec["decision"] = (
            None if decision is None else {k: decision[k] for k in ("decision", "reason", "actor", "decided_at")}
        )
    return limited(recs, limit)


def plans(con, scope: Scope, team: str | None = None, status: str | None = "open", limit: int = 50) -> dict[str, Any]:
    """One plan per resource (models.plans): its actions in order, its alternatives apart, and the one
    savings total (primary and step objects only, as every other surface counts it)."""
    from gpufinops.models import plans as plans_mod
    from gpufinops.warehouse import recommendation_read

    one_of(status, recommendation_read.STATUSES, "status")
    recs = recommendation_read.load(con, team=teams_for(scope, team), status=status)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        grouped.setdefault(rec["plan_id"] or rec["id"], []).append(rec)
    out = []
    for plan_id, members in grouped.items():
        first = members[0]
        out.append(
            {
                "plan_id": plan_id,
                "team": team_label(first["team"]),
                "provider": first["provider"],
                "resource_id": first["resource_id"],
                "monthly_savings_usd": plans_mod.total(members),
                "actions": [brief(r) for r in members if plans_mod.counted(r)],
                "alternatives": [brief(r) for r in members if not plans_mod.counted(r)],
            }
        )
    out.sort(key=lambda p: (-p["monthly_savings_usd"], p["plan_id"]))
    result = limited(out, limit)
    result["monthly_savings_usd"] = plans_mod.total(recs)
    return result


def brief(rec: dict[str, Any]) -> dict[str, Any]:
    """A recommendation inside its plan: what it does and saves (the whole object: `recommendations`)."""
    return {k: rec[k] for k in ("id", "kind", "plan", "status", "monthly_savings_usd", "proposed")}


def alerts(
    con, scope: Scope, team: str | None = None, status: str = "open", rule: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """Budget, forecast, anomaly, idle-burn and stale-data alerts (the API's /v1/alerts objects)."""
    from gpufinops.jobs.alerts.render import alert_object
    from gpufinops.models.alerts import ALERT_RULES, STATUSES
    from gpufinops.warehouse import alerts_queries

    one_of(status, (*STATUSES, "all"), "status")
    one_of(rule, ALERT_RULES, "rule")
    teams = teams_for(scope, team)
    frame = alerts_queries.alerts(con, teams=teams, status=None if status == "all" else status, rule=rule)
    return limited([alert_object(r) for r in frame.to_dicts()], limit)


def make_budgets(settings_budgets: tuple | list) -> Callable[..., dict[str, Any]]:
    """The budgets tool over the configured ``[[budgets]]`` (and the dashboard's budget aliases)."""

    def budgets(con, scope: Scope, team: str | None = None) -> dict[str, Any]:
        """Each budget the caller may see (a lead: budgets over its teams only) with its spend in the
        current period (the one the newest cost data falls in), as the budget alert computes it."""
        from gpufinops.models.budgets import period_bounds
        from gpufinops.warehouse import alerts_queries as aq

        teams = teams_for(scope, team)
        edge = aq.data_edge(con)
        names = aq.provider_names(con)
        out = []
        for budget in settings_budgets:
            covered = set(budget.scope.teams)
            if teams is not None and not (covered and covered <= set(teams)):
                continue
            if team is not None and team not in covered and not budget.scope.everything:
                continue
            entry: dict[str, Any] = budget.to_dict() | {"amount": budget.amount}  # a number, as every amount
            if edge is not None:
                first, stop, label = period_bounds(edge - timedelta(microseconds=1), budget.period)
                providers = [n for n in names if budget.scope.matches_provider(n)] if budget.scope.providers else None
                series = aq.scope_daily_series(
                    con,
                    teams=list(budget.scope.teams) or None,
                    provider_names_=providers,
                    gpu_models=list(budget.scope.gpu_models) or None,
                    tags=[(k, list(v)) for k, v in budget.scope.tags] or None,
                    complete_until=edge,
                )
                spent = sum(
                    (Decimal(str(r["cost"])) for r in series.to_dicts() if first <= r["day"] < stop), Decimal(0)
                )
                entry |= {"current_period": label, "spent_usd": spent, "share_spent": float(spent / budget.amount)}
            out.append(entry)
        return {"budgets": out, "data_until": edge, "currency": "USD"}

    return budgets


def coverage(
    con, scope: Scope, team: str | None = None, start: str | None = None, end: str | None = None
) -> dict[str, Any]:
    """Which inputs each derived figure (idle cost, utilisation, energy, emissions, unit costs, allocation) and
    each recommendation kind could see: state (complete, partial, unknown), GPU-hours covered of the total, the
    missing inputs and the source types that would provide them. A figure another tool returns is only as
    known as this says: unknown is never zero."""
    from gpufinops.models import kind_coverage

    first, last = window(start, end)
    return kind_coverage.report(con, team=teams_for(scope, team), start=first, end=last)


def registry(settings_budgets: tuple | list = ()) -> dict[str, ToolSpec]:
    """Every tool the server serves, by name."""
    reads: list[tuple[Callable[..., dict[str, Any]], bool]] = [
        (costs_daily, True),
        (gpu_allocation, True),
        (recommendations, False),
        (plans, False),
        (alerts, True),
        (make_budgets(settings_budgets), True),
        (coverage, True),
    ]
    reads += list(READS)
    specs = [ToolSpec(fn.__name__, fn, costs, " ".join((fn.__doc__ or "").split())) for fn, costs in reads]
    return {spec.name: spec for spec in specs}


def call(spec: ToolSpec, con, scope: Scope, arguments: dict[str, Any]) -> dict[str, Any]:
    """The guard every tool passes through: the role first, then the query, then plain JSON."""
    if spec.costs and not scope.sees_costs:
        raise ToolRefused(f"{spec.name}: a {scope.role} token reads recommendations and plans only, not costs")
    return plain(spec.fn(con, scope, **arguments))


__all__ = ["MAX_ROWS", "NO_TEAM", "ToolRefused", "ToolSpec", "call", "plain", "registry"]
