"""``GET /v1/coverage?team=&from=&to=``: which inputs each derived figure and each model kind could see.

Scoped like ``/v1/costs/daily`` (a lead's token its teams, a scheduler's none); ``to`` is inclusive. The body
is ``models.kind_coverage.report``: per figure (idle cost, utilisation, energy, emissions, unit costs,
allocation) its state (``complete``, ``partial``, ``unknown``, ``empty``), the GPU-hours covered of the
total, the missing inputs with the source types that provide them, and the kinds whose findings are unknown.
A figure the API returns elsewhere as a number is only as known as this says.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Asked, Routes, etag_response, utc_bounds


def register(app: FastAPI, routes: Routes) -> None:
    """Add the route, with the API's own scope, date and ETag helpers (interfaces/api_http.py)."""
    read = routes.read

    @app.get("/v1/coverage")
    def coverage_route(request: Request, asked: Asked = Depends(routes.asked)) -> Response:
        from gpufinops.models import kind_coverage

        teams = asked.cost_teams("coverage (it names billed GPU-hours)")
        begin, stop = utc_bounds(*asked.days())
        return etag_response(request, read(lambda con: kind_coverage.report(con, team=teams, start=begin, end=stop)))
