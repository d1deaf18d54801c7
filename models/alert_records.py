"""The alert records: what a rule finds (:class:`Alert`), what one rule's run returns (:class:`RuleOutcome`)
and the rules' settings. Shared by the rules (models/alert_rules.py) and the planner (models/alerts.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb

from gpufinops.models.budgets import Budget
from gpufinops.warehouse import alerts_queries

RULES = (
    "budget",
    "anomaly",
    "idle_burn",
    "stale_data",
    "budget_enforcement",
    "stalled_job",
)  # what [alerts] rules = [...] enables
ALERT_RULES = (
    "budget",
    "budget_forecast",
    "anomaly",
    "idle_burn",
    "stale_data",
    "budget_enforcement",
    "stalled_job",
)  # what an alert's rule says
SEVERITIES = ("info", "warning", "critical")
STATUSES = ("open", "resolved", "expired", "superseded")


@dataclass(frozen=True)
class AlertSettings:
    """The rules' parameters (``[alerts]``, validated by jobs/alerts/settings.py) and the budgets."""

    budgets: tuple[Budget, ...] = ()
    rules: tuple[str, ...] = RULES
    forecast_min_days: int = 7  # fewer days of cost history: the forecast rule withholds
    anomaly_days: int = 3  # alert on anomalies among the last N complete days
    anomaly_directions: tuple[str, ...] = ("spike",)
    anomaly_min_usd: float = 25.0  # models.forecast: at least this far from the expectation
    idle_util_pct: float = 5.0  # an hour is idle when every GPU's peak is below this
    idle_min_hours: int = 6  # a resource idle this long …
    idle_min_cost_usd: Decimal = Decimal("50")  # … that cost at least this much is burning money
    idle_max_lag_hours: int = 2  # its last idle hour within this of the newest metrics
    enforce_warn_hours: float = 24.0  # alert this long before an enforced budget's money runs out


@dataclass(frozen=True)
class Alert:
    rule: str  # ALERT_RULES
    scope: str  # a budget's name, team/provider, a resource, a source
    period: str  # 2026-10, 2026-Q4, a day, an idle run's first hour, …
    threshold: str  # 0.75, spike, 6h/$50, …
    severity: str
    title: str
    summary: str  # one sentence with the figures
    teams: tuple[str, ...] = ()  # who it concerns; () = no team (finance only)
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
    rule: str  # RULES
    covers: tuple[str, ...]  # the alert rules it decides (budget: budget, budget_forecast)
    alerts: list[Alert] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what it withheld, and the missing fact
    complete: bool = True  # False: it could not run; its open alerts stay as they are
    live: Callable[[str, str, str], bool] | None = None  # (rule, scope, period) still in the window?
    context: dict[str, str] = field(default_factory=dict)  # scope -> where it stands now
    seconds: float = 0.0

    def data_edge(self, con: duckdb.DuckDBPyConnection, now: datetime, missing: str) -> datetime | None:
        """The newest cost data's edge; None without any, the rule then incomplete and ``missing`` noted."""
        edge = alerts_queries.data_edge(con, now=now)
        if edge is None:
            self.complete = False
            self.notes.append(missing)
        return edge
