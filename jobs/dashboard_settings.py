"""The ``[dashboard]`` config section: who may sign in (``auth``, the trusted ``header``,
``[[dashboard.users]]``), the budget aliases and the staleness limit, validated once at config load.

`gpufinops dashboard` hands the section to the Streamlit process as JSON (``to_section``), where
``dashboard.access`` reads it (and re-checks it, so a hand-started Streamlit fails closed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, check_table, is_number, numbers
from gpufinops.warehouse.ranges import NON_NEGATIVE

DASHBOARD_KEYS = {"auth", "header", "oidc_provider", "users", "monthly_budget_usd", "team_budgets", "stale_after_hours"}
DASHBOARD_NUMBERS = numbers("dashboard", {"monthly_budget_usd": NON_NEGATIVE, "stale_after_hours": NON_NEGATIVE})
USER_KEYS = {"email", "role", "teams"}
AUTH_MODES = ("none", "oidc", "header")


@dataclass(frozen=True)
class DashboardUser:
    email: str
    role: str  # finance | lead
    teams: tuple[str, ...] | None = None  # a lead's teams


@dataclass(frozen=True)
class DashboardSettings:
    auth: str = "none"  # none | oidc | header
    header: str | None = None  # auth = "header": the identity header the proxy sets
    oidc_provider: str | None = None  # auth = "oidc": the [auth.<provider>] of Streamlit's secrets
    users: tuple[DashboardUser, ...] = ()
    monthly_budget_usd: float | None = None  # an alias of a [[budgets]] entry
    team_budgets: dict[str, float] = field(default_factory=dict)  # team = monthly budget (aliases too)
    stale_after_hours: float | None = None  # None: the dashboard's default

    def to_section(self) -> dict[str, Any]:
        """The section as TOML would hold it (the keys set, as given): the JSON `dashboard` hands Streamlit."""
        users = [
            {"email": u.email, "role": u.role, **({"teams": list(u.teams)} if u.teams is not None else {})}
            for u in self.users
        ]
        values = {
            "auth": self.auth,
            "header": self.header,
            "oidc_provider": self.oidc_provider,
            "users": users,
            "monthly_budget_usd": self.monthly_budget_usd,
            "team_budgets": dict(self.team_budgets),
            "stale_after_hours": self.stale_after_hours,
        }
        return {k: v for k, v in values.items() if v is not None}


def _user(i: int, user: Any) -> DashboardUser:
    key = f"dashboard.users[{i}]"
    if not isinstance(user, dict) or not isinstance(user.get("email"), str) or "@" not in user["email"]:
        raise ConfigError(f"{key}.email: missing or not an e-mail address")
    check_table(user, key, USER_KEYS)
    role = user.get("role")
    if role not in ("finance", "lead"):
        raise ConfigError(f'{key}.role: must be "finance" or "lead"')
    teams = user.get("teams")
    listed = isinstance(teams, list) and all(isinstance(t, str) for t in teams)
    if role == "lead" and not (listed and teams):
        raise ConfigError(f"{key}.teams: a lead needs a non-empty list of team names")
    if teams is not None and not listed:
        raise ConfigError(f"{key}.teams: must be a list of team names, not {teams!r}")
    return DashboardUser(user["email"], role, tuple(teams) if teams else None)


def _optional_text(section: dict[str, Any], key: str) -> str | None:
    value = section.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"dashboard.{key}: must be a string, not {value!r}")
    return value


def parse(section: Any) -> DashboardSettings:
    """``[dashboard]`` → DashboardSettings; every problem is a ConfigError naming the key."""
    if section is None:
        return DashboardSettings()
    check_table(section, "dashboard", DASHBOARD_KEYS, DASHBOARD_NUMBERS)
    auth = section.get("auth", "none")
    if auth not in AUTH_MODES:
        raise ConfigError(f'dashboard.auth: must be "none", "oidc" or "header", not {auth!r}')
    if auth == "header" and not (isinstance(section.get("header"), str) and section["header"].strip()):
        raise ConfigError('dashboard.header: required when dashboard.auth = "header" (e.g. "X-Forwarded-Email")')
    users = section.get("users", [])
    if not isinstance(users, list) or (auth != "none" and not users):
        raise ConfigError("dashboard.users: a list of [[dashboard.users]] tables is required when auth is on")
    parsed = tuple(_user(i, user) for i, user in enumerate(users))
    for option in ("monthly_budget_usd", "stale_after_hours"):
        if option in section and (not is_number(section[option]) or section[option] < 0):
            raise ConfigError(f"dashboard.{option}: must be a non-negative number")
    budgets = section.get("team_budgets", {})
    if not isinstance(budgets, dict) or not all(is_number(v) and v >= 0 for v in budgets.values()):
        raise ConfigError("dashboard.team_budgets: must be a table of team = non-negative number")
    return DashboardSettings(
        auth,
        _optional_text(section, "header"),
        _optional_text(section, "oidc_provider"),
        parsed,
        section.get("monthly_budget_usd"),
        dict(budgets),
        section.get("stale_after_hours"),
    )
