"""The ``[report]`` config section and its ``[[report.recipients]]`` (docs/report.md), validated at start-up.

Credentials are never in the file: ``smtp_user_env`` / ``smtp_password_env`` name the environment
variables that hold them. Without them (or with ``smtp_starttls = false``) mail goes out as plain
SMTP, for a local relay.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpufinops.jobs.config_checks import ConfigError, check_table, numbers
from gpufinops.jobs.report.headers import refuse_unsafe
from gpufinops.warehouse.ranges import NON_NEGATIVE, POSITIVE, Range, at_least
from gpufinops.warehouse.scope import Scope

REPORT_KEYS = {
    "timezone",
    "sender",
    "smtp_host",
    "smtp_port",
    "smtp_starttls",
    "smtp_user_env",
    "smtp_password_env",
    "smtp_timeout_seconds",
    "send_attempts",
    "retry_backoff_seconds",
    "dashboard_url",
    "recipients",
    "smtp_allow_plaintext_auth",
    "sending_timeout_minutes",
}
REPORT_NUMBERS = numbers(
    "report",
    {
        "smtp_port": Range(1, 65535, "a TCP port, 1 to 65535"),
        "send_attempts": at_least(1),
        "smtp_timeout_seconds": POSITIVE,
        "retry_backoff_seconds": NON_NEGATIVE,
        "sending_timeout_minutes": POSITIVE,
    },
)
RECIPIENT_KEYS = {"email", "role", "teams", "name"}
REPORT_ROLES = ("finance", "lead")
_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")


@dataclass(frozen=True)
class Recipient:
    email: str
    role: str
    teams: tuple[str, ...] | None = None
    name: str | None = None

    @property
    def scope(self) -> Scope:
        return Scope(self.role, self.teams, actor=self.email)


@dataclass(frozen=True)
class ReportSettings:
    timezone: str = "UTC"
    sender: str = "gpufinops@localhost"
    smtp_host: str = "localhost"
    smtp_port: int = 25
    smtp_starttls: bool = False
    smtp_user_env: str | None = None
    smtp_password_env: str | None = None
    smtp_timeout_seconds: float = 30.0
    send_attempts: int = 3  # per delivery run; a later run retries a failed send again
    retry_backoff_seconds: float = 30.0  # doubled after each failed attempt
    dashboard_url: str | None = None
    recipients: tuple[Recipient, ...] = field(default_factory=tuple)
    smtp_allow_plaintext_auth: bool = False  # AUTH without TLS: refused unless this is set (then warned)
    sending_timeout_minutes: float = 15.0  # a delivery left 'sending' longer is resent (same Message-ID)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def credentials(self) -> tuple[str, str] | None:
        """(user, password) from the environment, or None for an unauthenticated relay."""
        if not self.smtp_user_env:
            return None
        user = os.environ.get(self.smtp_user_env)
        password = os.environ.get(self.smtp_password_env or "", "")
        if not user:
            raise ConfigError(f"report.smtp_user_env: environment variable {self.smtp_user_env} is not set")
        return user, password


def _typed(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = table[key]
    if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ConfigError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    if not isinstance(value, kind):
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ConfigError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _recipient(index: int, table: Any) -> Recipient:
    where = f"report.recipients[{index}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    for key in table:
        if key not in RECIPIENT_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key (allowed: {', '.join(sorted(RECIPIENT_KEYS))})")
    for key in ("email", "role"):
        if key not in table:
            raise ConfigError(f"{where}.{key}: missing required key")
    email = _typed(table, "email", str, where)
    if not _EMAIL.match(email):
        raise ConfigError(f"{where}.email: not an e-mail address: {email!r}")
    role = _typed(table, "role", str, where)
    if role not in REPORT_ROLES:
        raise ConfigError(f"{where}.role: unknown role {role!r} (a report goes to: {', '.join(REPORT_ROLES)})")
    teams = None
    if role == "lead":
        teams = table.get("teams")
        if not isinstance(teams, list) or not teams or not all(isinstance(t, str) and t for t in teams):
            raise ConfigError(f"{where}.teams: a lead needs a non-empty list of team names")
        teams = tuple(teams)
    elif "teams" in table:
        raise ConfigError(f"{where}.teams: only a lead has teams (finance sees every team)")
    name = _typed(table, "name", str, where) if "name" in table else None
    return Recipient(email.strip(), role, teams, name)


def parse(section: Any) -> ReportSettings:
    """``[report]`` → ReportSettings; every problem is a ConfigError naming the key."""
    if section is None:
        return ReportSettings()
    check_table(section, "report", REPORT_KEYS, REPORT_NUMBERS)
    refuse_unsafe(section, "report")  # sender, recipients, names and teams become mail headers: no CR/LF
    values: dict[str, Any] = {}
    for key in ("timezone", "sender", "smtp_host", "smtp_user_env", "smtp_password_env", "dashboard_url"):
        if key in section:
            values[key] = _typed(section, key, str, "report")
    for key in ("smtp_port", "send_attempts"):
        if key in section:
            values[key] = _typed(section, key, int, "report")
            if values[key] < 1:
                raise ConfigError(f"report.{key}: must be at least 1")
    for key in ("smtp_timeout_seconds", "retry_backoff_seconds"):
        if key in section:
            values[key] = float(_typed(section, key, (int, float), "report"))
            if values[key] < 0:
                raise ConfigError(f"report.{key}: must not be negative")
    if "sending_timeout_minutes" in section:
        values["sending_timeout_minutes"] = float(_typed(section, "sending_timeout_minutes", (int, float), "report"))
        if values["sending_timeout_minutes"] <= 0:
            raise ConfigError("report.sending_timeout_minutes: must be more than 0")
    if "smtp_allow_plaintext_auth" in section:
        values["smtp_allow_plaintext_auth"] = _typed(section, "smtp_allow_plaintext_auth", bool, "report")
    if "smtp_starttls" in section:
        values["smtp_starttls"] = _typed(section, "smtp_starttls", bool, "report")
    elif "smtp_host" in section:
        values["smtp_starttls"] = "smtp_user_env" in section  # CONTRACT: credentials ⇒ STARTTLS by default
    if "sender" in values and not _EMAIL.match(values["sender"].split("<")[-1].rstrip(">").strip()):
        raise ConfigError(f"report.sender: not an e-mail address: {values['sender']!r}")
    try:
        ZoneInfo(values.get("timezone", "UTC"))
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"report.timezone: unknown time zone {values.get('timezone')!r}") from None
    if "smtp_user_env" in values and not values.get("smtp_starttls") and not values.get("smtp_allow_plaintext_auth"):
        raise ConfigError(
            "report.smtp_starttls: false with smtp_user_env set would send the SMTP password in plain "
            "text; set smtp_starttls = true, or smtp_allow_plaintext_auth = true for a trusted relay"
        )
    recipients = section.get("recipients", [])
    if not isinstance(recipients, list):
        raise ConfigError("report.recipients: must be an array of tables ([[report.recipients]])")
    parsed = tuple(_recipient(i, r) for i, r in enumerate(recipients))
    emails = [r.email.lower() for r in parsed]
    for i, email in enumerate(emails):
        if email in emails[:i]:
            raise ConfigError(f"report.recipients[{i}].email: {parsed[i].email} is listed twice")
    return ReportSettings(**values, recipients=parsed)
