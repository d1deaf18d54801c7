"""The MCP tools for the first questions: spend for a period, unit costs, carbon, storage findings and
withheld findings (interfaces/mcp_tools.py registers them beside the others).

Each answers with the builder its CLI command and API route call (``warehouse.spend_by``,
``derived.unit_costs``, ``warehouse.queries.carbon``, ``warehouse.recommendation_read``, ``warehouse.queries``),
scoped like them: a lead's token sees its teams only. Money is a number everywhere (``mcp_tools.plain``).
"""

from __future__ import annotations

from typing import Any

from gpufinops.interfaces.mcp_args import MAX_ROWS, ToolRefused, day, days, limited, one_of, teams_for, window
from gpufinops.kernel.labels import team_label
from gpufinops.warehouse.scope import Scope


def costs(
    con,
    scope: Scope,
    by: str = "team",
    month: str | None = None,
    start: str | None = None,
    end: str | None = None,
    cost: str = "effective",
    team: str | None = None,
) -> dict[str, Any]:
    """Spend for a calendar month (YYYY-MM, UTC) or the days start … end (inclusive), by team, provider,
    resource, service, gpu_model or namespace, with its total (cost: effective, billed or gpu); no
    window: the month of the newest cost data. The same figure as `gpufinops costs` and GET /v1/costs."""
    from gpufinops.warehouse import spend_by

    teams = teams_for(scope, team)
    first, last = day(start, "start"), day(end, "end")
    try:
        answer = spend_by.window_for(con, month, first, last, teams)
        result = spend_by.as_json(spend_by.spend_by(con, by=by, window=answer, cost=cost, teams=teams))
    except ValueError as exc:
        raise ToolRefused(str(exc)) from None
    result["rows"] = result["rows"][:MAX_ROWS]
    return result


def unit_costs(
    con,
    scope: Scope,
    by: str = "model",
    period: str = "month",
    team: str | None = None,
    model: str | None = None,
    start: str | None = None,
    end: str | None = None,
) -> dict[str, Any]:
    """$ per 1M input / output tokens and per 1,000 requests of the serving pods per UTC day, ISO week or
    calendar month (period), one row per model (or team, namespace) and one total row per period
    (the rows of `gpufinops unit-costs` and GET /v1/unit-costs)."""
    from gpufinops.derived import unit_costs as builder
    from gpufinops.interfaces.api_unit_costs import rows

    one_of(by, tuple(builder.GROUPINGS), "by")
    one_of(period, builder.PERIODS, "period")
    teams = teams_for(scope, team)
    first, last = days(start, end)
    body = rows(con, teams, model, by, first, last, None, period)  # None: the settings the rows were stored with
    return {**limited(body["rows"], MAX_ROWS), "totals": body["totals"], "carbon_note": body["carbon_note"]}


def carbon(
    con,
    scope: Scope,
    by: str = "team",
    period: str = "month",
    team: str | None = None,
    start: str | None = None,
    end: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    """Energy (kWh) and emissions (kg CO2e) from measured GPU power per UTC day, ISO week or calendar month
    (period) and team, resource, or the period alone (by=month); GPU-hours without a power measurement
    are counted as withheld, never given emissions (GET /v1/carbon's rows)."""
    from gpufinops.warehouse import windows
    from gpufinops.warehouse.queries import carbon as carbon_queries

    one_of(by, carbon_queries.BY, "by")
    one_of(period, carbon_queries.PERIODS, "period")
    teams = teams_for(scope, team)
    begin, stop = window(start, end)
    frame = carbon_queries.carbon_summary(con, by=by, team=teams, start=begin, end=stop, period=period)
    totals = carbon_queries.carbon_summary(con, by="month", team=teams, start=begin, end=stop, period=period)
    cut = windows.Window(begin, stop, "")
    cover = carbon_queries.emissions_coverage(con, team=teams, start=begin, end=stop)
    return {
        **limited(carbon_queries.described(frame, period, cut).to_dicts(), limit),
        "totals": carbon_queries.described(totals, period, cut).to_dicts(),
        "coverage": cover.sentence() or None,
    }


def storage_findings(
    con, scope: Scope, team: str | None = None, status: str | None = "open", limit: int = 50
) -> dict[str, Any]:
    """The storage recommendations (kinds of the storage family: cold tiers, orphaned volumes and
    snapshots, checkpoint lifecycles), largest monthly saving first, with the savings total."""
    from gpufinops.models import plans, registry
    from gpufinops.warehouse import recommendation_read

    one_of(status, recommendation_read.STATUSES, "status")
    kinds = [k for k in registry.KINDS if registry.spec(k).family == "storage"]
    recs = [r for r in recommendation_read.load(con, team=teams_for(scope, team), status=status) if r["kind"] in kinds]
    for rec in recs:
        rec["team"] = team_label(rec.get("team"))
    return {**limited(recs, limit), "monthly_savings_usd": plans.total(recs), "kinds": kinds}


def withheld_findings(
    con, scope: Scope, team: str | None = None, kind: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """What the last model run withheld and why: per resource and kind, the reason, the missing fact and
    the source that would provide it, with counts per reason."""
    from gpufinops.models.registry import KINDS
    from gpufinops.warehouse import queries

    one_of(kind, KINDS, "kind")
    teams = teams_for(scope, team)
    rows = queries.withheld_findings(con, kind=kind, team=teams).to_dicts()
    for row in rows:
        row["team"] = team_label(row.get("team"))
    counts = queries.withheld_counts(con, team=teams).to_dicts()
    return {**limited(rows, limit), "by_reason": counts}


READS = ((costs, True), (unit_costs, True), (carbon, True), (storage_findings, False), (withheld_findings, False))
