"""What every route of the HTTP API shares (interfaces/api.py assembles them): the caller's scope from
its bearer token, a read-only warehouse connection per request, the date and team parameters, and the
one way a GET answers (labelled JSON with an ``ETag``, 304 on ``If-None-Match``).

Each route group lives in its own module (``api_recommendations``, ``api_costs``, ``api_alerts``,
``api_carbon``, ``api_unit_costs``) with a ``register(app, routes)`` that adds its routes to the app
using the :class:`Routes` given here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import Depends, HTTPException, Query, Request
from fastapi.responses import Response

from gpufinops.warehouse.scope import Scope

if TYPE_CHECKING:
    from gpufinops.jobs.config import Config

FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2199, 12, 31)  # the dates a query parameter may name


@dataclass(frozen=True)
class ApiToken:
    digest: bytes  # sha256 of the token value: compared in constant time, the value itself is not kept
    scope: Scope


@dataclass(frozen=True)
class Routes:
    """What a route module needs from the app: the config, the ``caller`` dependency (the request's
    scope) and ``asked`` (its scope with the team and days it asked for), ``read`` (runs a function on a read-only connection, 503 while the warehouse is busy or
    missing) and how long a decision waits for the warehouse."""

    cfg: Config
    caller: Callable[[Request], Scope]
    read: Callable[[Callable[[Any], Any]], Any]
    write_retry_s: float

    @property
    def asked(self) -> Callable[..., Asked]:
        """The dependency of a route that reads a window of days for teams (``team``, ``from``, ``to``)."""
        return asked_of(self.caller)


@dataclass(frozen=True)
class Asked:
    """What a caller asked of a route that reads a window of days for teams: its scope, ``team`` and the
    ``from`` / ``to`` days as given (``days()`` parses them, after the route has checked the scope)."""

    scope: Scope
    team: str | None
    from_: str | None
    to: str | None

    def teams(self) -> list[str] | None:
        return teams_for(self.scope, self.team)

    def cost_teams(self, what: str) -> list[str] | None:
        return cost_teams(self.scope, self.team, what)

    def days(self) -> tuple[date | None, date | None]:
        return days(self.from_, self.to)


def asked_of(caller: Callable[[Request], Scope]) -> Callable[..., Asked]:
    """The dependency of a route that takes ``team``, ``from`` and ``to`` (with the caller's scope)."""

    def asked(
        team: str | None = None,
        from_: str | None = Query(None, alias="from"),
        to: str | None = None,
        scope: Scope = Depends(caller),
    ) -> Asked:
        return Asked(scope, team, from_, to)

    return asked


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


def caller_of(tokens: list[ApiToken], open_scope: Scope | None) -> Callable[[Request], Scope]:
    """The dependency every route takes: the scope of the request's bearer token (401 without a valid
    one), or ``open_scope`` for every caller (``--insecure-demo``)."""

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

    return caller


def reader_of(cfg: Config, read_retry_s: float) -> Callable[[Callable[[Any], Any]], Any]:
    """``read(fn)``: ``fn`` on a read-only connection, retried up to ``read_retry_s`` while a job writes."""
    from gpufinops.warehouse import db

    def read(fn):
        try:
            with db.reader(cfg.warehouse_path, retry_seconds=read_retry_s) as con:
                return fn(con)
        except db.WarehouseBusy:
            raise HTTPException(503, detail="warehouse busy, retry", headers={"Retry-After": "2"}) from None
        except FileNotFoundError:
            raise HTTPException(503, detail="warehouse not available yet") from None

    return read


def labelled(payload: Any) -> Any:
    """Every object of a response with a ``*_label`` beside each code it holds (kernel/labels.py;
    additive: the codes stay as they are)."""
    from gpufinops.kernel.labels import with_labels

    if isinstance(payload, list):
        return [labelled(item) for item in payload]
    return with_labels(payload) if isinstance(payload, dict) else payload


def etag_response(request: Request, payload: Any) -> Response:
    body = json.dumps(labelled(payload), separators=(",", ":"), allow_nan=False).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    wanted = request.headers.get("if-none-match", "")
    tags = {t.strip().removeprefix("W/") for t in wanted.split(",") if t.strip()}
    if etag in tags or "*" in tags:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def day(text: str | None, name: str) -> date | None:
    if text is None:
        return None
    try:
        parsed = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise HTTPException(400, detail=f"{name}: not a date: {text[:40]!r} (expected YYYY-MM-DD)")
    if not FIRST_DAY <= parsed <= LAST_DAY:
        raise HTTPException(400, detail=f"{name}: {text} is outside {FIRST_DAY} … {LAST_DAY}")
    return parsed


def days(from_: str | None, to: str | None) -> tuple[date | None, date | None]:
    """The ``from`` and ``to`` parameters as days (``to`` before ``from`` is 400)."""
    start, end = day(from_, "from"), day(to, "to")
    if start and end and end < start:
        raise HTTPException(400, detail="to: before from")
    return start, end


def teams_for(scope: Scope, team: str | None) -> list[str] | None:
    """The team filter for a request: an explicit team outside the scope is forbidden."""
    if team is not None:
        if not scope.allows(team):
            raise HTTPException(403, detail=f"this token may not see team {team!r}")
        return [team]
    return scope.team_filter


def refuse_scheduler(scope: Scope, what: str) -> None:
    """403 for a token that may not see costs (a scheduler's) on a route that reads ``what``."""
    if not scope.sees_costs:
        raise HTTPException(403, detail=f"a scheduler token may not read {what}")


def cost_teams(scope: Scope, team: str | None, what: str) -> list[str] | None:
    """The team filter of a route that reads ``what``: ``refuse_scheduler``, then ``teams_for``."""
    refuse_scheduler(scope, what)
    return teams_for(scope, team)


def utc_bounds(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    """Days as [begin, stop) UTC times: ``end`` inclusive (the whole day), None left open."""
    begin = datetime.combine(start, time(), UTC) if start else None
    stop = datetime.combine(end + timedelta(days=1), time(), UTC) if end else None
    return begin, stop
