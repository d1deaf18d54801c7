"""The ``[api]`` config section: ``[[api.tokens]]`` (who may call `gpufinops api`) and ``[[api.webhooks]]``
(where `serve` pushes new recommendations), validated once at config load.

Secrets are never in the file: ``token_env`` and ``secret_env`` name the environment variables that
hold them; whether those are set is checked by the command that needs the value (the API, the push).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufinops.jobs.config_checks import ConfigError, check_table, env_name, is_number, name_list

API_KEYS = {"tokens", "webhooks"}
API_TOKEN_KEYS = {"token_env", "role", "teams", "name"}
API_WEBHOOK_KEYS = {"url", "secret_env", "teams", "kinds", "timeout_s", "max_attempts", "batch_size"}
TOKEN_ROLES = ("finance", "lead", "scheduler")


@dataclass(frozen=True)
class ApiToken:
    """One ``[[api.tokens]]`` entry: the variable holding the token, and the scope it grants."""

    token_env: str
    role: str  # finance | lead | scheduler
    teams: tuple[str, ...] | None = None  # a lead's teams; None for every other role
    name: str | None = None  # the actor recorded on decisions


@dataclass(frozen=True)
class ApiWebhook:
    """One ``[[api.webhooks]]`` entry: a receiver of the signed recommendation feed."""

    url: str
    secret_env: str
    teams: tuple[str, ...] | None = None  # None: every team
    kinds: tuple[str, ...] | None = None  # None: every recommendation kind
    timeout_s: float = 10.0
    max_attempts: int = 5
    batch_size: int = 200


@dataclass(frozen=True)
class ApiSettings:
    tokens: tuple[ApiToken, ...] = ()
    webhooks: tuple[ApiWebhook, ...] = ()


def _entries(section: dict[str, Any], list_key: str, allowed: set[str]) -> list[dict[str, Any]]:
    entries = section.get(list_key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"api.{list_key}: must be a list of [[api.{list_key}]] tables")
    for i, entry in enumerate(entries):
        check_table(entry, f"api.{list_key}[{i}]", allowed)
    return entries


def _token(i: int, token: dict[str, Any]) -> ApiToken:
    key = f"api.tokens[{i}]"
    token_env = env_name(token.get("token_env"), f"{key}.token_env")
    role = token.get("role")
    if role not in TOKEN_ROLES:
        raise ConfigError(f'{key}.role: must be "finance", "lead" or "scheduler", not {role!r}')
    teams = None
    if role == "lead":
        teams = name_list(token.get("teams"), f"{key}.teams")
    elif "teams" in token:
        raise ConfigError(f"{key}.teams: only a lead token is limited to teams ({role} sees every team)")
    name = token.get("name")
    if "name" in token and not (isinstance(name, str) and name.strip()):
        raise ConfigError(f"{key}.name: must be a non-empty string")
    return ApiToken(token_env, str(role), teams, name)


def _webhook(i: int, hook: dict[str, Any]) -> ApiWebhook:
    key = f"api.webhooks[{i}]"
    url = hook.get("url")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise ConfigError(f"{key}.url: missing or not an http(s) URL")
    secret_env = env_name(hook.get("secret_env"), f"{key}.secret_env")
    teams = name_list(hook["teams"], f"{key}.teams") if "teams" in hook else None
    kinds = name_list(hook["kinds"], f"{key}.kinds", "recommendation kinds") if "kinds" in hook else None
    for option, low in (("timeout_s", 0.1), ("max_attempts", 1), ("batch_size", 1)):
        value = hook.get(option)
        if value is not None and (not is_number(value) or value < low):
            raise ConfigError(f"{key}.{option}: must be a number of at least {low}")
    defaults = ApiWebhook(url, secret_env)
    return ApiWebhook(
        url,
        secret_env,
        teams,
        kinds,
        timeout_s=float(hook.get("timeout_s", defaults.timeout_s)),
        max_attempts=int(hook.get("max_attempts", defaults.max_attempts)),
        batch_size=int(hook.get("batch_size", defaults.batch_size)),
    )


def parse(section: Any) -> ApiSettings:
    """``[api]`` → ApiSettings; every problem is a ConfigError naming the key."""
    if section is None:
        return ApiSettings()
    check_table(section, "api", API_KEYS)
    tokens = _entries(section, "tokens", API_TOKEN_KEYS)
    webhooks = _entries(section, "webhooks", API_WEBHOOK_KEYS)
    return ApiSettings(
        tuple(_token(i, t) for i, t in enumerate(tokens)), tuple(_webhook(i, h) for i, h in enumerate(webhooks))
    )
