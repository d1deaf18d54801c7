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

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import duckdb

from models.budgets import Budget

RULES = ("budget", "anomaly", "idle_burn", "stale_data")        # what [alerts] rules = [...] enables
ALERT_RULES = ("budget", "budget_forecast", "anomaly", "idle_burn", "stale_data")   # what an alert's rule says
SEVERITIES = ("info", "warning", "critical")
STATUSES = ("open", "resolved", "expired", "superseded")


@dataclass(frozen=True)
class AlertSettings:
    """The rules' parameters (``[alerts]``, validated by jobs/alerts/settings.py) and the budgets."""
    budgets: tuple[Budget, ...] = ()
    rules: tuple[str, ...] = RULES
    forecast_min_days: int = 7              # fewer days of cost history: the forecast rule withholds
    anomaly_days: int = 3                   # alert on anomalies among the last N complete days
    anomaly_directions: tuple[str, ...] = ("spike",)
    anomaly_min_usd: float = 25.0           # models.forecast: at least this far from the expectation
    idle_util_pct: float = 5.0              # an hour is idle when every GPU's peak is below this
    idle_min_hours: int = 6                 # a resource idle this long …
    idle_min_cost_usd: Decimal = Decimal("50")   # … that cost at least this much is burning money
    idle_max_lag_hours: int = 2             # its last idle hour within this of the newest metrics


@dataclass(frozen=True)
class Alert:
    rule: str                               # ALERT_RULES
    scope: str                              # a budget's name, team/provider, a resource, a source
    period: str                             # 2026-10, 2026-Q4, a day, an idle run's first hour, …
    threshold: str                          # 0.75, spike, 6h/$50, …
    severity: str
    title: str
    summary: str                            # one sentence with the figures
    teams: tuple[str, ...] = ()             # who it concerns; () = no team (finance only)
    value_usd: Decimal | None = None
    limit_usd: Decimal | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        text = "|".join((self.rule, self.scope, self.period, self.threshold))
        return f"{self.rule}-{hashlib.sha1(text.encode()).hexdigest()[:16]}"

    @property
    def group(self) -> str:
        """Alerts of one group opened (or resolved) in the same run go out as one notification:
        a budget's thresholds and forecast of one period; else one rule's alerts of the same teams."""
        if self.rule in ("budget", "budget_forecast"):
            return f"budget|{self.scope}|{self.period}"
        return f"{self.rule}|{','.join(self.teams)}"


@dataclass
class RuleOutcome:
    rule: str                               # RULES
    covers: tuple[str, ...]                 # the alert rules it decides (budget: budget, budget_forecast)
    alerts: list[Alert] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # what it withheld, and the missing fact
    complete: bool = True                   # False: it could not run; its open alerts stay as they are
    live: Callable[[str, str, str], bool] | None = None   # (rule, scope, period) still in the window?
    context: dict[str, str] = field(default_factory=dict)   # scope -> where it stands now
    seconds: float = 0.0


@dataclass
class Plan:
    opened: list[Alert] = field(default_factory=list)      # new, or open again after a resolution
    refreshed: list[Alert] = field(default_factory=list)   # still open: figures updated
    closed: list[tuple[str, str, str]] = field(default_factory=list)   # (alert_id, status, resolution)


def evaluate(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime | None = None
             ) -> list[RuleOutcome]:
    """Every enabled rule over the warehouse, as of ``now`` (default: the clock)."""
    from models import alert_rules

    now = now or datetime.now(timezone.utc)
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
        outcome = decided.get(row["rule"])
        if row["status"] != "open" or alert_id in found or outcome is None:
            continue
        if outcome.live is not None and not outcome.live(row["rule"], row["scope"], row["period"]):
            result.closed.append((alert_id, "expired", "its period is over"))
        elif row["rule"] == "budget_forecast" and Alert("budget", row["scope"], row["period"], row["threshold"],
                                                        "info", "", "").id in found:
            result.closed.append((alert_id, "superseded", "the actual spend reached the threshold"))
        else:
            now_text = outcome.context.get(row["scope"])
            result.closed.append((alert_id, "resolved", "the condition no longer holds"
                                  + (f": {now_text}" if now_text else "")))
    return result
