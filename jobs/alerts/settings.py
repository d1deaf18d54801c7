"""``[[budgets]]`` and ``[alerts]`` (with ``[[alerts.slack]]`` and ``[[alerts.webhooks]]``), validated at
config load: every problem is a ConfigError naming the key (exit 2).

``[dashboard] monthly_budget_usd`` and ``team_budgets`` are aliases: each becomes a monthly budget
(``monthly``, ``team:<team>``) with the default thresholds, unless a ``[[budgets]]`` entry of the
same name exists (that is an error: one budget, one place).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal
from urllib.parse import urlsplit

from gpufinops.dashboard.settings import DashboardSettings
from gpufinops.jobs.config_checks import ConfigError, ConfigSection, env_name, validate_cron
from gpufinops.jobs.report.headers import refuse_unsafe
from gpufinops.kernel.options import Check, Section, option, unknown_key
from gpufinops.models import budgets as budgets_mod
from gpufinops.models.alerts import RULES, AlertSettings
from gpufinops.models.budget_quota import POLICIES
from gpufinops.models.budgets import Budget, BudgetScope

SCOPE_KEYS = {"teams", "providers", "gpu_models", "tags"}
DEFAULT_SCHEDULE = "*/30 * * * *"
_DEFAULTS = AlertSettings()


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
    for name in value:
        if name not in SCOPE_KEYS:
            raise ConfigError(unknown_key(key, name, sorted(SCOPE_KEYS)))
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


def _required(check: Check) -> Check:
    """``check``, and "missing required key" for an absent value."""

    def checked(value: Any, key: str) -> Any:
        if value is None:
            raise ConfigError(f"{key}: missing required key")
        return check(value, key)

    return checked


def _name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: must be a non-empty string")
    return value


def _thresholds(value: Any, key: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{key}: must be a non-empty list of shares of the amount, e.g. [0.5, 0.75, 0.9, 1.0]")
    for i, t in enumerate(value):
        _number(t, f"{key}[{i}]", low=0, strict=True)
        if t > 10:
            raise ConfigError(f"{key}[{i}]: {t!r} is a share of the amount (0.75 = 75 %), not a percentage")
    if len(set(value)) != len(value):
        raise ConfigError(f"{key}: lists a threshold twice")
    return tuple(sorted(float(t) for t in value))


def _enforce(value: Any, key: str) -> str:
    if value not in POLICIES:
        raise ConfigError(f"{key}: must be one of {', '.join(repr(p) for p in POLICIES)}, not {value!r}")
    return value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: must be true or false")
    return value


@dataclass(frozen=True)
class BudgetEntry(ConfigSection):
    """One ``[[budgets]]`` entry (a ``models.budgets.Budget``)."""

    name: str = option(doc="the budget's name (alerts and the ledger say it)", check=_required(_name))
    amount: Decimal = option(doc="the amount, USD", check=_required(lambda v, k: _amount(v, k)))
    period: Literal["month", "quarter"] = option("month", "the period the amount is for: month or quarter")
    scope: BudgetScope = option(
        BudgetScope(), 'what it covers: "all" or a table of teams, providers, …', check=lambda v, k: _scope(v, k)
    )
    thresholds: tuple[float, ...] = option(
        budgets_mod.DEFAULT_THRESHOLDS, "the shares of the amount that alert", check=_thresholds
    )
    forecast: bool = option(False, "alert on the forecast crossing the amount too", check=_flag)
    enforce: Literal["warn", "cap", "hold", "drain"] = option(
        "warn", "what the schedulers do: warn (alerts only), cap (quota), hold (+ Kueue Hold), drain", check=_enforce
    )

    def validated(self, given: frozenset[str], where: str) -> BudgetEntry:
        if self.enforce != "warn" and not self.scope.teams:
            raise ConfigError(
                f'{where}.enforce: "{self.enforce}" needs a scope naming teams (scope = {{teams = [...]}}): '
                "a quota is a team's"
            )
        return self

    def budget(self) -> Budget:
        return Budget(
            self.name.strip(),
            self.amount,
            self.period,
            self.scope,
            self.thresholds,
            self.forecast,
            enforce=self.enforce,
        )


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


def _budget(index: int, table: Any) -> Budget:
    where = f"budgets[{index}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([[budgets]])")
    return BudgetEntry.parse(table, where).budget()


def _env(value: Any, key: str) -> str:
    return env_name(value, key)


def _url(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ConfigError(f"{key}: missing or not an http(s) URL")
    return value


def _teams(value: Any, key: str) -> tuple[str, ...]:
    return _strings(value, key, "team names")


def _attempts(value: Any, key: str) -> int:
    return int(_number(value, key, low=1, integer=True))


def _timeout(value: Any, key: str) -> float:
    return float(_number(value, key, low=0.1))


@dataclass(frozen=True)
class SlackEntry(ConfigSection):
    """One ``[[alerts.slack]]`` entry: a Slack incoming webhook."""

    url_env: str = option(doc="the environment variable holding the Slack webhook URL", check=_env)
    name: str | None = option(None, "the channel's name in the ledger (default: url_env)", check=_name)
    teams: tuple[str, ...] | None = option(None, "only these teams' alerts (none: every alert)", check=_teams)
    max_attempts: int = option(5, "attempts per alert", check=_attempts)
    timeout_s: float = option(10.0, "HTTP timeout, seconds", check=_timeout)

    def channel(self, where: str) -> Channel:
        target = self.name or self.url_env  # named by its variable (never by its secret URL)
        return Channel(
            "slack",
            f"slack:{target}",
            self.teams,
            url_env=self.url_env,
            max_attempts=self.max_attempts,
            timeout_s=self.timeout_s,
            key=where,
        )


@dataclass(frozen=True)
class WebhookEntry(ConfigSection):
    """One ``[[alerts.webhooks]]`` entry: a signed JSON webhook."""

    url: str = option(doc="where the alerts are POSTed", check=_url)
    secret_env: str = option(doc="the environment variable holding the signing secret", check=_env)
    name: str | None = option(None, "the channel's name in the ledger (default: host#hash of the URL)", check=_name)
    teams: tuple[str, ...] | None = option(None, "only these teams' alerts (none: every alert)", check=_teams)
    max_attempts: int = option(5, "attempts per alert", check=_attempts)
    timeout_s: float = option(10.0, "HTTP timeout, seconds", check=_timeout)

    def channel(self, where: str) -> Channel:
        target = self.name or f"{urlsplit(self.url).netloc}#{hashlib.sha256(self.url.encode()).hexdigest()[:12]}"
        return Channel(
            "webhook",
            f"webhook:{target}",
            self.teams,
            url=self.url,
            secret_env=self.secret_env,
            max_attempts=self.max_attempts,
            timeout_s=self.timeout_s,
            key=where,
        )


def _channels(entry: type[SlackEntry] | type[WebhookEntry]) -> Check:
    def check(value: Any, key: str) -> tuple[Channel, ...]:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: must be an array of tables ([[{key}]])")
        return tuple(entry.parse(table, f"{key}[{i}]").channel(f"{key}[{i}]") for i, table in enumerate(value))

    return check


def _rules(value: Any, key: str) -> tuple[str, ...]:
    rules = _strings(value, key, "rule names")
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise ConfigError(f"{key}: unknown rule {unknown[0]!r} (known: {', '.join(RULES)})")
    return tuple(dict.fromkeys(rules))


def _directions(value: Any, key: str) -> tuple[str, ...]:
    directions = _strings(value, key, "directions")
    if any(d not in ("spike", "drop") for d in directions):
        raise ConfigError(f'{key}: each must be "spike" or "drop"')
    return directions


def _whole(low: int) -> Check:
    return lambda value, key: _number(value, key, low=low, integer=True)


def _share(value: Any, key: str) -> float:
    return float(_number(value, key, low=0))


def _cron(value: Any, key: str) -> str:
    validate_cron(value, key)
    return value


@dataclass(frozen=True)
class AlertsSection(ConfigSection):
    """``[alerts]``: which rules run, their thresholds, and where alerts go."""

    rules: tuple[str, ...] = option(_DEFAULTS.rules, "the rules that run (default: all)", check=_rules)
    email: bool | None = option(
        None, "mail alerts to [[report.recipients]] (default: on when alerting is configured)", check=_flag
    )
    schedule: str = option(DEFAULT_SCHEDULE, "`serve`: when alerts run, besides after each ingest", check=_cron)
    slack: tuple[Channel, ...] = option((), "the [[alerts.slack]] channels", check=_channels(SlackEntry))
    webhooks: tuple[Channel, ...] = option((), "the [[alerts.webhooks]] channels", check=_channels(WebhookEntry))
    forecast_min_days: int = option(
        _DEFAULTS.forecast_min_days, "fewer days of cost history: the forecast rule withholds", check=_whole(1)
    )
    anomaly_days: int = option(
        _DEFAULTS.anomaly_days, "alert on anomalies among the last N complete days", check=_whole(1)
    )
    anomaly_directions: tuple[str, ...] = option(
        _DEFAULTS.anomaly_directions, '"spike" and/or "drop"', check=_directions
    )
    anomaly_min_usd: float = option(_DEFAULTS.anomaly_min_usd, "how far from the expectation, USD", check=_share)
    idle_util_pct: float = option(
        _DEFAULTS.idle_util_pct, "an hour is idle when every GPU's peak is below this", check=_share
    )
    idle_min_hours: int = option(_DEFAULTS.idle_min_hours, "a resource idle this long …", check=_whole(1))
    idle_min_cost_usd: Decimal = option(
        _DEFAULTS.idle_min_cost_usd, "… that cost at least this much is burning money", check=lambda v, k: _amount(v, k)
    )
    idle_max_lag_hours: int = option(
        _DEFAULTS.idle_max_lag_hours, "its last idle hour within this of the newest metrics", check=_whole(0)
    )
    enforce_warn_hours: float = option(
        _DEFAULTS.enforce_warn_hours,
        "alert this many hours before an enforced budget's cap or hold bites",
        check=lambda v, k: float(_number(v, k, low=0)),
    )

    def validated(self, given: frozenset[str], where: str) -> AlertsSection:
        targets = [c.target for c in self.slack + self.webhooks]
        for i, target in enumerate(targets):
            if target in targets[:i]:
                raise ConfigError(f"{where}: two channels share the name {target!r}: give one a distinct `name`")
        return self

    def config(self, budgets: tuple[Budget, ...], configured: bool) -> AlertConfig:
        """The alerting config: mail is opted into by configuring alerting (a config that only mails the
        weekly report, or only has the [dashboard] budget keys, does not start sending alerts after an upgrade)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(AlertSettings) if f.name != "budgets"}
        email = configured if self.email is None else self.email
        return AlertConfig(AlertSettings(budgets=budgets, **values), email, self.schedule, self.slack + self.webhooks)


def parse(budget_entries: Any, section: Any, dashboard: DashboardSettings) -> AlertConfig:
    """The whole alerting config: ``[[budgets]]``, ``[alerts]`` (None when absent) and the ``[dashboard]``
    budget aliases."""
    refuse_unsafe(budget_entries, "budgets")  # names become mail subjects and headers: no CR/LF (exit 2)
    refuse_unsafe(section, "alerts")
    budgets = parse_budgets(budget_entries, dashboard)
    configured = section is not None or bool(budget_entries)
    return AlertsSection.parse(section, "alerts").config(budgets, configured)


SECTION = Section(
    "alerts",
    parse,
    (AlertsSection, BudgetEntry, SlackEntry, WebhookEntry),
    tables=("budgets", "alerts"),
    arrays=("budgets",),
    needs=("dashboard",),
)
