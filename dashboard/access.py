"""Who is looking at the dashboard, and which teams they may see.

The CLI validates the config's ``[dashboard]`` section (jobs/config.py) and hands it to the
Streamlit process as JSON in ``GPUFINOPS_DASHBOARD``; this module turns it and the request's
identity (an OIDC login through ``st.login``, or a trusted header set by a reverse proxy) into a
``warehouse.scope.Scope``. Pure functions, no Streamlit import: the app passes the identity in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufinops.models.budgets import Budget, from_dashboard
from gpufinops.warehouse.scope import Scope

AUTH_MODES = ("none", "oidc", "header")
DASHBOARD_ROLES = ("finance", "lead")
ENV_SETTINGS = "GPUFINOPS_DASHBOARD"
DEMO_ACTOR = "demo (no auth)"


class AccessDenied(PermissionError):
    """The request carries no identity, or one the config does not map to a role."""


@dataclass(frozen=True)
class Settings:
    auth: str = "none"
    header: str | None = None
    oidc_provider: str | None = None
    users: dict[str, Scope] = field(default_factory=dict)  # lower-cased e-mail -> scope
    monthly_budget_usd: float | None = None
    team_budgets: dict[str, float] = field(default_factory=dict)
    stale_after_hours: float = 26.0
    budgets: tuple[Budget, ...] = ()  # [[budgets]] and the aliases above, as the alerts see them

    @property
    def authenticated(self) -> bool:
        return self.auth != "none"


def settings_from(section: Mapping[str, Any]) -> Settings:
    """Settings from a ``[dashboard]`` table (already validated by jobs.config; re-checked here so a
    hand-started Streamlit fails closed rather than open)."""
    auth = section.get("auth", "none")
    if auth not in AUTH_MODES:
        raise ValueError(f"dashboard.auth: must be one of {', '.join(AUTH_MODES)}, not {auth!r}")
    users: dict[str, Scope] = {}
    for i, user in enumerate(section.get("users", [])):
        role = user.get("role")
        if role not in DASHBOARD_ROLES:
            raise ValueError(f"dashboard.users[{i}].role: must be one of {', '.join(DASHBOARD_ROLES)}")
        teams = tuple(user.get("teams") or ()) or None
        users[str(user["email"]).lower()] = Scope(role, teams, actor=str(user["email"]))
    if auth == "header" and not section.get("header"):
        raise ValueError('dashboard.header: required when dashboard.auth = "header"')
    budget = section.get("monthly_budget_usd")
    # the CLI passes every configured budget (validated by jobs.config) under "budgets"; a dashboard
    # started by hand with only the [dashboard] keys gets their aliases
    budgets = (
        tuple(Budget.from_dict(b) for b in section["budgets"])
        if "budgets" in section
        else tuple(from_dashboard(dict(section)))
    )
    return Settings(
        auth=auth,
        header=section.get("header"),
        oidc_provider=section.get("oidc_provider"),
        users=users,
        monthly_budget_usd=float(budget) if budget is not None else None,
        team_budgets={k: float(v) for k, v in section.get("team_budgets", {}).items()},
        stale_after_hours=float(section.get("stale_after_hours", 26.0)),
        budgets=budgets,
    )


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    text = (os.environ if environ is None else environ).get(ENV_SETTINGS, "")
    if not text.strip():
        return Settings()
    try:
        section = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV_SETTINGS}: not valid JSON: {exc}") from None
    return settings_from(section)


def identity(
    settings: Settings, *, headers: Mapping[str, str] | None = None, user: Mapping[str, Any] | None = None
) -> str | None:
    """The e-mail the request is authenticated as, or None (not logged in / header missing).

    Header mode trusts the header only because the dashboard listens behind the proxy that sets it
    (the CLI binds it to loopback in that mode).
    """
    if settings.auth == "header":
        lowered = {str(k).lower(): v for k, v in (headers or {}).items()}  # HTTP header names ignore case
        value = lowered.get((settings.header or "").lower()) or ""
        return value.strip() or None
    if settings.auth == "oidc":
        if user and user.get("is_logged_in") and user.get("email"):
            return str(user["email"])
        return None
    return None


def scope_for(settings: Settings, email: str | None) -> Scope:
    """The scope of an authenticated e-mail; finance for everyone when auth is off (the demo)."""
    if not settings.authenticated:
        return Scope("finance", actor=DEMO_ACTOR)
    if not email:
        raise AccessDenied("not signed in")
    scope = settings.users.get(email.lower())
    if scope is None:
        raise AccessDenied(f"{email} has no dashboard role: ask an administrator to add it to [[dashboard.users]]")
    return scope
