"""The one read model of a recommendation (docs/models.md, *The recommendation object*).

Beside the store that writes findings (``warehouse/recommendation_store.py``), this module says once what a
stored recommendation is and how every surface reads it:

* ``STORED_COLUMNS``: the ``recommendations`` table's columns, in the order the store writes them;
* ``VIEW``: the stored row joined with the latest decision recorded on it (``decision``, ``decision_reason``,
  ``decided_by``, ``decided_at``; NULL when nobody decided). Every query that hands recommendations to a
  surface reads this view, never the bare table, so ``status`` is the store's (a decision sets it, a model run
  keeps it);
* ``FIELDS``: the contract's object, the stored columns without the store's bookkeeping (``INTERNAL``) and
  with ``decision``, in that order;
* ``frame`` (the dashboard, the report: a polars frame of the view) and ``objects`` / ``load`` / ``of_run``
  (the API, MCP, ``recommend``, the webhook, the exports: the contract's JSON objects, ``current`` /
  ``proposed`` / ``evidence`` parsed, money as JSON numbers, ``created_at`` ISO-8601 UTC).

``models.recommendation.Recommendation.from_object`` is the inverse of an object; its fields are ``FIELDS``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import polars as pl

STORED_COLUMNS = (
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
    "model_version",
    "evidence_hash",
    "plan",
    "plan_id",
)
INTERNAL = ("model_version", "evidence_hash")  # the store's bookkeeping: what made a finding, what it was decided on
FIELDS = (*(c for c in STORED_COLUMNS if c not in INTERNAL), "decision")
JSON_FIELDS = ("current", "proposed", "evidence")
STATUSES = ("open", "accepted", "dismissed", "applied")

VIEW = """(
    SELECT r.*, d.decision, d.reason AS decision_reason, d.actor AS decided_by, d.decided_at
    FROM recommendations r
    LEFT JOIN (
        SELECT recommendation_id, decision, reason, actor, decided_at,
               row_number() OVER (PARTITION BY recommendation_id ORDER BY decided_at DESC, decision) AS newest
        FROM decisions) d ON d.recommendation_id = r.id AND d.newest = 1
)"""


def frame(
    con: duckdb.DuckDBPyConnection,
    *,
    kind: str | None = None,
    team: str | list[str] | None = None,
    status: str | None = None,
    ids: list[str] | None = None,
) -> pl.DataFrame:
    """Stored recommendations through :data:`VIEW` (status and latest decision), largest savings first;
    ``ids`` keeps only those (e.g. the findings one model run produced)."""
    # imported here: the query package imports this module for VIEW
    from gpufinops.warehouse.queries import fragments

    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    if kind:
        clauses.append("kind = ?")
        params.append(kind)
    if status:
        clauses.append("status = ?")
        params.append(status)
    if ids is not None:
        clauses.append("id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(ids))
    where_team, team_params = fragments.filters(team, None, None, team_col="team")
    return fragments.frame(
        con,
        f"""
        SELECT * FROM {VIEW} WHERE {" AND ".join(clauses)} AND {where_team}
        ORDER BY monthly_savings_usd DESC, id""",
        params + team_params,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def to_object(row: dict[str, Any]) -> dict[str, Any]:
    """One row of :data:`VIEW` → the contract's object (a malformed JSON column becomes an empty object
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


def objects(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """A frame of :data:`VIEW` rows as the contract's objects, in its order."""
    return [to_object(row) for row in rows.iter_rows(named=True)]


def load(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    kind: str | None = None,
    status: str | None = None,
    ids: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The stored recommendations matching the filters as objects, largest savings first."""
    return objects(frame(con, kind=kind, team=team, status=status, ids=ids))


def of_run(con: duckdb.DuckDBPyConnection, recs: Iterable[Any]) -> list[dict[str, Any]]:
    """The findings a model run just produced and stored, as the store now holds them (its status and
    decision, not the run's fresh ``open``), in the run's order: what ``recommend`` and the demo print."""
    recs = list(recs)
    stored = {o["id"]: o for o in load(con, ids=[r.id for r in recs])}
    return [stored[r.id] for r in recs if r.id in stored]
