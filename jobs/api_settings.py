"""The ``[api]`` config section: ``[[api.tokens]]`` (who may call `gpufinops api`) and ``[[api.webhooks]]``
(where `serve` pushes new recommendations), validated once at config load.

Secrets are never in the file: ``token_env`` and ``secret_env`` name the environment variables that
hold them; whether those are set is checked by the command that needs the value (the API, the push).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, ConfigSection, env_name, is_number, name_list
from gpufinops.kernel.options import Check, Section, option

TOKEN_ROLES = ("finance", "lead", "scheduler")


def _role(value: Any, key: str) -> Any:
    if value not in TOKEN_ROLES:
        raise ConfigError(f'{key}: must be "finance", "lead" or "scheduler", not {value!r}')
    return str(value)


def _name(value: Any, key: str) -> Any:
    if not (isinstance(value, str) and value.strip()):
        raise ConfigError(f"{key}: must be a non-empty string")
    return value


def _names(what: str = "team names") -> Check:
    return lambda value, key: name_list(value, key, what)


def _url(value: Any, key: str) -> Any:
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ConfigError(f"{key}: missing or not an http(s) URL")
    return value


def _at_least(low: float, kind: type) -> Check:
    def check(value: Any, key: str) -> Any:
        if not is_number(value) or value < low:
            raise ConfigError(f"{key}: must be a number of at least {low}")
        return kind(value)

    return check


@dataclass(frozen=True)
class ApiToken(ConfigSection):
    """One ``[[api.tokens]]`` entry: the variable holding the token, and the scope it grants."""

    token_env: str = option(doc="the environment variable holding the token", check=env_name)
    role: str = option(doc="finance | lead | scheduler", check=_role)
    teams: tuple[str, ...] | None = option(None, "a lead's teams (none for every other role)", check=_names())
    name: str | None = option(None, "the actor recorded on decisions", check=_name)

    def validated(self, given: frozenset[str], where: str) -> ApiToken:
        if self.role == "lead" and self.teams is None:
            name_list(None, f"{where}.teams")
        if self.role != "lead" and "teams" in given:
            raise ConfigError(f"{where}.teams: only a lead token is limited to teams ({self.role} sees every team)")
        return self


@dataclass(frozen=True)
class ApiWebhook(ConfigSection):
    """One ``[[api.webhooks]]`` entry: a receiver of the signed recommendation feed."""

    url: str = option(doc="where the feed is POSTed", check=_url)
    secret_env: str = option(doc="the environment variable holding the signing secret", check=env_name)
    teams: tuple[str, ...] | None = option(None, "only these teams' recommendations (none: every team)", check=_names())
    kinds: tuple[str, ...] | None = option(
        None, "only these recommendation kinds (none: every kind)", check=_names("recommendation kinds")
    )
    timeout_s: float = option(10.0, "HTTP timeout per request, seconds", check=_at_least(0.1, float))
    max_attempts: int = option(5, "attempts per delivery", check=_at_least(1, int))
    batch_size: int = option(200, "recommendations per request", check=_at_least(1, int))


def _entries(cls: type[ConfigSection]) -> Check:
    def check(value: Any, key: str) -> Any:
        if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
            raise ConfigError(f"{key}: must be a list of [[{key}]] tables")
        return tuple(cls.parse(entry, f"{key}[{i}]") for i, entry in enumerate(value))

    return check


@dataclass(frozen=True)
class ApiSettings(ConfigSection):
    """``[api]``: who may call `gpufinops api`, and where `serve` pushes new recommendations."""

    tokens: tuple[ApiToken, ...] = option((), "the [[api.tokens]] that may call the API", check=_entries(ApiToken))
    webhooks: tuple[ApiWebhook, ...] = option((), "the [[api.webhooks]] the feed goes to", check=_entries(ApiWebhook))


def parse(section: Any) -> ApiSettings:
    """``[api]`` → ApiSettings; every problem is a ConfigError naming the key."""
    return ApiSettings.parse(section, "api")


SECTION = Section("api", parse, (ApiSettings, ApiToken, ApiWebhook))
