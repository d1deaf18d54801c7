"""`gpufinops api`: the HTTP API of docs/api.md (FastAPI, served by uvicorn).

Bearer tokens come from ``[[api.tokens]]``: each names the environment variable holding its value
(``token_env``) and a role (``finance``: every team; ``lead``: its ``teams``; ``scheduler``: reads
recommendations only), turned into a ``warehouse.scope.Scope``. Token values are compared in constant
time and never logged or echoed. Reads open a read-only warehouse connection per request (retrying
briefly while a job writes); a decision opens a short-lived writer, one at a time (a
request that waits past ``write_retry_s`` for the warehouse is 503 with ``Retry-After``, never a 500). GET answers carry an ``ETag``
(a hash of the body) and honour ``If-None-Match`` with 304, so a poller fetches only changes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from gpufinops.interfaces import api_carbon
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.models.registry import KINDS
from gpufinops.warehouse.scope import Scope

log = logging.getLogger("gpufinops.api")

INSECURE_WARNING = (
    "gpufinops api: --insecure-demo: NO AUTHENTICATION. Every caller gets finance scope "
    "(every team's costs and recommendations, and may decide on them). Demo use only."
)


@dataclass(frozen=True)
class ApiToken:
    digest: bytes  # sha256 of the token value: compared in constant time, the value itself is not kept
    scope: Scope


MIN_TOKEN_LENGTH = 16
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2199, 12, 31)  # the dates a query parameter may name


def load_tokens(cfg: Config, environ: Mapping[str, str] | None = None) -> list[ApiToken]:
    """The configured tokens; a token whose variable is unset, empty, shorter than 16 characters or
    holding the same value as another token's is a config error naming the variables (never a value):
    two entries sharing a value would give that value the wider of their scopes."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    tokens = []
    owners: dict[bytes, str] = {}
    for i, entry in enumerate(cfg.api.tokens):
        value = env.get(entry.token_env, "")
        if not value:
            raise ConfigError(f"api.tokens[{i}].token_env: environment variable {entry.token_env} is not set")
        if len(value) < MIN_TOKEN_LENGTH:
            raise ConfigError(
                f"api.tokens[{i}].token_env: the token in {entry.token_env} is shorter than "
                f"{MIN_TOKEN_LENGTH} characters (use e.g. `openssl rand -hex 32`)"
            )
        digest = hashlib.sha256(value.encode()).digest()
        if digest in owners:
            raise ConfigError(
                f"api.tokens[{i}].token_env: {entry.token_env} holds the same token as "
                f"{owners[digest]}: every token must be different"
            )
        owners[digest] = entry.token_env
        actor = entry.name or f"{entry.role}:{entry.token_env}"
        tokens.append(ApiToken(digest, Scope(entry.role, entry.teams if entry.role == "lead" else None, actor)))
    return tokens


def _match(tokens: list[ApiToken], presented: str) -> Scope | None:
    """Every token is compared (no early exit), each in constant time."""
    digest = hashlib.sha256(presented.encode()).digest()
    found = None
    for token in tokens:
        if hmac.compare_digest(digest, token.digest) and found is None:
            found = token.scope
    return found


def _unauthorized(detail: str, error: str | None = None) -> HTTPException:
    challenge = 'Bearer realm="gpufinops"' + (f', error="{error}"' if error else "")
    return HTTPException(401, detail=detail, headers={"WWW-Authenticate": challenge})


def _labelled(payload: Any) -> Any:
    """Every object of a response with a ``*_label`` beside each code it holds (warehouse/labels.py;
    additive: the codes stay as they are)."""
    from gpufinops.warehouse.labels import with_labels

    if isinstance(payload, list):
        return [_labelled(item) for item in payload]
    return with_labels(payload) if isinstance(payload, dict) else payload


def _etag_response(request: Request, payload: Any) -> Response:
    body = json.dumps(_labelled(payload), separators=(",", ":"), allow_nan=False).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    wanted = request.headers.get("if-none-match", "")
    tags = {t.strip().removeprefix("W/") for t in wanted.split(",") if t.strip()}
    if etag in tags or "*" in tags:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _day(text: str | None, name: str) -> date | None:
    if text is None:
        return None
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise HTTPException(400, detail=f"{name}: not a date: {text[:40]!r} (expected YYYY-MM-DD)")
    if not FIRST_DAY <= day <= LAST_DAY:
        raise HTTPException(400, detail=f"{name}: {text} is outside {FIRST_DAY} … {LAST_DAY}")
    return day


