"""The recommendation store: the findings a model run produced (`store_recommendations`) and the decisions
people take on them (`record_decision`); the writes that are not ingest loads."""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Iterable
from typing import Any

import duckdb

from gpufinops.warehouse.db import rollback
from gpufinops.warehouse.recommendation_read import JSON_FIELDS, STORED_COLUMNS


def evidence_fingerprint(rec: dict[str, Any]) -> str:
    """What a decision was made on: the proposal (without its prices) and the order of magnitude of
    the savings. A dismissed finding reopens when this changes (the proposal moved, or the savings
    at least doubled or halved), not on every run's small drift in the numbers."""
    proposed = {k: v for k, v in (rec.get("proposed") or {}).items() if "cost" not in k and "usd" not in k}
    savings = float(rec.get("monthly_savings_usd") or 0)
    bucket = math.floor(math.log2(savings)) if savings >= 1 else 0
    text = json.dumps(
        [rec.get("kind"), rec.get("resource_id"), rec.get("workload"), proposed, bucket], sort_keys=True, default=str
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def store_recommendations(
    con: duckdb.DuckDBPyConnection,
    recs: Iterable[Any],
    kinds: Iterable[str],
    model_versions: dict[str, str] | None = None,
    *,
    withheld: Iterable[Any] | None = None,
    comparison: Iterable[Any] | None = None,
) -> int:
    """Replace the open recommendations of ``kinds`` with this run's, in one transaction.

    A finding someone already decided on keeps its status (the id is stable across runs) and is
    refreshed in place; a dismissed one reopens when its evidence fingerprint changes. An open
    finding the models no longer make disappears. ``withheld`` replaces the kinds' withheld findings;
    ``comparison`` (on-prem verdicts, facts) replaces the on-prem comparison when given.
    """
    rows = [{**r.to_dict(), "monthly_savings_usd": r.monthly_savings_usd} for r in recs]  # Decimal kept exact
    versions = model_versions or {}
    kinds = list(kinds)
    con.execute("BEGIN TRANSACTION")
    try:
        decided = {
            rid: (status, fp)
            for rid, status, fp in con.execute(
                "SELECT id, status, evidence_hash FROM recommendations WHERE status <> 'open'"
            ).fetchall()
        }
        con.execute(
            "DELETE FROM recommendations WHERE kind IN (SELECT unnest(?::VARCHAR[])) AND status = 'open'", [kinds]
        )
        con.execute("DELETE FROM withheld_findings WHERE kind IN (SELECT unnest(?::VARCHAR[]))", [kinds])
        for w in withheld or ():
            con.execute(
                "INSERT INTO withheld_findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
                [
                    w.kind,
                    w.resource_id,
                    w.team,
                    w.provider,
                    w.reason,
                    w.detail,
                    w.missing,
                    w.source_hint,
                    versions.get(w.kind),
                ],
            )
        if comparison is not None:
            _store_comparison(con, comparison, versions.get("onprem_vs_cloud"))
        for row in rows:
            fingerprint = evidence_fingerprint(row)
            status, old_fp = decided.get(row["id"], ("open", None))
            if status == "dismissed" and old_fp is not None and old_fp != fingerprint:
                status = "open"  # the evidence changed since it was dismissed: ask again
            if row["id"] in decided:
                con.execute(
                    "UPDATE recommendations SET monthly_savings_usd = ?, confidence = ?, evidence = ?, "
                    "current = ?, proposed = ?, risk = ?, status = ?, model_version = ?, "
                    "evidence_hash = ?, plan = ?, plan_id = ? WHERE id = ?",
                    [
                        row["monthly_savings_usd"],
                        row["confidence"],
                        json.dumps(row["evidence"]),
                        json.dumps(row["current"]),
                        json.dumps(row["proposed"]),
                        row["risk"],
                        status,
                        versions.get(row["kind"]),
                        fingerprint,
                        row.get("plan"),
                        row.get("plan_id"),
                        row["id"],
                    ],
                )
                continue
            con.execute(
                f"INSERT INTO recommendations ({', '.join(STORED_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(STORED_COLUMNS))})",
                _stored_values(row, status="open", model_version=versions.get(row["kind"]), evidence_hash=fingerprint),
            )
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return len(rows)


def _stored_values(row: dict[str, Any], **bookkeeping: Any) -> list[Any]:
    """A finding's row as the table's columns (the read model's ``STORED_COLUMNS``), its JSON parts as text."""
    stored = {**row, **bookkeeping}
    return [json.dumps(stored[c]) if c in JSON_FIELDS else stored.get(c) for c in STORED_COLUMNS]


def _store_comparison(con: duckdb.DuckDBPyConnection, comparison: Iterable[Any], version: str | None) -> None:
    con.execute("DELETE FROM onprem_comparison")
    for rec in comparison:
        row = rec.to_dict()
        con.execute(
            "INSERT INTO onprem_comparison VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                row["id"],
                row["team"],
                row["resource_id"],
                row["workload"],
                row["evidence"].get("pattern"),
                row["proposed"].get("action"),
                json.dumps(row["current"]),
                json.dumps(row["proposed"]),
                rec.monthly_savings_usd,
                row["confidence"],
                json.dumps(row["evidence"]),
                version,
                row["created_at"],
            ],
        )


