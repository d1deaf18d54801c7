"""``ConfigError`` and the value checks the config sections share.

A leaf module (it imports nothing of gpufinops but the leaf ``kernel.options``), so every section's
settings module can raise the one error type and reuse the checks without importing the loader
(``jobs.config``). A section is a frozen dataclass of :class:`ConfigSection` whose fields are declared with
``option()`` (type, default, description, range, check): the idiom of the source options and the
``[models]`` settings (docs/config.md, "How settings are declared").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufinops.kernel.options import Settings


class ConfigError(ValueError):
    """A bad config: the message names the key. ``origin`` is where the key was set (the config file
    or the environment variable), filled in by ``jobs.config.load``; the CLI prints it beside the message."""

    origin: str | None = None


def validate_cron(expression: Any, key: str) -> None:
    """A 5-field crontab expression (minute hour day month weekday)."""
    from apscheduler.triggers.cron import CronTrigger

    if not isinstance(expression, str) or len(expression.split()) != 5:
        raise ConfigError(
            f"{key}: invalid cron expression {expression!r} (expected 5 fields: minute hour day month weekday)"
        )
    try:
        CronTrigger.from_crontab(expression, timezone="UTC")
    except ValueError as exc:
        raise ConfigError(f"{key}: invalid cron expression {expression!r}: {exc}") from None


@dataclass(frozen=True)
class ConfigSection(Settings):
    """Base of a config section's settings (``kernel.options.Settings``): parsed from its TOML table by its
    declarations, every problem a :class:`ConfigError` naming ``section.key``."""

    error = ConfigError


def entries(value: Any, where: str, what: str | None = None) -> list[Any]:
    """An array of tables (``[[where]]``), as written; ``what``: the sentence when it is not a list."""
    if not isinstance(value, list):
        raise ConfigError(what or f"{where}: must be an array of tables ([[{where}]])")
    return value


def env_name(value: Any, key: str) -> str:
    """The name of an environment variable (a secret is named, never written in the file)."""
    if not isinstance(value, str) or not value.strip() or any(c in value for c in " =$"):
        raise ConfigError(f"{key}: missing or not an environment variable name")
    return value


def name_list(value: Any, key: str, what: str = "team names") -> tuple[str, ...]:
    """A non-empty list of non-empty strings."""
    if not isinstance(value, list) or not value or not all(isinstance(t, str) and t for t in value):
        raise ConfigError(f"{key}: must be a non-empty list of {what}")
    return tuple(value)


def is_number(value: Any) -> bool:
    """An int or a float, not a bool (TOML's true is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
