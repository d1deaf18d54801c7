"""A small warehouse for the alert tests: hourly cost lines per team (and GPU metrics where asked),
written straight into the tables the ingestors fill, with the ``cost_daily`` rollup refreshed as
every cost load does; and a config that mails finance and two leads through a loopback SMTP server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from gpufinops.derived import rollups
from gpufinops.warehouse import db
from tests.toml_config import config_file, recipient, smtp_report

AWS = "Amazon Web Services, Inc."
FINANCE, VISION, RESEARCH = "finance@example.com", "vision-lead@example.com", "research-lead@example.com"


@dataclass(frozen=True)
class Resource:
    """What the lines bill: the resource (``i-<team>`` when not named), its provider, its GPU model
    (None: no GPU) and its tags (``{"team": <team>}`` when not given)."""

    id: str | None = None
    provider: str = AWS
    gpu_model: str | None = "A100-40GB"
    tags: dict | None = None


def spend_lines(
    con,
    team: str | None,
    first: date,
    days: int,
    per_day: float,
    *,
    resource: Resource | None = None,
    source: str = "test",
    weekday_factors: list[float] | None = None,
) -> None:
    """``days`` days from ``first`` of 24 hourly usage lines costing ``per_day`` a day (times the
    weekday's factor, Monday first, when given), then the source's ``cost_daily`` rows, as a load does."""
    billed = resource or Resource()
    start = datetime.combine(first, datetime.min.time(), UTC)
    factors = weekday_factors or [1.0] * 7
    con.execute(
        'INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ResourceId", '
        '"ProviderName", "x_Team", "x_GpuModel", "x_GpuCount", "ServiceName", "Tags", "EffectiveCost", '
        '"BilledCost", "ListCost", "x_Source", "SkuId", "ChargeDescription") '
        "SELECT ts, ts + INTERVAL 1 HOUR, 'Usage', ?, ?, ?, ?, ?, 'EC2', ?, cost, cost, cost, ?, 'sku-gpu', "
        "'GPU instance hour' FROM (SELECT ?::TIMESTAMPTZ + to_hours(h) AS ts, "
        "CAST(? * (?::DOUBLE[])[isodow(?::TIMESTAMPTZ + to_hours(h))] / 24 AS DECIMAL(38, 15)) AS cost FROM range(?) t(h))",
        [
            billed.id or f"i-{team}",
            billed.provider,
            team,
            billed.gpu_model,
            8 if billed.gpu_model else None,
            json.dumps(billed.tags or {"team": team}),
            source,
            start,
            per_day,
            factors,
            start,
            days * 24,
        ],
    )
    rollups.refresh_cost_daily(con, source)


def add_spend(path: Path, team: str, first: date, days: int, per_day: float, **kwargs) -> None:
    with db.writer(path) as con:
        spend_lines(con, team, first, days, per_day, **kwargs)


def metric_rows(
    con, resource: str, team: str, first: datetime, hours: int, util_max: float, gpus: int = 8, source: str = "metrics"
) -> None:
    con.execute(
        "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, team, util_mean, util_p95, "
        "util_max, samples, source) SELECT ?::TIMESTAMPTZ + to_hours(h), ? || '-' || g, 'A100-40GB', ?, ?, ?, ?, ?, "
        "?, 60, ? FROM range(?) t(h), range(?) s(g)",
        [first, f"GPU-{resource}", resource, resource, team, util_max, util_max, util_max, source, hours, gpus],
    )


def write_config(
    tmp_path: Path, *, smtp_port: int = 25, budgets: str = "", alerts: str = "", attempts: int = 3
) -> Path:
    report = smtp_report(
        smtp_port,
        recipient(FINANCE, "finance"),
        recipient(VISION, "lead", ["vision"]),
        recipient(RESEARCH, "lead", ["research"]),
        send_attempts=attempts,
        retry_backoff_seconds=0.05,
        smtp_timeout_seconds=20,
    )
    return config_file(
        tmp_path,
        f"""
{report}
[alerts]
rules = ["budget", "anomaly", "idle_burn"]
{alerts}

{budgets}
""",
    )


def at(day: date, hour: int = 6) -> datetime:
    return datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=hour)
