"""The ``[jobs]`` config section (when `gpufinops serve` runs each job) and the cron triggers it builds.

Crontab expressions have 5 fields everywhere; the ``[jobs]`` crons accept 6 (a leading seconds field)
for second-level test schedules, and ``every_seconds = N`` runs every job every N seconds instead.
Weekdays keep their crontab meaning (0 or 7 = Sunday), which APScheduler 3 does not (0 = Monday).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufinops.jobs.config_checks import ConfigError, ConfigSection, validate_cron
from gpufinops.kernel.options import Check, Section, option
from gpufinops.kernel.ranges import NON_NEGATIVE, at_least

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

DEFAULT_RECOMMEND = "0 3 * * *"  # daily, after the night's billing exports have landed
DEFAULT_REPORT = "0 8 * * 1"  # Monday 08:00 in [report].timezone
DEFAULT_FEED = "*/30 * * * *"


def validate_job_cron(expression: Any, key: str) -> None:
    """5 fields as everywhere, or 6 (a leading seconds field) for second-level test schedules."""
    if isinstance(expression, str) and len(expression.split()) == 6:
        try:
            cron_trigger(expression, "UTC")
        except ValueError as exc:
            raise ConfigError(f"{key}: invalid cron expression {expression!r}: {exc}") from None
        return
    validate_cron(expression, key)


def _cron(value: Any, key: str) -> Any:
    validate_job_cron(value, key)
    return value


def _timezone(value: Any, key: str) -> Any:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(str(value))
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{key}: unknown time zone {value!r}") from None
    return value


def _whole(low: int) -> Check:
    def check(value: Any, key: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{key}: expected a whole number >= {low}, got {value!r}")
        return value

    return check


def _seconds(value: Any, key: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{key}: expected a number of seconds >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class JobSettings(ConfigSection):
    """``[jobs]``: when `gpufinops serve` runs each job."""

    recommend: str = option(DEFAULT_RECOMMEND, "cron of the recommend job (5 fields, or 6 with seconds)", check=_cron)
    report: str = option(DEFAULT_REPORT, "cron of the weekly report, in [report].timezone", check=_cron)
    feed: str = option(DEFAULT_FEED, "cron of the recommendation feed push ([[api.webhooks]])", check=_cron)
    timezone: str = option("UTC", "time zone of the recommend and feed crons", check=_timezone)
    misfire_grace_seconds: int = option(
        3600, "how late a missed run may still start, seconds", range=NON_NEGATIVE, check=_whole(0)
    )
    ingest_retries: int = option(3, "extra attempts after a failed ingest", range=NON_NEGATIVE, check=_whole(0))
    retry_backoff_seconds: float = option(
        60.0, "wait before a retry, doubled after each failure", range=NON_NEGATIVE, check=_seconds
    )
    every_seconds: int | None = option(
        None, "tests and demos: every job on this interval instead of its cron", range=at_least(1), check=_whole(1)
    )


def parse(section: Any) -> JobSettings:
    """``[jobs]`` → JobSettings; every problem is a ConfigError naming the key."""
    return JobSettings.parse(section, "jobs")


SECTION = Section("jobs", parse, (JobSettings,))


_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def crontab_weekdays(field: str) -> str:
    """A crontab day-of-week field (0 or 7 = Sunday) in APScheduler 3's terms (0 = Monday!):
    APScheduler 3's ``from_crontab`` passes the numbers through, so "0 8 * * 1" would fire on Tuesday.
    Numbers become names; a range starting on Sunday is split ("0-5" → "sun,mon-fri")."""
    parts: list[str] = []
    for part in field.split(","):
        base, _, step = part.partition("/")
        if base == "*" and step.isdigit():  # crontab counts the step from Sunday
            parts.extend(_CRON_DAYS[d] for d in range(0, 7, int(step)))
            continue
        bounds = base.split("-")
        if not all(b.isdigit() for b in bounds):
            parts.append(part)
            continue
        names = [_CRON_DAYS[int(b)] if int(b) < len(_CRON_DAYS) else b for b in bounds]
        if len(bounds) == 2 and int(bounds[0]) == 0 and int(bounds[1]) > 0 and not step:
            parts.append(f"sun,mon-{names[1]}")
            continue
        parts.append("-".join(names) + (f"/{step}" if step else ""))
    return ",".join(parts)


def cron_trigger(expression: str, tz: str) -> CronTrigger:
    """5 fields (crontab) or 6 (a leading seconds field), weekdays as crontab counts them."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expression.split()
    second = fields.pop(0) if len(fields) == 6 else "0"
    minute, hour, day, month, dow = fields
    return CronTrigger(
        second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=crontab_weekdays(dow), timezone=tz
    )
