"""``GET /v1/coverage?team=&from=&to=``: which inputs each derived figure and each model kind could see.

Scoped like ``/v1/costs/daily`` (a lead's token its teams, a scheduler's none); ``to`` is inclusive. The body
is ``models.kind_coverage.report``: per figure (idle cost, utilisation, energy, emissions, unit costs,
allocation) its state (``complete``, ``partial``, ``unknown``, ``empty``), the GPU-hours covered of the
total, the missing inputs with the source types that provide them, and the kinds whose findings are unknown.
A figure the API returns elsewhere as a number is only as known as this says.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Routes, days, etag_response, teams_for
from gpufinops.warehouse.scope import Scope


def register(app: FastAPI, routes: Routes) -> None:
    """Add the route, with the API's own scope, date and ETag helpers (interfaces/api_http.py)."""
    read = routes.read

    @app.get("/v1/coverage")
    def coverage_route(
        request: Request,
        team: str | None = None,
        from_: str | None = Query(None, alias="from"),
        to: str | None = None,
        scope: Scope = Depends(routes.caller),
    ) -> Response:
        from gpufinops.models import kind_coverage

        if not scope.sees_costs:
            raise HTTPException(403, detail="a scheduler token may not read coverage (it names billed GPU-hours)")
        teams = teams_for(scope, team)
        start, end = days(from_, to)
        begin = datetime.combine(start, time(), UTC) if start else None
        stop = datetime.combine(end + timedelta(days=1), time(), UTC) if end else None
        return etag_response(request, read(lambda con: kind_coverage.report(con, team=teams, start=begin, end=stop)))
