"""Who is looking at the dashboard, and which teams they may see.

The CLI validates the config's ``[dashboard]`` section (dashboard/settings.py) and hands it to the
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

from gpufinops.dashboard.settings import DashboardSettings
from gpufinops.models.budgets import Budget, from_dashboard
from gpufinops.warehouse.scope import Scope

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
    """Settings from a ``[dashboard]`` table, parsed once by its declarations (``DashboardSettings``, as the
    config loader parses it), so a hand-started Streamlit fails closed rather than open: ValueError naming
    the key. The CLI also passes every configured budget (validated by the loader) under ``budgets``; a
    dashboard started by hand with only the [dashboard] keys gets their aliases."""
    table = dict(section)
    handed_budgets = table.pop("budgets", None)
    typed = DashboardSettings.parse(table, "dashboard")
    budgets = (
        tuple(Budget.from_dict(b) for b in handed_budgets)
        if handed_budgets is not None
        else tuple(from_dashboard(typed.to_section()))
    )
    return Settings(
        auth=typed.auth,
        header=typed.header,
        oidc_provider=typed.oidc_provider,
        users={u.email.lower(): Scope(u.role, u.teams, actor=u.email) for u in typed.users},
        monthly_budget_usd=float(typed.monthly_budget_usd) if typed.monthly_budget_usd is not None else None,
        team_budgets={k: float(v) for k, v in typed.team_budgets.items()},
        stale_after_hours=float(typed.stale_after_hours) if typed.stale_after_hours is not None else 26.0,
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
