"""``GET /v1/enforcement``: the enforced budgets' quotas (docs/enforce.md), for the schedulers that apply them.

``format=json`` (default): per team and budget the quotas and their reasons; ``format=kueue | karpenter |
resourcequota | skypilot``: the YAML ``gpufinops export budgets`` writes. Every role may read it (a
scheduler's token is what it is for); a lead's token sees its teams only.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import Response

from gpufinops.interfaces.api_http import Routes, etag_response
from gpufinops.warehouse.scope import Scope


def register(app: FastAPI, routes: Routes) -> None:
    @app.get("/v1/enforcement")
    def enforcement(
        request: Request,
        format: str = "json",
        cluster: str | None = None,
        scope: Scope = Depends(routes.caller),
    ) -> Response:
        from gpufinops.jobs.enforce import build, objects

        if format not in ("json", *objects.FORMATS):
            raise HTTPException(400, detail=f"format: unknown {format!r} (known: json, {', '.join(objects.FORMATS)})")
        budgets = [
            b
            for b in routes.cfg.alerts.settings.budgets
            if scope.teams is None or set(b.scope.teams) <= set(scope.teams)
        ]
        settings = routes.cfg.export
        try:
            if format == "json":
                found = routes.read(lambda con: build.quotas(con, budgets, settings)[0])
                return etag_response(request, {"budgets": build.as_json(found)})
            text = routes.read(lambda con: build.render(con, format, budgets, settings, cluster=cluster))
        except build.EnforceError as exc:
            raise HTTPException(400, detail=str(exc)) from None
        return Response(text, media_type="application/yaml", headers={"Cache-Control": "private, no-cache"})
