"""A small warehouse for the alert tests: hourly cost lines per team (and GPU metrics where asked),
written straight into the tables the ingestors fill, with the ``cost_daily`` rollup refreshed as
every cost load does; and a config that mails finance and two leads through a loopback SMTP server."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from warehouse import db, rollups

AWS = "Amazon Web Services, Inc."
FINANCE, VISION, RESEARCH = "finance@example.com", "vision-lead@example.com", "research-lead@example.com"


def add_spend(path: Path, team: str, first: date, days: int, per_day: float, *, provider: str = AWS,
              resource: str | None = None, gpu_model: str | None = "A100-40GB", tags: dict | None = None,
              source: str = "test") -> None:
    """``days`` days from ``first`` of 24 hourly usage lines costing ``per_day`` a day in all."""
    start = datetime.combine(first, datetime.min.time(), timezone.utc)
    with db.writer(path) as con:
        con.execute(
            'INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ResourceId", '
            '"ProviderName", "x_Team", "x_GpuModel", "x_GpuCount", "ServiceName", "Tags", "EffectiveCost", '
            '"BilledCost", "ListCost", "x_Source", "SkuId", "ChargeDescription") '
            "SELECT ?::TIMESTAMPTZ + to_hours(h), ?::TIMESTAMPTZ + to_hours(h + 1), 'Usage', ?, ?, ?, ?, ?, 'EC2', ?, "
            "?::DECIMAL(38, 15), ?::DECIMAL(38, 15), ?::DECIMAL(38, 15), ?, 'sku-gpu', 'GPU instance hour' "
            "FROM range(?) t(h)",
            [start, start, resource or f"i-{team}", provider, team, gpu_model, 8 if gpu_model else None,
             json.dumps(tags or {"team": team}), per_day / 24, per_day / 24, per_day / 24, source, days * 24])
        rollups.refresh_cost_daily(con, source)


def add_metrics(path: Path, resource: str, team: str, first: datetime, hours: int, util_max: float,
                gpus: int = 8) -> None:
    with db.writer(path) as con:
        con.execute(
            "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, team, util_mean, util_p95, "
            "util_max, samples, source) SELECT ?::TIMESTAMPTZ + to_hours(h), ? || '-' || g, 'A100-40GB', ?, ?, ?, ?, ?, "
            "?, 60, 'metrics' FROM range(?) t(h), range(?) s(g)",
            [first, f"GPU-{resource}", resource, resource, team, util_max, util_max, util_max, hours, gpus])


def write_config(tmp_path: Path, *, smtp_port: int = 25, budgets: str = "", alerts: str = "",
                 attempts: int = 3) -> Path:
    path = tmp_path / "gpufinops.toml"
    path.write_text(f"""
[warehouse]
path = "{tmp_path / 'wh' / 'gpufinops.duckdb'}"

[report]
sender = "gpufinops@example.com"
smtp_host = "127.0.0.1"
smtp_port = {smtp_port}
smtp_starttls = false
send_attempts = {attempts}
retry_backoff_seconds = 0.05
smtp_timeout_seconds = 20

[[report.recipients]]
email = "{FINANCE}"
role = "finance"

[[report.recipients]]
email = "{VISION}"
role = "lead"
teams = ["vision"]

[[report.recipients]]
email = "{RESEARCH}"
role = "lead"
teams = ["research"]

[alerts]
rules = ["budget", "anomaly", "idle_burn"]
{alerts}

{budgets}
""")
    return path


def at(day: date, hour: int = 6) -> datetime:
    return datetime.combine(day, datetime.min.time(), timezone.utc) + timedelta(hours=hour)
