"""``GET /v1/unit-costs?team=&model=&by=&from=&to=``: the unit costs of serving, scoped like ``/v1/costs/daily``.

A ``finance`` token sees every team, a ``lead`` token its teams (a team outside them is 403; rows of no team
are outside every lead's scope), a ``scheduler`` token none (403). Rows are
``derived.unit_costs.unit_costs`` (the one builder), money and rates as numbers, ``to`` inclusive;
``carbon_note`` says why ``kwh`` / ``kg_co2e`` are null when they are, ``empty_reason`` why there are no rows
(the filter that matched nothing, or the missing source).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Asked, Routes, etag_response, refuse_scheduler, utc_bounds


def register(app: FastAPI, routes: Routes) -> None:
    """Adds the route, with the API's own date, team and ETag helpers (interfaces/api_http.py: every
    route parses dates, scopes teams and answers the same way)."""
    read, settings = routes.read, routes.cfg.unit_costs

    @app.get("/v1/unit-costs")
    def unit_costs_route(
        request: Request,
        model: str | None = Query(None, max_length=256),
        by: str = "model",
        period: str = "day",
        asked: Asked = Depends(routes.asked),
    ) -> Response:
        from gpufinops.derived.unit_costs import GROUPINGS, PERIODS

        refuse_scheduler(asked.scope, "costs")
        if by not in GROUPINGS:
            raise HTTPException(400, detail=f"by: must be one of {', '.join(GROUPINGS)}, not {by[:40]!r}")
        if period not in PERIODS:
            raise HTTPException(400, detail=f"period: must be one of {', '.join(PERIODS)}, not {period[:40]!r}")
        teams = asked.teams()
        start, end = asked.days()
        return etag_response(request, read(lambda con: rows(con, teams, model, by, start, end, settings, period)))


def rows(
    con,
    teams: list[str] | None,
    model: str | None,
    by: str,
    start: date | None,
    end: date | None,
    settings: Any,
    period: str = "day",
) -> dict[str, Any]:
    """The response body: ``rows`` (plain numbers and ISO days; ``day`` is the period's first),
    ``totals`` (one row per period over every row in scope), ``carbon_note`` and ``empty_reason`` (why there
    are no rows: the filter that matched nothing or the missing source; null when there are rows)."""
    from gpufinops.derived import unit_costs, unit_costs_empty

    begin, stop = utc_bounds(start, end)
    asked = dict(team=teams, model=model, start=begin, end=stop, settings=settings, period=period)
    frame = unit_costs.unit_costs(con, by=by, **asked)
    if teams is not None:  # a lead's scope never holds the rows of no team
        frame = frame.filter(frame["team"].is_not_null())
    totals = unit_costs.unit_costs(con, by=unit_costs.TOTAL, **asked)
    out = _plain(frame)
    empty = None if out else unit_costs_empty.why_empty(con, team=teams, model=model, start=begin, end=stop)
    return {"rows": out, "totals": _plain(totals), "carbon_note": unit_costs.carbon_note(con), "empty_reason": empty}


def _plain(frame: Any) -> list[dict[str, Any]]:
    from gpufinops.kernel.labels import labels_of

    out = []
    for row in frame.iter_rows(named=True):
        row["cost_basis_label"] = labels_of(row.get("cost_basis"), "cost_basis")
        out.append(
            {
                k: (v.isoformat() if isinstance(v, date) else float(v) if isinstance(v, Decimal) else v)
                for k, v in row.items()
            }
        )
    return out
