"""The ``[report]`` config section and its ``[[report.recipients]]`` (docs/report.md), validated at start-up.

Credentials are never in the file: ``smtp_user_env`` / ``smtp_password_env`` name the environment
variables that hold them. Without them (or with ``smtp_starttls = false``) mail goes out as plain
SMTP, for a local relay.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpufinops.jobs.config_checks import ConfigError, ConfigSection, entries
from gpufinops.jobs.report.headers import refuse_unsafe
from gpufinops.kernel.options import Check, Section, option
from gpufinops.kernel.ranges import NON_NEGATIVE, POSITIVE, Range, at_least
from gpufinops.warehouse.scope import Scope

REPORT_ROLES = ("finance", "lead")
_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")


def _typed(kind: type | tuple[type, ...], convert: Callable[[Any], Any] | None = None) -> Check:
    """The value as ``kind`` ("expected str, got 5"), converted by ``convert``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)

    def check(value: Any, key: str) -> Any:
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kind):
            raise ConfigError(f"{key}: expected {'/'.join(k.__name__ for k in kinds)}, got {value!r}")
        return convert(value) if convert else value

    return check


def _email(value: Any, key: str) -> Any:
    if not _EMAIL.match(_typed(str)(value, key)):
        raise ConfigError(f"{key}: not an e-mail address: {value!r}")
    return value.strip()


def _role(value: Any, key: str) -> Any:
    if _typed(str)(value, key) not in REPORT_ROLES:
        raise ConfigError(f"{key}: unknown role {value!r} (a report goes to: {', '.join(REPORT_ROLES)})")
    return value


def _teams(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t for t in value):
        raise ConfigError(f"{key}: a lead needs a non-empty list of team names")
    return tuple(value)


@dataclass(frozen=True)
class Recipient(ConfigSection):
    """One ``[[report.recipients]]`` entry: who gets the weekly report, and which teams it covers."""

    email: str = option(doc="the recipient's address", check=_email)
    role: str = option(doc="finance (every team) or lead (its teams)", check=_role)
    teams: tuple[str, ...] | None = option(None, "a lead's teams", check=_teams)
    name: str | None = option(None, "the name the mail is addressed to", check=_typed(str))

    @property
    def scope(self) -> Scope:
        return Scope(self.role, self.teams, actor=self.email)

    def validated(self, given: frozenset[str], where: str) -> Recipient:
        if self.role == "lead" and self.teams is None:
            _teams(None, f"{where}.teams")
        if self.role != "lead" and "teams" in given:
            raise ConfigError(f"{where}.teams: only a lead has teams (finance sees every team)")
        return self


def _recipients(value: Any, key: str) -> tuple[Recipient, ...]:
    listed = entries(value, key, f"{key}: must be an array of tables ([[{key}]])")
    parsed = tuple(Recipient.parse(r, f"{key}[{i}]") for i, r in enumerate(listed))
    emails = [r.email.lower() for r in parsed]
    for i, email in enumerate(emails):
        if email in emails[:i]:
            raise ConfigError(f"{key}[{i}].email: {parsed[i].email} is listed twice")
    return parsed


def _sender(value: Any, key: str) -> Any:
    if not _EMAIL.match(_typed(str)(value, key).split("<")[-1].rstrip(">").strip()):
        raise ConfigError(f"{key}: not an e-mail address: {value!r}")
    return value


def _timezone(value: Any, key: str) -> Any:
    try:
        ZoneInfo(_typed(str)(value, key))
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{key}: unknown time zone {value!r}") from None
    return value


TEXT, WHOLE, SECONDS, FLAG = _typed(str), _typed(int), _typed((int, float), float), _typed(bool)


@dataclass(frozen=True)
class ReportSettings(ConfigSection):
    """``[report]``: how the weekly report is mailed, and to whom."""

    timezone: str = option("UTC", "the time zone of the report's week and of [jobs] report", check=_timezone)
    sender: str = option("gpufinops@localhost", "the From address", check=_sender)
    smtp_host: str = option("localhost", "the SMTP server", check=TEXT)
    smtp_port: int = option(25, "its port", range=Range(1, 65535, "a TCP port, 1 to 65535"), check=WHOLE)
    smtp_starttls: bool = option(False, "STARTTLS (default: on when smtp_user_env is set with smtp_host)", check=FLAG)
    smtp_user_env: str | None = option(None, "the environment variable holding the SMTP user", check=TEXT)
    smtp_password_env: str | None = option(None, "the environment variable holding the SMTP password", check=TEXT)
    smtp_timeout_seconds: float = option(30.0, "SMTP timeout, seconds", range=POSITIVE, check=SECONDS)
    send_attempts: int = option(
        3, "attempts per delivery run (a later run retries again)", range=at_least(1), check=WHOLE
    )
    retry_backoff_seconds: float = option(
        30.0, "wait before a retry, doubled after each failed attempt", range=NON_NEGATIVE, check=SECONDS
    )
    dashboard_url: str | None = option(None, "the dashboard the mail links to", check=TEXT)
    recipients: tuple[Recipient, ...] = option((), "the [[report.recipients]]", check=_recipients)
    smtp_allow_plaintext_auth: bool = option(False, "AUTH without TLS (refused unless set, then warned)", check=FLAG)
    sending_timeout_minutes: float = option(
        15.0, "a delivery left 'sending' longer is resent (same Message-ID)", range=POSITIVE, check=SECONDS
    )

    def validated(self, given: frozenset[str], where: str) -> ReportSettings:
        settings = self
        if "smtp_starttls" not in given and "smtp_host" in given:  # credentials ⇒ STARTTLS by default
            settings = dataclasses.replace(self, smtp_starttls="smtp_user_env" in given)
        if "smtp_user_env" in given and not settings.smtp_starttls and not settings.smtp_allow_plaintext_auth:
            raise ConfigError(
                f"{where}.smtp_starttls: false with smtp_user_env set would send the SMTP password in plain "
                "text; set smtp_starttls = true, or smtp_allow_plaintext_auth = true for a trusted relay"
            )
        return settings

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


def parse(section: Any) -> ReportSettings:
    """``[report]`` → ReportSettings; every problem is a ConfigError naming the key."""
    if isinstance(section, dict):
        refuse_unsafe(section, "report")  # sender, recipients, names and teams become mail headers: no CR/LF
    return ReportSettings.parse(section, "report")


SECTION = Section("report", parse, (ReportSettings, Recipient))