DECISION_STATUS = {"accept": "accepted", "dismiss": "dismissed", "apply": "applied", "reopen": "open"}


class UnknownRecommendation(LookupError):
    pass


class WriteConflict(RuntimeError):
    """A decision kept colliding with other writers of the same rows for the whole retry budget."""


DECISION_ATTEMPTS = 8  # DuckDB's optimistic concurrency: a conflicting transaction is rolled back whole


def record_decision(
    con: duckdb.DuckDBPyConnection,
    recommendation_id: str,
    decision: str,
    reason: str | None,
    actor: str,
    *,
    teams: list[str] | None = None,
    attempts: int = DECISION_ATTEMPTS,
) -> str:
    """Record who decided what on a recommendation, and set its status, in one transaction.

    ``teams`` (None = every team) scopes the caller: a recommendation outside it is reported as
    unknown, exactly like one that does not exist, so a scoped caller learns nothing of other teams.
    A write conflict with another connection (``Conflict on update``) rolls the whole transaction
    back, so it is retried, up to ``attempts`` times with a jittered backoff, then WriteConflict:
    each decision is recorded once or not at all. Returns the new status.
    """
    if decision not in DECISION_STATUS:
        raise ValueError(f"decision must be one of {', '.join(DECISION_STATUS)}, not {decision!r}")
    status = DECISION_STATUS[decision]
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    attempt = 0
    while True:
        try:
            _decide_once(con, recommendation_id, decision, status, reason, actor, teams)
            return status
        except duckdb.TransactionException as exc:
            attempt += 1
            if attempt >= attempts:
                raise WriteConflict(
                    f"recommendation {recommendation_id!r}: still in conflict with other writers after "
                    f"{attempts} attempts ({str(exc).splitlines()[0]})"
                ) from exc
            time.sleep(random.uniform(0, min(0.01 * 2**attempt, 0.5)))  # full jitter, capped


def _decide_once(
    con: duckdb.DuckDBPyConnection,
    recommendation_id: str,
    decision: str,
    status: str,
    reason: str | None,
    actor: str,
    teams: list[str] | None,
) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        found = con.execute("SELECT team FROM recommendations WHERE id = ?", [recommendation_id]).fetchall()
        if not found or (teams is not None and found[0][0] not in teams):
            raise UnknownRecommendation(f"no recommendation {recommendation_id!r}")
        con.execute("UPDATE recommendations SET status = ? WHERE id = ?", [status, recommendation_id])
        con.execute(
            "INSERT INTO decisions VALUES (?, ?, ?, ?, now())", [recommendation_id, decision, reason or "", actor]
        )
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
