"""The ``[dashboard]`` config section: who may sign in (``auth``, the trusted ``header``,
``[[dashboard.users]]``), the budget aliases and the staleness limit.

Declared here, in the room that reads it: the config loader parses it once at load (``jobs/dashboard_settings.py``
turns its ValueError into the loader's ConfigError), `gpufinops dashboard` hands it to the Streamlit process
as JSON (``to_section``), and ``dashboard.access`` parses that JSON with the same declarations, so a
hand-started Streamlit fails closed on what the loader refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpufinops.kernel.options import Settings, option
from gpufinops.kernel.ranges import NON_NEGATIVE

AUTH_MODES = ("none", "oidc", "header")
DASHBOARD_ROLES = ("finance", "lead")  # finance: every team; lead: its teams


def _email(value: Any, key: str) -> Any:
    if not isinstance(value, str) or "@" not in value:
        raise ValueError(f"{key}: missing or not an e-mail address")
    return value


def _role(value: Any, key: str) -> Any:
    if value not in DASHBOARD_ROLES:
        raise ValueError(f'{key}: must be "finance" or "lead"')
    return value


def _team_names(value: Any, key: str) -> Any:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{key}: must be a list of team names, not {value!r}")
    return tuple(value) if value else None


@dataclass(frozen=True)
class DashboardUser(Settings):
    """One ``[[dashboard.users]]`` entry: who may sign in, and what they see."""

    email: str = option(doc="the address the sign-in names", check=_email)
    role: str = option(doc='"finance" (every team) or "lead" (its teams)', check=_role)  # finance | lead
    teams: tuple[str, ...] | None = option(None, "a lead's teams", check=_team_names)

    @classmethod
    def parse(cls, table: Any, where: str) -> DashboardUser:
        if not isinstance(table, dict):  # the address first: it names the user
            raise ValueError(f"{where}.email: missing or not an e-mail address")
        _email(table.get("email"), f"{where}.email")
        return super().parse(table, where)

    def validated(self, given: frozenset[str], where: str) -> DashboardUser:
        if self.role == "lead" and not self.teams:
            raise ValueError(f"{where}.teams: a lead needs a non-empty list of team names")
        return self


def _users(value: Any, key: str) -> tuple[DashboardUser, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{key}: a list of [[dashboard.users]] tables is required when auth is on")
    return tuple(DashboardUser.parse(user, f"{key}[{i}]") for i, user in enumerate(value))


def _text(value: Any, key: str) -> Any:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key}: must be a string, not {value!r}")
    return value


def _is_number(value: Any) -> bool:
    """An int or a float, not a bool (TOML's true is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _budgets(value: Any, key: str) -> dict[str, float]:
    if not isinstance(value, dict) or not all(_is_number(v) and v >= 0 for v in value.values()):
        raise ValueError(f"{key}: must be a table of team = non-negative number")
    return dict(value)


@dataclass(frozen=True)
class DashboardSettings(Settings):
    """``[dashboard]``: who may sign in, the budget aliases and the staleness limit."""

    auth: Literal["none", "oidc", "header"] = option("none", "who may sign in: none, oidc or header")
    header: str | None = option(None, 'auth = "header": the identity header the proxy sets', check=_text)
    oidc_provider: str | None = option(
        None, 'auth = "oidc": the [auth.<provider>] of Streamlit\'s secrets', check=_text
    )
    users: tuple[DashboardUser, ...] = option((), "the [[dashboard.users]] who may sign in", check=_users)
    monthly_budget_usd: float | None = option(None, "an alias of a monthly [[budgets]] entry", range=NON_NEGATIVE)
    team_budgets: dict[str, float] = option({}, "team = monthly budget (aliases too)", check=_budgets)
    stale_after_hours: float | None = option(
        None, "data older than this is flagged (none: the default)", range=NON_NEGATIVE
    )

    def validated(self, given: frozenset[str], where: str) -> DashboardSettings:
        if self.auth == "header" and not (isinstance(self.header, str) and self.header.strip()):
            raise ValueError('dashboard.header: required when dashboard.auth = "header" (e.g. "X-Forwarded-Email")')
        if self.auth != "none" and not self.users:
            raise ValueError("dashboard.users: a list of [[dashboard.users]] tables is required when auth is on")
        return self

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
