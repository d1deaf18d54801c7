"""Writes of the alert ledger: the alerts' state and their deliveries, each change in one transaction.

``reconcile`` reads the stored alerts, asks the caller's ``plan`` what changed (models.alerts.plan
over a fresh evaluation) and, in the same transaction, writes the alerts' new state and a
``pending`` row in ``alert_deliveries`` for every (alert, event, channel, target) that has none
yet: a process that dies after the commit leaves the notifications to send, one that dies before
leaves nothing changed, so the next run plans them again. Alerts of one group opened (or resolved)
together share one notification per target (its ``notification_id``). An alert re-opened after a
resolution, or resolved a second time, finds its rows and is not announced again: exactly once
per (rule, scope, period, threshold) and event.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import duckdb

Route = Callable[[tuple[str, ...]], list[tuple[str, str]]]  # teams -> [(channel, target)]


def notification_id(event: str, channel: str, target: str, alert_ids: Iterable[str]) -> str:
    text = "\n".join([event, channel, target, *sorted(alert_ids)])
    return "aln-" + hashlib.sha256(text.encode()).hexdigest()[:24]


def _details(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def reconcile(
    con: duckdb.DuckDBPyConnection,
    plan: Callable[[list[dict]], Any],
    route: Route,
    group_of: Callable[[str, str, str, tuple[str, ...]], str],
    now: datetime,
) -> dict[str, Any]:
    """Apply one evaluation; returns what changed (alert ids per change, notifications planned)."""
    con.execute("BEGIN TRANSACTION")
    try:
        rows = [
            dict(zip(("alert_id", "rule", "scope", "period", "threshold", "status", "teams"), r))
            for r in con.execute(
                "SELECT alert_id, rule, scope, period, threshold, status, teams FROM alerts"
            ).fetchall()
        ]
        changes = plan(rows)
        stored = {r["alert_id"] for r in rows}
        for alert in changes.opened + changes.refreshed:
            _upsert(con, alert, alert.id in stored, now)
        for alert_id, status, resolution in changes.closed:
            con.execute(
                "UPDATE alerts SET status = ?, resolution = ?, closed_at = ?, evaluated_at = ? WHERE alert_id = ?",
                [status, resolution, now, now, alert_id],
            )
            con.execute(
                "UPDATE alert_deliveries SET status = 'cancelled', updated_at = ?, error = ? "
                "WHERE alert_id = ? AND event = 'opened' AND status IN ('pending', 'failed')",
                [now, f"not sent: the alert was {status} first", alert_id],
            )
        opened = _plan_opened(con, changes.opened, route, now)
        by_id = {r["alert_id"]: r for r in rows}
        resolved = [by_id[a] for a, status, _ in changes.closed if status == "resolved"]
        closing = _plan_resolved(con, resolved, group_of, now)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return {
        "opened": [a.id for a in changes.opened],
        "refreshed": [a.id for a in changes.refreshed],
        "closed": changes.closed,
        "notifications": opened + closing,
    }


def _upsert(con: duckdb.DuckDBPyConnection, alert: Any, exists: bool, now: datetime) -> None:
    values = [
        alert.severity,
        list(alert.teams),
        alert.title,
        alert.summary,
        alert.value_usd,
        alert.limit_usd,
        _details(alert.details),
    ]
    if exists:
        con.execute(
            """UPDATE alerts SET severity = ?, teams = ?, title = ?, summary = ?, value_usd = ?, limit_usd = ?,
                              details = ?, status = 'open', resolution = NULL, closed_at = NULL, evaluated_at = ?
                       WHERE alert_id = ?""",
            values + [now, alert.id],
        )
    else:
        con.execute(
            "INSERT INTO alerts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', NULL, ?, ?, NULL)",
            [alert.id, alert.rule, alert.scope, alert.period, alert.threshold] + values + [now, now],
        )


def _existing(con: duckdb.DuckDBPyConnection, alert_ids: list[str], event: str) -> dict[str, set[tuple[str, str, str]]]:
    """alert id -> {(channel, target, status)} of its deliveries of ``event``."""
    found: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    if alert_ids:
        for alert_id, channel, target, status in con.execute(
            "SELECT alert_id, channel, target, status FROM alert_deliveries WHERE event = ? "
            "AND alert_id IN (SELECT unnest(?::VARCHAR[]))",
            [event, alert_ids],
        ).fetchall():
            found[alert_id].add((channel, target, status))
    return found


def _insert(
    con: duckdb.DuckDBPyConnection, groups: dict[tuple[str, str, str], list[str]], event: str, now: datetime
) -> list[str]:
    planned = []
    for (_, channel, target), ids in sorted(groups.items()):
        nid = notification_id(event, channel, target, ids)
        for alert_id in sorted(ids):
            con.execute(
                "INSERT INTO alert_deliveries VALUES (?, ?, ?, ?, ?, 'pending', 0, NULL, NULL, NULL, ?, ?, NULL)",
                [nid, alert_id, event, channel, target, now, now],
            )
        planned.append(nid)
    return planned


def _plan_opened(con: duckdb.DuckDBPyConnection, alerts: list[Any], route: Route, now: datetime) -> list[str]:
    existing = _existing(con, [a.id for a in alerts], "opened")
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for alert in alerts:
        had = {(c, t) for c, t, _ in existing.get(alert.id, ())}
        for channel, target in route(tuple(alert.teams)):
            if (channel, target) not in had:
                groups[(alert.group, channel, target)].append(alert.id)
    return _insert(con, groups, "opened", now)


def _plan_resolved(con: duckdb.DuckDBPyConnection, rows: list[dict], group_of, now: datetime) -> list[str]:
    """A resolution goes to whoever was (or may have been) told of the opening, once."""
    ids = [r["alert_id"] for r in rows]
    told, already = _existing(con, ids, "opened"), _existing(con, ids, "resolved")
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for row in rows:
        done = {(c, t) for c, t, _ in already.get(row["alert_id"], ())}
        group = group_of(row["rule"], row["scope"], row["period"], tuple(row["teams"] or ()))
        for channel, target, status in told.get(row["alert_id"], ()):
            if status in ("sent", "sending") and (channel, target) not in done:
                groups[(group, channel, target)].append(row["alert_id"])
    return _insert(con, groups, "resolved", now)


def mark(
    con: duckdb.DuckDBPyConnection,
    nid: str,
    status: str,
    now: datetime,
    *,
    attempt: bool = False,
    message_id: str | None = None,
    http_status: int | None = None,
    error: str | None = None,
) -> None:
    """Move every row of one notification to ``status`` (one statement: all or none)."""
    con.execute(
        """UPDATE alert_deliveries SET status = ?, attempts = attempts + ?, message_id = coalesce(?, message_id),
                          http_status = coalesce(?, http_status), error = ?, updated_at = ?,
                          sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END
                   WHERE notification_id = ?""",
        [status, 1 if attempt else 0, message_id, http_status, error, now, status, now, nid],
    )
