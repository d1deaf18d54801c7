"""``ConfigError`` and the value checks the config sections share.

A leaf module (it imports nothing of gpufinops but the leaf ``warehouse.ranges``), so every section's
settings module can raise the one error type and reuse the checks without importing the loader
(``jobs.config``), which imports them all. A section's numeric keys are declared with their ranges
(:func:`numbers`) and checked by :func:`check_table`, the same ``Range`` the source options and the
``[models]`` settings declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufinops.warehouse.ranges import Range

NUMBERS: dict[str, Mapping[str, Range]] = {}  # every section's declared numeric keys (the tests iterate them)


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


def numbers(section: str, declared: Mapping[str, Range]) -> Mapping[str, Range]:
    """Declare the numeric keys of ``section`` and their ranges (checked by check_table)."""
    NUMBERS[section] = declared
    return declared


def check_table(
    section: Any,
    name: str,
    allowed: set[str] | frozenset[str] | tuple[str, ...],
    ranges: Mapping[str, Range] | None = None,
) -> dict[str, Any]:
    """``section`` as a table whose every key is one of ``allowed`` (a typo is named, with the keys there are)
    and whose numeric keys (``ranges``, from :func:`numbers`) are within their declared range."""
    if not isinstance(section, dict):
        raise ConfigError(f"{name}: must be a table")
    for option in section:
        if option not in allowed:
            import difflib

            near = difflib.get_close_matches(str(option), sorted(allowed), n=1)
            guess = f"did you mean `{near[0]}`? " if near else ""
            raise ConfigError(f"{name}.{option}: unknown key ({guess}allowed: {', '.join(sorted(allowed))})")
    for option, declared in (ranges or {}).items():
        if option in section and (problem := declared.problem(section[option])):
            raise ConfigError(f"{name}.{option}: {problem}")
    return section


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
