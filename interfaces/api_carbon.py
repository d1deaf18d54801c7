"""`GET /v1/carbon`: energy and emissions per month and team, resource or month (docs/carbon.md).

Scoped like ``/v1/costs/daily``: a lead's token sees its teams only, a scheduler's none; ``to`` is
inclusive (the whole day). The rows are the one read model's (``warehouse.queries.carbon``).
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Asked, Routes, etag_response, refuse_scheduler, utc_bounds


def register(app: FastAPI, routes: Routes) -> None:
    """Add the route, with the API's own scope, date and ETag helpers (interfaces/api_http.py)."""
    read = routes.read

    @app.get("/v1/carbon")
    def carbon(
        request: Request, by: str = "team", period: str = "month", asked: Asked = Depends(routes.asked)
    ) -> Response:
        from gpufinops.warehouse import windows
        from gpufinops.warehouse.queries import carbon as carbon_queries

        refuse_scheduler(asked.scope, "carbon figures")
        if by not in carbon_queries.BY:
            raise HTTPException(400, detail=f"by: must be one of {', '.join(carbon_queries.BY)}")
        if period not in carbon_queries.PERIODS:
            raise HTTPException(400, detail=f"period: must be one of {', '.join(carbon_queries.PERIODS)}")
        teams = asked.teams()
        start, end = asked.days()
        begin, stop = utc_bounds(start, end)
        frame = read(
            lambda con: carbon_queries.carbon_summary(con, by=by, team=teams, start=begin, end=stop, period=period)
        )
        # each row names its period (and the days of it the window covers) and, where GPU-hours had no
        # power reading, why its emissions are unknown or partial (warehouse/coverage.py)
        rows = carbon_queries.described(frame, period, windows.days(start, end))
        return etag_response(request, rows.to_dicts())
