"""``GET /v1/alerts``: the alerts the rules raised (docs/alerts.md), open ones by default; a
scheduler's token reads none, a lead's its teams only."""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Routes, etag_response, refuse_scheduler, teams_for
from gpufinops.warehouse.scope import Scope


def register(app: FastAPI, routes: Routes) -> None:
    read = routes.read

    @app.get("/v1/alerts")
    def list_alerts(
        request: Request,
        team: str | None = None,
        status: str = "open",
        rule: str | None = None,
        scope: Scope = Depends(routes.caller),
    ) -> Response:
        from gpufinops.jobs.alerts.render import alert_object
        from gpufinops.models.alerts import ALERT_RULES, STATUSES
        from gpufinops.warehouse import alerts_queries

        refuse_scheduler(scope, "alerts")
        if status not in (*STATUSES, "all"):
            raise HTTPException(400, detail=f"status: unknown status {status!r} (known: {', '.join(STATUSES)}, all)")
        if rule is not None and rule not in ALERT_RULES:
            raise HTTPException(400, detail=f"rule: unknown rule {rule!r} (known: {', '.join(ALERT_RULES)})")
        teams = teams_for(scope, team)
        frame = read(
            lambda con: alerts_queries.alerts(con, teams=teams, status=None if status == "all" else status, rule=rule)
        )
        return etag_response(request, [alert_object(r) for r in frame.to_dicts()])
