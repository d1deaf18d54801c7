"""``GET /v1/coverage?team=&from=&to=``: which inputs each derived figure and each model kind could see.

Scoped like ``/v1/costs/daily`` (a lead's token its teams, a scheduler's none); ``to`` is inclusive. The body
is ``models.kind_coverage.report``: per figure (idle cost, utilisation, energy, emissions, unit costs,
allocation) its state (``complete``, ``partial``, ``unknown``, ``empty``), the GPU-hours covered of the
total, the missing inputs with the source types that provide them, and the kinds whose findings are unknown.
A figure the API returns elsewhere as a number is only as known as this says.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Routes, cost_teams, days, etag_response, utc_bounds
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

        teams = cost_teams(scope, team, "coverage (it names billed GPU-hours)")
        start, end = days(from_, to)
        begin, stop = utc_bounds(start, end)
        return etag_response(request, read(lambda con: kind_coverage.report(con, team=teams, start=begin, end=stop)))
