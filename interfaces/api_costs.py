"""``GET /v1/costs/daily``: daily cost rows as the teams carry them (docs/api.md); a scheduler's token
reads no costs, a lead's its teams only, ``to`` is inclusive."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Asked, Routes, etag_response, utc_bounds

COST_FIELDS = ("billed_cost", "effective_cost", "gpu_cost", "allocated_gpu_cost", "unallocated_gpu_cost", "tagged_cost")


def register(app: FastAPI, routes: Routes) -> None:
    read = routes.read

    @app.get("/v1/costs/daily")
    def costs_daily(request: Request, asked: Asked = Depends(routes.asked)) -> Response:
        teams = asked.cost_teams("costs")
        start, end = asked.days()
        return etag_response(request, read(lambda con: cost_rows(con, teams, start, end)))


def register_totals(app: FastAPI, routes: Routes) -> None:
    """``GET /v1/costs``: spend for a window by one dimension with its total (warehouse/spend_by.py)."""

    @app.get("/v1/costs")
    def costs(
        request: Request,
        by: str = "team",
        month: str | None = Query(None, max_length=16),
        cost: str = "effective",
        asked: Asked = Depends(routes.asked),
    ) -> Response:
        teams = asked.cost_teams("costs")
        start, end = asked.days()
        return etag_response(request, routes.read(lambda con: costs_by(con, by, month, start, end, cost, teams)))


def costs_by(con, by: str, month: str | None, start, end, cost: str, teams: list[str] | None) -> dict[str, Any]:
    """The body of ``/v1/costs`` (and the MCP ``costs`` tool): ``spend_by.as_json``; a bad value is 400."""
    from gpufinops.warehouse import spend_by

    try:
        window = spend_by.window_for(con, month, start, end, teams)
        return spend_by.as_json(spend_by.spend_by(con, by=by, window=window, cost=cost, teams=teams))
    except ValueError as exc:
        raise HTTPException(400, detail=str(exc)) from None


def cost_rows(con, teams: list[str] | None, start: date | None, end: date | None) -> list[dict[str, Any]]:
    """Daily cost rows as the teams carry them (shared GPUs by allocation: warehouse/allocation_queries.py);
    ``to`` is inclusive (the whole day), money as numbers."""
    from gpufinops.warehouse import allocation_queries

    begin, stop = utc_bounds(start, end)
    frame = allocation_queries.report_team_spend_daily(con, team=teams, start=begin, end=stop, tz="UTC")
    rows = []
    for row in frame.iter_rows(named=True):
        day = row["day"]
        rows.append(
            {
                "day": (day.date() if isinstance(day, datetime) else day).isoformat(),
                "provider": row["provider"],
                "team": row["team"],
                "service": row["service"],
                **{k: None if row[k] is None else float(row[k]) for k in COST_FIELDS},
            }
        )
    return rows
