"""``[[budgets]]`` and ``[alerts]`` (with ``[[alerts.slack]]`` and ``[[alerts.webhooks]]``), validated at
config load: every problem is a ConfigError naming the key (exit 2).

``[dashboard] monthly_budget_usd`` and ``team_budgets`` are aliases: each becomes a monthly budget
(``monthly``, ``team:<team>``) with the default thresholds, unless a ``[[budgets]]`` entry of the
same name exists (that is an error: one budget, one place).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from gpufinops.jobs.config_checks import ConfigError, check_table, validate_cron
from gpufinops.jobs.dashboard_settings import DashboardSettings
from gpufinops.jobs.report.headers import refuse_unsafe
from gpufinops.models import budgets as budgets_mod
from gpufinops.models.alerts import RULES, AlertSettings
from gpufinops.models.budgets import Budget, BudgetScope

BUDGET_KEYS = {"name", "scope", "period", "amount", "thresholds", "forecast"}
SCOPE_KEYS = {"teams", "providers", "gpu_models", "tags"}
ALERTS_KEYS = {
    "rules",
    "email",
    "schedule",
    "slack",
    "webhooks",
    "forecast_min_days",
    "anomaly_days",
    "anomaly_directions",
    "anomaly_min_usd",
    "idle_util_pct",
    "idle_min_hours",
    "idle_min_cost_usd",
    "idle_max_lag_hours",
}
SLACK_KEYS = {"url_env", "name", "teams", "max_attempts", "timeout_s"}
WEBHOOK_KEYS = {"url", "secret_env", "name", "teams", "max_attempts", "timeout_s"}
DEFAULT_SCHEDULE = "*/30 * * * *"


@dataclass(frozen=True)
class Channel:
    kind: str  # slack | webhook
    target: str  # the ledger's name for it (never the secret URL itself)
    teams: tuple[str, ...] | None  # None: every alert
    url: str | None = None  # webhook: the URL (Slack's comes from url_env)
    url_env: str | None = None
    secret_env: str | None = None
    max_attempts: int = 5
    timeout_s: float = 10.0
    key: str = ""  # where it is configured, e.g. alerts.slack[0]


@dataclass(frozen=True)
class AlertConfig:
    settings: AlertSettings = field(default_factory=AlertSettings)
    email: bool = False  # mail [[report.recipients]] through the [report] SMTP settings
    schedule: str = DEFAULT_SCHEDULE  # `serve`: besides after every cost or metrics ingest
    channels: tuple[Channel, ...] = ()


def _number(value: Any, key: str, *, low: float, integer: bool = False, strict: bool = False) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, int if integer else (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
        or value < low
        or (strict and value == low)
    ):
        kind = "a whole number" if integer else "a number"
        raise ConfigError(f"{key}: must be {kind} {'>' if strict else '>='} {low:g}, not {value!r}")
    return value


def _strings(value: Any, key: str, what: str) -> tuple[str, ...]:
    if isinstance(value, str) and value:
        return (value,)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key}: must be a non-empty list of {what}")
    return tuple(value)


def _scope(value: Any, key: str) -> BudgetScope:
    if value is None or value == "all":
        return BudgetScope()
    if not isinstance(value, dict):
        raise ConfigError(f'{key}: must be "all" or a table of {", ".join(sorted(SCOPE_KEYS))}')
    for option in value:
        if option not in SCOPE_KEYS:
            raise ConfigError(f"{key}.{option}: unknown key (allowed: {', '.join(sorted(SCOPE_KEYS))})")
    tags = value.get("tags", {})
    if not isinstance(tags, dict) or ("tags" in value and not tags):
        raise ConfigError(f"{key}.tags: must be a table of tag key = value (or list of values)")
    providers = _strings(value["providers"], f"{key}.providers", "provider codes") if "providers" in value else ()
    return BudgetScope(
        teams=_strings(value["teams"], f"{key}.teams", "team names") if "teams" in value else (),
        providers=tuple(p.lower() for p in providers),
        gpu_models=_strings(value["gpu_models"], f"{key}.gpu_models", "GPU models") if "gpu_models" in value else (),
        tags=tuple((k, _strings(v, f"{key}.tags.{k}", "tag values")) for k, v in tags.items()),
    )


def _budget(index: int, table: Any) -> Budget:
    where = f"budgets[{index}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([[budgets]])")
    for option in table:
        if option not in BUDGET_KEYS:
            raise ConfigError(f"{where}.{option}: unknown key (allowed: {', '.join(sorted(BUDGET_KEYS))})")
    for required in ("name", "amount"):
        if required not in table:
            raise ConfigError(f"{where}.{required}: missing required key")
    name = table["name"]
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}.name: must be a non-empty string")
    amount = _amount(table["amount"], f"{where}.amount")
    period = table.get("period", "month")
    if period not in budgets_mod.PERIODS:
        raise ConfigError(f'{where}.period: must be "month" or "quarter", not {period!r}')
    thresholds = table.get("thresholds", list(budgets_mod.DEFAULT_THRESHOLDS))
    if not isinstance(thresholds, list) or not thresholds:
        raise ConfigError(
            f"{where}.thresholds: must be a non-empty list of shares of the amount, e.g. [0.5, 0.75, 0.9, 1.0]"
        )
    for i, t in enumerate(thresholds):
        _number(t, f"{where}.thresholds[{i}]", low=0, strict=True)
        if t > 10:
            raise ConfigError(
                f"{where}.thresholds[{i}]: {t!r} is a share of the amount (0.75 = 75 %), not a percentage"
            )
    if len(set(thresholds)) != len(thresholds):
        raise ConfigError(f"{where}.thresholds: lists a threshold twice")
    forecast = table.get("forecast", False)
    if not isinstance(forecast, bool):
        raise ConfigError(f"{where}.forecast: must be true or false")
    return Budget(
        name.strip(),
        amount,
        period,
        _scope(table.get("scope"), f"{where}.scope"),
        tuple(sorted(float(t) for t in thresholds)),
        forecast,
    )


def _amount(value: Any, key: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{key}: must be a positive amount in USD, not {value!r}")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ConfigError(f"{key}: must be a positive amount in USD, not {value!r}") from None
    if not amount.is_finite() or amount <= 0:
        raise ConfigError(f"{key}: must be a positive amount in USD, not {value!r}")
    return amount


def parse_budgets(entries: Any, dashboard: DashboardSettings) -> tuple[Budget, ...]:
    """``[[budgets]]`` plus the ``[dashboard]`` aliases (already validated as numbers there)."""
    entries = [] if entries is None else entries
    if not isinstance(entries, list):
        raise ConfigError("budgets: must be an array of tables ([[budgets]])")
    found = [_budget(i, entry) for i, entry in enumerate(entries)]
    aliased = {"monthly_budget_usd": dashboard.monthly_budget_usd, "team_budgets": dashboard.team_budgets}
    aliases = [b for b in budgets_mod.from_dashboard(aliased) if b.amount > 0]
    names: dict[str, str] = {}
    for i, budget in enumerate(found + aliases):
        where = f"budgets[{i}].name" if i < len(found) else budget.origin
        refuse_unsafe(budget.name, where)  # a [dashboard] team_budgets key too
        if budget.name in names:
            raise ConfigError(f"{where}: a budget named {budget.name!r} is already defined by {names[budget.name]}")
        names[budget.name] = where
    return tuple(found + aliases)


def _channel(kind: str, index: int, table: Any) -> Channel:
    where = f"alerts.{'slack' if kind == 'slack' else 'webhooks'}[{index}]"
    allowed = SLACK_KEYS if kind == "slack" else WEBHOOK_KEYS
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    for option in table:
        if option not in allowed:
            raise ConfigError(f"{where}.{option}: unknown key (allowed: {', '.join(sorted(allowed))})")
    env_key = "url_env" if kind == "slack" else "secret_env"
    env = table.get(env_key)
    if not isinstance(env, str) or not env.strip() or any(c in env for c in " =$"):
        raise ConfigError(f"{where}.{env_key}: missing or not an environment variable name")
    url = None
    if kind == "webhook":
        url = table.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise ConfigError(f"{where}.url: missing or not an http(s) URL")
    teams = _strings(table["teams"], f"{where}.teams", "team names") if "teams" in table else None
    name = table.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"{where}.name: must be a non-empty string")
    webhook_name = (
        f"{urlsplit(url).netloc}#{hashlib.sha256(url.encode()).hexdigest()[:12]}" if url is not None else None
    )
    target = name or webhook_name or env  # a Slack channel is named by its variable (never by its secret URL)
    return Channel(
        kind,
        f"{kind}:{target}",
        teams,
        url=url,
        url_env=env if kind == "slack" else None,
        secret_env=env if kind == "webhook" else None,
        max_attempts=int(_number(table.get("max_attempts", 5), f"{where}.max_attempts", low=1, integer=True)),
        timeout_s=float(_number(table.get("timeout_s", 10.0), f"{where}.timeout_s", low=0.1)),
        key=where,
    )


def parse(budget_entries: Any, section: Any, dashboard: DashboardSettings) -> AlertConfig:
    """The whole alerting config: ``[[budgets]]``, ``[alerts]`` (None when absent) and the ``[dashboard]``
    budget aliases."""
    refuse_unsafe(budget_entries, "budgets")  # names become mail subjects and headers: no CR/LF (exit 2)
    refuse_unsafe(section, "alerts")
    budgets = parse_budgets(budget_entries, dashboard)
    configured = section is not None or bool(budget_entries)
    section = check_table({} if section is None else section, "alerts", ALERTS_KEYS)
    values: dict[str, Any] = {}
    if "rules" in section:
        rules = _strings(section["rules"], "alerts.rules", "rule names")
        unknown = [r for r in rules if r not in RULES]
        if unknown:
            raise ConfigError(f"alerts.rules: unknown rule {unknown[0]!r} (known: {', '.join(RULES)})")
        values["rules"] = tuple(dict.fromkeys(rules))
    for key in ("forecast_min_days", "anomaly_days", "idle_min_hours", "idle_max_lag_hours"):
        if key in section:
            values[key] = _number(
                section[key], f"alerts.{key}", low=0 if key == "idle_max_lag_hours" else 1, integer=True
            )
    for key in ("anomaly_min_usd", "idle_util_pct"):
        if key in section:
            values[key] = float(_number(section[key], f"alerts.{key}", low=0))
    if "idle_min_cost_usd" in section:
        values["idle_min_cost_usd"] = _amount(section["idle_min_cost_usd"], "alerts.idle_min_cost_usd")
    if "anomaly_directions" in section:
        directions = _strings(section["anomaly_directions"], "alerts.anomaly_directions", "directions")
        if any(d not in ("spike", "drop") for d in directions):
            raise ConfigError('alerts.anomaly_directions: each must be "spike" or "drop"')
        values["anomaly_directions"] = directions
    # mail is opted into by configuring alerting: a config that only mails the weekly report (or only
    # has the [dashboard] budget keys) does not start sending alerts after an upgrade
    email = section.get("email", configured)
    if not isinstance(email, bool):
        raise ConfigError("alerts.email: must be true or false")
    schedule = section.get("schedule", DEFAULT_SCHEDULE)
    validate_cron(schedule, "alerts.schedule")
    channels = []
    for kind, key in (("slack", "slack"), ("webhook", "webhooks")):
        entries = section.get(key, [])
        if not isinstance(entries, list):
            raise ConfigError(f"alerts.{key}: must be an array of tables ([[alerts.{key}]])")
        channels += [_channel(kind, i, entry) for i, entry in enumerate(entries)]
    targets = [c.target for c in channels]
    for i, target in enumerate(targets):
        if target in targets[:i]:
            raise ConfigError(f"alerts: two channels share the name {target!r}: give one a distinct `name`")
    return AlertConfig(AlertSettings(budgets=budgets, **values), email, schedule, tuple(channels))
