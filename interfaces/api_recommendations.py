"""The recommendations routes: ``GET /v1/recommendations``, ``GET /v1/savings`` and
``POST /v1/recommendations/{id}/decision`` (docs/api.md)."""

from __future__ import annotations

import logging
import threading
from typing import Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from gpufinops.interfaces.api_http import Routes, etag_response, labelled, teams_for
from gpufinops.models.registry import KINDS
from gpufinops.warehouse.scope import Scope

log = logging.getLogger("gpufinops.api")


class DecisionIn(BaseModel):
    decision: Literal["accept", "dismiss"]
    reason: str = Field(default="", max_length=2000)


def _check_status(status: str | None) -> None:
    from gpufinops.warehouse import recommendation_read

    if status is not None and status not in recommendation_read.STATUSES:
        raise HTTPException(
            400, detail=f"status: unknown status {status!r} (known: {', '.join(recommendation_read.STATUSES)})"
        )


def register(app: FastAPI, routes: Routes) -> None:
    caller, read = routes.caller, routes.read

    @app.get("/v1/recommendations")
    def list_recommendations(
        request: Request,
        team: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        scope: Scope = Depends(caller),
    ) -> Response:
        from gpufinops.warehouse import recommendation_read

        if kind is not None and kind not in KINDS:
            raise HTTPException(400, detail=f"kind: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        _check_status(status)
        teams = teams_for(scope, team)
        return etag_response(
            request, read(lambda con: recommendation_read.load(con, team=teams, kind=kind, status=status))
        )

    @app.get("/v1/savings")
    def savings(
        request: Request, team: str | None = None, status: str | None = None, scope: Scope = Depends(caller)
    ) -> Response:
        """The one savings total (models.plans.total) of the caller's recommendations: primary and step
        objects of each resource's plan, open or accepted (``status`` asks for one status's figure);
        alternatives are counted apart and never added, and ``left_out_by_decision`` counts the
        dismissed and applied findings the total leaves out."""
        from gpufinops.models import plans
        from gpufinops.warehouse import recommendation_read

        _check_status(status)
        teams = teams_for(scope, team)
        statuses = (status,) if status else plans.OUTSTANDING

        def figures(con):
            recs = recommendation_read.load(con, team=teams)
            chosen = [r for r in recs if r["status"] in statuses]
            counted = [r for r in chosen if plans.counted(r, statuses)]
            return {
                "status": status,
                "statuses": list(statuses),
                "monthly_savings_usd": float(plans.total(chosen, statuses)),
                "plans": len({r["plan_id"] for r in counted}),
                "actions": len(counted),
                "alternatives": sum(1 for r in chosen if r.get("plan") not in plans.COUNTED),
                "left_out_by_decision": len(plans.left_out(recs)),
            }

        return etag_response(request, read(figures))

    _register_decision(app, routes)


def _register_decision(app: FastAPI, routes: Routes) -> None:
    cfg, write_retry_s = routes.cfg, routes.write_retry_s
    # Decisions of concurrent requests are written one at a time: DuckDB admits one writing process,
    # and two of this process's connections updating one row conflict (retried in
    # recommendation_store.record_decision).
    decisions = threading.Lock()

    @app.post("/v1/recommendations/{recommendation_id}/decision")
    def decide(recommendation_id: str, body: DecisionIn, scope: Scope = Depends(routes.caller)) -> JSONResponse:
        from gpufinops.warehouse import db, queries, recommendation_read, recommendation_store

        if scope.role == "scheduler":
            raise HTTPException(403, detail="a scheduler token reads recommendations only")
        if not cfg.warehouse_path.exists():  # a decision never creates an empty warehouse
            raise HTTPException(503, detail="warehouse not available yet")
        if not decisions.acquire(timeout=write_retry_s):  # one writer at a time in this process
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"})
        try:
            with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit, retry_seconds=write_retry_s) as con:
                recommendation_store.record_decision(
                    con, recommendation_id, body.decision, body.reason, scope.actor, teams=scope.team_filter
                )
                rec = recommendation_read.objects(queries.recommendation_by_id(con, recommendation_id))[0]
        except recommendation_store.UnknownRecommendation:
            raise HTTPException(404, detail=f"no recommendation {recommendation_id!r}") from None
        except (db.WarehouseBusy, recommendation_store.WriteConflict) as exc:  # never a 500 for a busy warehouse
            log.warning("decision on %s not recorded: %s", recommendation_id, exc)
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"}) from None
        finally:
            decisions.release()
        log.info("decision %s on %s by %s", body.decision, recommendation_id, scope.actor)
        return JSONResponse(labelled(rec))
