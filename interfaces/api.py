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
import logging
import os
from collections.abc import Callable, Mapping

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse

from gpufinops.interfaces import (
    api_alerts,
    api_carbon,
    api_costs,
    api_coverage,
    api_enforcement,
    api_errors,
    api_recommendations,
    api_unit_costs,
)
from gpufinops.interfaces.api_http import ApiToken, Routes, caller_of, reader_of
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.warehouse.scope import Scope

log = logging.getLogger("gpufinops.api")

INSECURE_WARNING = (
    "gpufinops api: --insecure-demo: NO AUTHENTICATION. Every caller gets finance scope "
    "(every team's costs and recommendations, and may decide on them). Demo use only."
)


MIN_TOKEN_LENGTH = 16


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


def create_app(
    cfg: Config,
    *,
    insecure_demo: bool = False,
    environ: Mapping[str, str] | None = None,
    read_retry_s: float = 5.0,
    write_retry_s: float = 10.0,
) -> FastAPI:
    """The application; refuses (ConfigError) without tokens unless ``insecure_demo``. While a job
    holds the warehouse, reads wait up to ``read_retry_s`` and decisions ``write_retry_s``, then 503.
    Each route group registers its own routes (``ROUTE_GROUPS``, in the order they are served)."""
    tokens = load_tokens(cfg, environ)
    open_scope = _open_scope(tokens, insecure_demo)
    app = FastAPI(title="gpufinops", version="1", docs_url=None, redoc_url=None)
    routes = Routes(cfg, caller_of(tokens, open_scope), reader_of(cfg, read_retry_s), write_retry_s)
    for register in ROUTE_GROUPS:
        register(app, routes)
    api_errors.register(app)  # hostile arguments: a short sentence, no traceback
    return app


def _open_scope(tokens: list[ApiToken], insecure_demo: bool) -> Scope | None:
    """Finance scope for every caller (``--insecure-demo`` without tokens), else None; no tokens and no
    ``insecure_demo`` is a config error."""
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
    return open_scope


def _healthz(app: FastAPI, routes: Routes) -> None:
    @app.get("/healthz")
    def healthz() -> JSONResponse:
        try:
            version = routes.read(lambda con: con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0])
        except HTTPException as exc:
            return JSONResponse({"status": "unavailable", "detail": exc.detail}, status_code=503)
        return JSONResponse({"status": "ok", "schema_version": version})


ROUTE_GROUPS: tuple[Callable[[FastAPI, Routes], None], ...] = (
    _healthz,
    api_recommendations.register,  # GET /v1/recommendations, GET /v1/savings, POST …/decision
    api_costs.register,  # GET /v1/costs/daily
    api_costs.register_totals,  # GET /v1/costs
    api_alerts.register,  # GET /v1/alerts
    api_carbon.register,  # GET /v1/carbon
    api_unit_costs.register,  # GET /v1/unit-costs
    api_enforcement.register,  # GET /v1/enforcement
    api_coverage.register,  # GET /v1/coverage
)


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