def _teams_for(scope: Scope, team: str | None) -> list[str] | None:
    """The team filter for a request: an explicit team outside the scope is forbidden."""
    if team is not None:
        if not scope.allows(team):
            raise HTTPException(403, detail=f"this token may not see team {team!r}")
        return [team]
    return scope.team_filter


class DecisionIn(BaseModel):
    decision: Literal["accept", "dismiss"]
    reason: str = Field(default="", max_length=2000)


def create_app(
    cfg: Config,
    *,
    insecure_demo: bool = False,
    environ: Mapping[str, str] | None = None,
    read_retry_s: float = 5.0,
    write_retry_s: float = 10.0,
) -> FastAPI:
    """The application; refuses (ConfigError) without tokens unless ``insecure_demo``. While a job
    holds the warehouse, reads wait up to ``read_retry_s`` and decisions ``write_retry_s``, then 503."""
    from gpufinops.warehouse import db

    tokens = load_tokens(cfg, environ)
    if not tokens and not insecure_demo:
        raise ConfigError(
            "api.tokens: no [[api.tokens]] configured: the API refuses to start without them "
            "(--insecure-demo serves every caller with finance scope, for a demo only)"
        )
    if tokens and insecure_demo:
        log.warning("--insecure-demo ignored: [[api.tokens]] are configured")
    open_scope = Scope("finance", None, "insecure-demo") if not tokens else None
    if open_scope:
        log.warning(INSECURE_WARNING)

    # Decisions of concurrent requests are written one at a time: DuckDB admits one writing process,
    # and two of this process's connections updating one row conflict (retried in store.record_decision).
    decisions = threading.Lock()
    app = FastAPI(title="gpufinops", version="1", docs_url=None, redoc_url=None)

    def caller(request: Request) -> Scope:
        if open_scope:
            return open_scope
        header = request.headers.get("authorization")
        if not header:
            raise _unauthorized("missing bearer token")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise _unauthorized("expected an Authorization: Bearer token", "invalid_request")
        scope = _match(tokens, presented.strip())
        if scope is None:
            raise _unauthorized("invalid bearer token", "invalid_token")
        return scope

    def read(fn):
        try:
            with db.reader(cfg.warehouse_path, retry_seconds=read_retry_s) as con:
                return fn(con)
        except db.WarehouseBusy:
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"}) from None
        except FileNotFoundError:
            raise HTTPException(503, detail="warehouse not available yet") from None

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        try:
            version = read(lambda con: con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0])
        except HTTPException as exc:
            return JSONResponse({"status": "unavailable", "detail": exc.detail}, status_code=503)
        return JSONResponse({"status": "ok", "schema_version": version})

    @app.get("/v1/recommendations")
    def list_recommendations(
        request: Request,
        team: str | None = None,
        kind: str | None = None,
        status: str | None = None,
        scope: Scope = Depends(caller),
    ) -> Response:
        from gpufinops.jobs.export import objects

        if kind is not None and kind not in KINDS:
            raise HTTPException(400, detail=f"kind: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        if status is not None and status not in objects.STATUSES:
            raise HTTPException(400, detail=f"status: unknown status {status!r} (known: {', '.join(objects.STATUSES)})")
        teams = _teams_for(scope, team)
        return _etag_response(request, read(lambda con: objects.load(con, team=teams, kind=kind, status=status)))

    @app.get("/v1/savings")
    def savings(
        request: Request, team: str | None = None, status: str | None = None, scope: Scope = Depends(caller)
    ) -> Response:
        """The one savings total (models.plans.total) of the caller's recommendations: primary and step
        objects of each resource's plan, open or accepted (``status`` asks for one status's figure);
        alternatives are counted apart and never added, and ``left_out_by_decision`` counts the
        dismissed and applied findings the total leaves out."""
        from gpufinops.jobs.export import objects
        from gpufinops.models import plans

        if status is not None and status not in objects.STATUSES:
            raise HTTPException(400, detail=f"status: unknown status {status!r} (known: {', '.join(objects.STATUSES)})")
        teams = _teams_for(scope, team)
        statuses = (status,) if status else plans.OUTSTANDING

        def figures(con):
            recs = objects.load(con, team=teams)
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

        return _etag_response(request, read(figures))

    @app.post("/v1/recommendations/{recommendation_id}/decision")
    def decide(recommendation_id: str, body: DecisionIn, scope: Scope = Depends(caller)) -> JSONResponse:
        from gpufinops.jobs.export import objects
        from gpufinops.warehouse import queries, store

        if scope.role == "scheduler":
            raise HTTPException(403, detail="a scheduler token reads recommendations only")
        if not cfg.warehouse_path.exists():  # a decision never creates an empty warehouse
            raise HTTPException(503, detail="warehouse not available yet")
        if not decisions.acquire(timeout=write_retry_s):  # one writer at a time in this process
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"})
        try:
            with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit, retry_seconds=write_retry_s) as con:
                store.record_decision(
                    con, recommendation_id, body.decision, body.reason, scope.actor, teams=scope.team_filter
                )
                rec = objects.from_frame(queries.recommendation_by_id(con, recommendation_id))[0]
        except store.UnknownRecommendation:
            raise HTTPException(404, detail=f"no recommendation {recommendation_id!r}") from None
        except (db.WarehouseBusy, store.WriteConflict) as exc:  # never a 500 for a busy warehouse
            log.warning("decision on %s not recorded: %s", recommendation_id, exc)
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"}) from None
        finally:
            decisions.release()
        log.info("decision %s on %s by %s", body.decision, recommendation_id, scope.actor)
        return JSONResponse(_labelled(rec))

    @app.get("/v1/costs/daily")
    def costs_daily(
        request: Request,
        team: str | None = None,
        from_: str | None = Query(None, alias="from"),
        to: str | None = None,
        scope: Scope = Depends(caller),
    ) -> Response:
        if not scope.sees_costs:
            raise HTTPException(403, detail="a scheduler token may not read costs")
        teams = _teams_for(scope, team)
        start, end = _day(from_, "from"), _day(to, "to")
        if start and end and end < start:
            raise HTTPException(400, detail="to: before from")
        return _etag_response(request, read(lambda con: _cost_rows(con, teams, start, end)))

    @app.get("/v1/alerts")
    def list_alerts(
        request: Request,
        team: str | None = None,
        status: str = "open",
        rule: str | None = None,
        scope: Scope = Depends(caller),
    ) -> Response:
        from gpufinops.jobs.alerts.render import alert_object
        from gpufinops.models.alerts import ALERT_RULES, STATUSES
        from gpufinops.warehouse import alerts_queries

        if not scope.sees_costs:
            raise HTTPException(403, detail="a scheduler token may not read alerts")
        if status not in (*STATUSES, "all"):
            raise HTTPException(400, detail=f"status: unknown status {status!r} (known: {', '.join(STATUSES)}, all)")
        if rule is not None and rule not in ALERT_RULES:
            raise HTTPException(400, detail=f"rule: unknown rule {rule!r} (known: {', '.join(ALERT_RULES)})")
        teams = _teams_for(scope, team)
        frame = read(
            lambda con: alerts_queries.alerts(con, teams=teams, status=None if status == "all" else status, rule=rule)
        )
        return _etag_response(request, [alert_object(r) for r in frame.to_dicts()])

    api_carbon.register(app, caller, read, teams_for=_teams_for, day=_day, respond=_etag_response)  # GET /v1/carbon
    from gpufinops.interfaces import api_unit_costs

    helpers = {"day": _day, "teams_for": _teams_for, "etag_response": _etag_response}
    api_unit_costs.register(app, caller, read, cfg.unit_costs, helpers)
    return app


COST_FIELDS = ("billed_cost", "effective_cost", "gpu_cost", "allocated_gpu_cost", "unallocated_gpu_cost", "tagged_cost")


def _cost_rows(con, teams: list[str] | None, start: date | None, end: date | None) -> list[dict[str, Any]]:
    """Daily cost rows as the teams carry them (shared GPUs by allocation: warehouse/allocation_queries.py);
    ``to`` is inclusive (the whole day), money as numbers."""
    from gpufinops.warehouse import allocation_queries

    begin = datetime.combine(start, time(), UTC) if start else None
    stop = datetime.combine(end + timedelta(days=1), time(), UTC) if end else None
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


def serve(cfg: Config, *, host: str = "127.0.0.1", port: int = 8000, insecure_demo: bool = False) -> int:
    """Run the API until interrupted (`gpufinops api`)."""
    import sys

    import uvicorn

    app = create_app(cfg, insecure_demo=insecure_demo)
    if insecure_demo and not load_tokens(cfg):
        print(f"WARNING: {INSECURE_WARNING}", file=sys.stderr)
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(f"WARNING: and it listens on {host}, beyond this machine.", file=sys.stderr)
    uvicorn.run(app, host=host, port=port, log_level="info", server_header=False)
    return 0
