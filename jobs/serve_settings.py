"""The ``[jobs]`` config section (when `gpufinops serve` runs each job) and the cron triggers it builds.

Crontab expressions have 5 fields everywhere; the ``[jobs]`` crons accept 6 (a leading seconds field)
for second-level test schedules, and ``every_seconds = N`` runs every job every N seconds instead.
Weekdays keep their crontab meaning (0 or 7 = Sunday), which APScheduler 3 does not (0 = Monday).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufinops.jobs.config_checks import ConfigError, check_table, numbers, validate_cron
from gpufinops.warehouse.ranges import NON_NEGATIVE, at_least

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

JOBS_KEYS = {
    "recommend",
    "report",
    "feed",
    "timezone",
    "misfire_grace_seconds",
    "ingest_retries",
    "retry_backoff_seconds",
    "every_seconds",
}
JOBS_NUMBERS = numbers(
    "jobs",
    {
        "misfire_grace_seconds": NON_NEGATIVE,
        "ingest_retries": NON_NEGATIVE,
        "retry_backoff_seconds": NON_NEGATIVE,
        "every_seconds": at_least(1),
    },
)
DEFAULT_RECOMMEND = "0 3 * * *"  # daily, after the night's billing exports have landed
DEFAULT_REPORT = "0 8 * * 1"  # Monday 08:00 in [report].timezone
DEFAULT_FEED = "*/30 * * * *"


@dataclass(frozen=True)
class JobSettings:
    recommend: str = DEFAULT_RECOMMEND
    report: str = DEFAULT_REPORT
    feed: str = DEFAULT_FEED
    timezone: str = "UTC"  # of the recommend and feed crons (the report uses [report].timezone)
    misfire_grace_seconds: int = 3600
    ingest_retries: int = 3  # extra attempts after a failed ingest
    retry_backoff_seconds: float = 60.0  # doubled after each failed attempt
    every_seconds: int | None = None  # tests/demos: every job on this interval instead of its cron


def validate_job_cron(expression: Any, key: str) -> None:
    """5 fields as everywhere, or 6 (a leading seconds field) for second-level test schedules."""
    if isinstance(expression, str) and len(expression.split()) == 6:
        try:
            cron_trigger(expression, "UTC")
        except ValueError as exc:
            raise ConfigError(f"{key}: invalid cron expression {expression!r}: {exc}") from None
        return
    validate_cron(expression, key)


def parse(section: Any) -> JobSettings:
    """``[jobs]`` → JobSettings; every problem is a ConfigError naming the key."""
    if section is None:
        return JobSettings()
    check_table(section, "jobs", JOBS_KEYS, JOBS_NUMBERS)
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key not in JOBS_KEYS:
            raise ConfigError(f"jobs.{key}: unknown key (allowed: {', '.join(sorted(JOBS_KEYS))})")
        where = f"jobs.{key}"
        if key in ("recommend", "report", "feed"):
            validate_job_cron(value, where)
        elif key == "timezone":
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(str(value))
            except (ZoneInfoNotFoundError, ValueError):
                raise ConfigError(f"{where}: unknown time zone {value!r}") from None
        elif key in ("misfire_grace_seconds", "ingest_retries", "every_seconds"):
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "every_seconds" else 0):
                raise ConfigError(
                    f"{where}: expected a whole number {'>= 1' if key == 'every_seconds' else '>= 0'}, got {value!r}"
                )
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{where}: expected a number of seconds >= 0, got {value!r}")
        values[key] = value
    return JobSettings(**values)


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
