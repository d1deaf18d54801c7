"""Alerts: what the rules found, and how the open alerts change when the rules run again.

Each rule (models/alert_rules.py) is a pure function ``(con, settings, now) -> RuleOutcome`` over the
warehouse: the alerts that hold now, notes on what it could not judge (and why), which of its old
alerts are outside the window it looked at (expired rather than resolved), and a sentence per scope
saying where things stand (what a "resolved" message quotes). An alert is identified by
(rule, scope, period, threshold): a budget's 75 % of 2026-10, an anomaly's team/provider and day, an
idle resource's run, a stale source's episode. :func:`plan` compares the open alerts with a fresh
evaluation: new ones open, vanished ones resolve (or expire / are superseded, silently), and it is
the delivery ledger (warehouse/alerts_store.py) that makes each open and each resolution a
notification exactly once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from gpufinops.models import alert_rules
from gpufinops.models.alert_records import ALERT_RULES, RULES, SEVERITIES, STATUSES, Alert, AlertSettings, RuleOutcome

__all__ = [
    "ALERT_RULES",
    "RULES",
    "SEVERITIES",
    "STATUSES",
    "Alert",
    "AlertSettings",
    "Plan",
    "RuleOutcome",
    "evaluate",
    "plan",
]


@dataclass
class Plan:
    opened: list[Alert] = field(default_factory=list)  # new, or open again after a resolution
    refreshed: list[Alert] = field(default_factory=list)  # still open: figures updated
    closed: list[tuple[str, str, str]] = field(default_factory=list)  # (alert_id, status, resolution)


def evaluate(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime | None = None) -> list[RuleOutcome]:
    """Every enabled rule over the warehouse, as of ``now`` (default: the clock)."""
    now = now or datetime.now(UTC)
    outcomes = []
    for rule in settings.rules:
        started = time.perf_counter()
        outcome = alert_rules.RULE_FUNCTIONS[rule](con, settings, now)
        outcome.seconds = round(time.perf_counter() - started, 3)
        outcomes.append(outcome)
    return outcomes


def plan(rows: list[dict[str, Any]], outcomes: list[RuleOutcome]) -> Plan:
    """What changes, given the stored alerts (``rows``: alert_id, rule, scope, period, threshold,
    status) and a fresh evaluation. An alert whose rule could not run is left alone; one the rule no
    longer finds is resolved, unless it lies outside the window the rule looked at (expired: its
    period is over) or it is a forecast the actual spend has now reached (superseded)."""
    result = Plan()
    stored = {r["alert_id"]: r for r in rows}
    found: dict[str, Alert] = {}
    decided: dict[str, RuleOutcome] = {}
    for outcome in outcomes:
        if not outcome.complete:
            continue
        for rule in outcome.covers:
            decided[rule] = outcome
        for alert in outcome.alerts:
            found[alert.id] = alert
    for alert_id, alert in found.items():
        row = stored.get(alert_id)
        (result.refreshed if row is not None and row["status"] == "open" else result.opened).append(alert)
    for alert_id, row in stored.items():
        deciding = decided.get(row["rule"])
        if row["status"] != "open" or alert_id in found or deciding is None:
            continue
        if deciding.live is not None and not deciding.live(row["rule"], row["scope"], row["period"]):
            result.closed.append((alert_id, "expired", "its period is over"))
        elif (
            row["rule"] == "budget_forecast"
            and Alert("budget", row["scope"], row["period"], row["threshold"], "info", "", "").id in found
        ):
            result.closed.append((alert_id, "superseded", "the actual spend reached the threshold"))
        else:
            now_text = deciding.context.get(row["scope"])
            result.closed.append(
                (alert_id, "resolved", "the condition no longer holds" + (f": {now_text}" if now_text else ""))
            )
    return result
