"""Hourly GPU cost lines and price rows for the spot_mix / commitment tests (only the columns they read)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

START = datetime(2026, 9, 7, tzinfo=UTC)  # a Monday
AWS, GCP = "Amazon Web Services, Inc.", "Google Cloud"


@dataclass(frozen=True)
class Machine:
    """What a resource runs on: the provider and region, the instance type and its GPUs."""

    provider: str = AWS
    region: str = "us-east-1"
    instance_type: str = "p4d.24xlarge"
    gpu_model: str = "A100-40GB"
    gpu_count: int = 8


@dataclass(frozen=True)
class Price:
    """How its hours are billed: the effective rate per hour, the list rate (the rate when not given)
    and the FOCUS pricing category."""

    rate: float = 21.957642
    list_rate: float | None = None
    pricing: str = "Standard"


def add_machine(
    con,
    resource_id: str,
    *,
    hours: list[int] | range,
    machine: Machine = Machine(),
    team: str = "nlp",
    price: Price = Price(),
    tags: dict | None = None,
) -> None:
    """One usage line per hour offset (from START) in ``hours``."""
    con.execute(
        'INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ResourceId", '
        '"ProviderName", "RegionId", "x_InstanceType", "x_GpuModel", "x_GpuCount", "x_Team", "PricingCategory", '
        '"Tags", "EffectiveCost", "BilledCost", "ListCost") '
        "SELECT ?::TIMESTAMPTZ + to_hours(h), ?::TIMESTAMPTZ + to_hours(h + 1), 'Usage', ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ? FROM unnest(?::BIGINT[]) t(h)",
        [
            START,
            START,
            resource_id,
            machine.provider,
            machine.region,
            machine.instance_type,
            machine.gpu_model,
            machine.gpu_count,
            team,
            price.pricing,
            json.dumps(tags or {}),
            price.rate,
            price.rate,
            price.list_rate if price.list_rate is not None else price.rate,
            list(hours),
        ],
    )


def add_metrics(con, resource_id: str, *, hours: list[int] | range, util_max: float) -> None:
    con.execute(
        "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, resource_id, util_max, util_mean, util_p95) "
        "SELECT ?::TIMESTAMPTZ + to_hours(h), ?, ?, ?, ?, ? FROM unnest(?::BIGINT[]) t(h)",
        [START, f"GPU-{resource_id}", resource_id, util_max, util_max, util_max, list(hours)],
    )


def add_band(con, region: str, instance_type: str, band_index: int, band_max_pct: int, savings_pct: int) -> None:
    con.execute(
        "INSERT INTO spot_interruption_bands VALUES ('aws', ?, 'Linux', ?, ?, ?, ?, ?, 'test-feed.json', ?)",
        [region, instance_type, band_index, f"band {band_index}", band_max_pct, savings_pct, START],
    )


def add_price(
    con, provider: str, region: str, instance_type: str, pricing: str, price: float, effective_from: datetime = START
) -> None:
    con.execute(
        "INSERT INTO price_history VALUES (?, ?, ?, ?, ?, ?, 'USD', 'test', 'run')",
        [provider, region, instance_type, pricing, effective_from, price],
    )


def workhours(days: int) -> list[int]:
    """Weekdays 09–18 UTC from START (a Monday)."""
    return [d * 24 + h for d in range(days) for h in range(9, 18) if d % 7 < 5]
