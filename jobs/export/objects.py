"""Stored recommendations as the contract's JSON objects (docs/models.md, *The recommendation object*).

The API, every export and the webhook hand out the same objects: ``current``/``proposed``/
``evidence`` parsed from their JSON columns, money as JSON numbers, ``created_at`` ISO-8601 UTC.
The rows come from the one read model (``warehouse.queries.RECOMMENDATION_VIEW``): ``status`` is the
stored one and ``decision`` the latest decision recorded on the finding (``{"decision", "reason",
"actor", "decided_at"}``), or null when nobody decided. ``gpufinops recommend`` prints these objects too.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl

FIELDS = (
    "id",
    "kind",
    "team",
    "provider",
    "resource_id",
    "workload",
    "current",
    "proposed",
    "monthly_savings_usd",
    "confidence",
    "risk",
    "evidence",
    "created_at",
    "status",
    "plan",
    "plan_id",
    "decision",
)
JSON_FIELDS = ("current", "proposed", "evidence")
STATUSES = ("open", "accepted", "dismissed", "applied")


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def to_object(row: dict[str, Any]) -> dict[str, Any]:
    """One warehouse row → the contract's object (a malformed JSON column becomes an empty object
    rather than failing the whole feed)."""
    out: dict[str, Any] = {}
    for name in FIELDS:
        if name == "decision":
            out[name] = decision_of(row)
            continue
        value = row.get(name)
        if name in JSON_FIELDS:
            try:
                value = json.loads(value) if isinstance(value, str) else (value or {})
            except json.JSONDecodeError:
                value = {}
        out[name] = _plain(value)
    return out


def decision_of(row: dict[str, Any]) -> dict[str, Any] | None:
    """The latest decision on a finding as the object's ``decision`` (None when nobody decided)."""
    if not row.get("decision"):
        return None
    return {
        "decision": row["decision"],
        "reason": row.get("decision_reason") or "",
        "actor": row.get("decided_by"),
        "decided_at": _plain(row.get("decided_at")),
    }


def from_frame(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [to_object(row) for row in frame.iter_rows(named=True)]


def load(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    kind: str | None = None,
    status: str | None = None,
    ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The stored recommendations matching the filters, largest savings first."""
    from gpufinops.warehouse import queries

    return from_frame(queries.recommendations(con, kind=kind, team=team, status=status, ids=ids))


def of_run(con: duckdb.DuckDBPyConnection, recs: list[Any]) -> list[dict[str, Any]]:
    """The findings a model run just produced and stored, as the store now holds them (its status and
    decision, not the run's fresh ``open``), in the run's order: what ``recommend`` and the demo print."""
    stored = {o["id"]: o for o in load(con, ids=[r.id for r in recs])}
    return [stored[r.id] for r in recs if r.id in stored]
