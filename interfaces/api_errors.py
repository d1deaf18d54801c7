"""How the HTTP API answers hostile arguments: one short sentence, never the argument whole, never a
traceback in the server's log.

FastAPI's own validation error echoes every offending input (a 1 MB ``team`` comes back whole) and an
``HTTPException`` detail may quote a value; an unexpected exception prints a traceback into uvicorn's log.
Every answer here passes through the one funnel (``ingest.core.scrub.brief``): the method and path, the
parameter, the reason and the value, escaped and cut to 200 characters.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from gpufinops.ingest.core import scrub

log = logging.getLogger("gpufinops.api")


def _where(request: Request) -> str:
    return f"api: {request.method} {request.url.path}"


def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    first = (exc.errors() or [{}])[0]
    name = ".".join(str(part) for part in first.get("loc", ()) if part not in ("query", "body", "path"))
    value = first.get("input")
    shown = f" (got {value!r})" if isinstance(value, (str, int, float)) else ""
    sentence = scrub.brief(f"{_where(request)}: {name or 'request'}: {first.get('msg', 'invalid')}{shown}")
    return JSONResponse({"detail": sentence}, status_code=422)


def _refused(request: Request, exc: HTTPException) -> JSONResponse:
    # a route's own refusal: its where and why cut as every sentence is, the choices it lists whole (the values
    # it quotes are already bounded by ``refuse_hostile_parameters``)
    detail = exc.detail if not isinstance(exc.detail, str) else scrub.brief_keeping_remedy(exc.detail)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))


def _failed(request: Request, exc: Exception) -> JSONResponse:
    sentence = scrub.brief(f"{_where(request)}: internal error: {type(exc).__name__}: {exc}")
    log.error("%s", sentence)  # one line; the traceback only at debug level
    log.debug("traceback of %s", sentence, exc_info=exc)
    return JSONResponse({"detail": sentence}, status_code=500)


LONGEST_VALUE = 256  # a query parameter: a team, a kind, a date, a status (none is longer)


def _hostile(request: Request) -> str | None:
    """What is wrong with a query parameter no route could take (a control character, 20 kB), if anything."""
    for name, value in request.query_params.multi_items():
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            return f"{_where(request)}: {name}: a value holding a control character: {value!r}"
        if len(value) > LONGEST_VALUE:
            return (
                f"{_where(request)}: {name}: a value of {len(value):,} characters (at most {LONGEST_VALUE}): {value!r}"
            )
    return None


def register(app: FastAPI) -> None:
    @app.middleware("http")
    async def refuse_hostile_parameters(request: Request, call_next: Any) -> Any:
        said = _hostile(request)
        if said is not None:
            return JSONResponse({"detail": scrub.brief(said)}, status_code=422)
        return await call_next(request)

    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _refused)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _failed)
