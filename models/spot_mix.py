"""spot_mix: the share of an on-demand workload's capacity to run on spot, from its expected cost.

For each GPU resource billed only on-demand, the expected cost of moving a share of it to spot is

    share x on-demand cost x ratio x (1 + rework)

where ``ratio`` is the spot / on-demand price ratio expected over the coming weeks (the regression
forecast of :mod:`models.spot_forecast` where the warehouse has a price history; else what the fleet
itself paid for spot on that machine type and region; else the spot advisor's typical saving) and
``rework`` is the share of paid hours an interruption wastes: interruptions per month (the spot
advisor band's upper edge, e.g. "10-15%" -> 0.16 a month; the worst band when unknown) times the
hours lost each time (half a checkpoint interval plus the restart overhead, from tags or defaults),
over the hours run in a month.

Rules that never bend (pinned by tests): no spot for interactive notebooks; no spot for a job that
does not checkpoint and runs longer than ``max_uncheckpointed_run_hours``; latency-critical serving
only with an on-demand floor: at least ``spot_serving_min_replicas`` (3) replicas, of which
``spot_serving_floor_share`` (half, rounded up) stay on on-demand; one or two replicas never move.
Without any spot price a workload is withheld as unpriced, never shown
with zero savings.

The spot ratio and the rework are ``models.spot_prices``; the backtest of the decisions on a real price
history is ``models.spot_backtest``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl

from gpufinops.kernel import providers
from gpufinops.kernel.ranges import SHARE
from gpufinops.models import features, recommendation, run_reads, spot_forecast
from gpufinops.models.features import setting, tag
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, provider_code
from gpufinops.models.spot_prices import (
    DAYS_PER_MONTH,
    FORECAST_BEATS_LAST_VALUE,
    HOURS_PER_MONTH,
    band_of,
    price_evidence,
    rework_fraction,
    spot_prices,
)
from gpufinops.warehouse import gpu_charges, queries

# the spot prices' names, read through spot_mix by its users (the evaluation's baselines, tests)
__all__ = [
    "DAYS_PER_MONTH",
    "FORECAST_BEATS_LAST_VALUE",
    "HOURS_PER_MONTH",
    "SpotMixInputs",
    "SpotMixSettings",
    "band_of",
    "eligibility",
    "findings",
    "load",
    "price_evidence",
    "recommend",
    "rework_fraction",
    "spot_prices",
]

SERVING = ("online_inference", "serving", "inference", "realtime")
INTERACTIVE = ("notebook", "interactive", "dev")


@dataclass(frozen=True)
class SpotMixSettings:
    """The ``[models]`` keys this model reads (prefixed ``spot_``); tags override per workload."""

    spot_lookback_days: int = setting(30, doc="the billed usage read, days back from the newest GPU usage hour")
    spot_min_days: float = setting(7.0, doc="fewer days billed in the window: withheld as too little evidence")
    spot_checkpoint_interval_min: float = setting(
        60.0,
        doc="minutes between checkpoints (an interruption loses half of one); the tag checkpoint_interval_min wins",
    )
    spot_restart_overhead_min: float = setting(
        20.0, doc="minutes to resume after an interruption; the tag restart_overhead_min wins"
    )
    spot_max_uncheckpointed_run_hours: float = setting(
        2.0, doc="a job that does not checkpoint and runs longer than this, hours, never goes to spot"
    )
    spot_max_share: float = setting(1.0, SHARE, "the share of a batch or training workload's capacity moved to spot")
    spot_serving_floor_share: float = setting(
        0.5, SHARE, "the share of a latency-critical service's replicas kept on on-demand (rounded up, at least one)"
    )
    spot_serving_min_replicas: int = setting(
        3, doc="fewer replicas: a latency-critical service stays on on-demand (a lost one leaves too little)"
    )
    spot_unknown_band_interruptions: float = setting(
        1.0, doc="interruptions a month assumed where the spot advisor has no band (the worst band's upper edge)"
    )
    spot_min_savings_fraction: float = setting(
        0.2, doc="the least expected saving after interruption rework, a fraction of the on-demand cost"
    )
    spot_min_monthly_savings_usd: float = setting(25.0, doc="a move must save at least this, USD a month")

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> SpotMixSettings:
        values = features.parse_settings(cls, section)
        return cls(**values)


# ---- the rules ----------------------------------------------------------------------------------


def eligibility(
    workload: str | None,
    checkpointing: bool,
    latency_critical: bool,
    longest_run_hours: float,
    replicas: int,
    s: SpotMixSettings,
) -> tuple[float, str | None]:
    """(share of capacity that may go to spot, reason when none may). The rules that never bend."""
    if workload in INTERACTIVE:
        return 0.0, "interactive workload: an interruption loses a person's session"
    if latency_critical:
        floor = max(1, math.ceil(replicas * s.spot_serving_floor_share))
        if replicas < s.spot_serving_min_replicas or replicas - floor < 1:
            return 0.0, (
                f"latency-critical serving with {replicas} replica(s): too few to keep an on-demand floor "
                f"(needs {s.spot_serving_min_replicas})"
            )
        return (replicas - floor) / replicas, None
    if not checkpointing and longest_run_hours > s.spot_max_uncheckpointed_run_hours:
        return 0.0, (
            f"does not checkpoint and runs {longest_run_hours:.0f} h at a stretch "
            f"(> {s.spot_max_uncheckpointed_run_hours:g} h): an interruption loses the whole run"
        )
    return s.spot_max_share, None


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    return value in ("true", "yes", "1", "on")


def _number(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


# ---- recommendations ----------------------------------------------------------------------------


def recommend(
    con: duckdb.DuckDBPyConnection, settings: dict | SpotMixSettings | None = None, now: datetime | None = None
) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld) for every GPU workload billed only on-demand over the lookback."""
    return recommendation.from_warehouse(
        con, settings, SpotMixSettings, load, lambda inputs, s: findings(inputs, s, now)
    )


@dataclass(frozen=True)
class SpotMixInputs:
    """What spot_mix reads: the on-demand GPU workloads over the lookback (queries.spot_mix_usage), the
    spot advisor bands, what the fleet paid for spot and the spot price history."""

    usage: pl.DataFrame
    bands: pl.DataFrame
    fleet_ratios: pl.DataFrame
    price_changes: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: SpotMixSettings) -> SpotMixInputs:
    """Read once per run for a lookback (models/run_reads.py): commitment reads them again at spot_mix's
    default settings to leave out what spot_mix moves."""
    return run_reads.shared(con, "spot_mix", settings.spot_lookback_days, lambda: _read(con, settings))


def _read(con: duckdb.DuckDBPyConnection, settings: SpotMixSettings) -> SpotMixInputs:
    start = gpu_charges.window_start(con, settings.spot_lookback_days)
    usage = pl.DataFrame() if start is None else queries.spot_mix_usage(con, start=start)
    if usage.is_empty():
        return SpotMixInputs(usage, pl.DataFrame(), pl.DataFrame(), pl.DataFrame())
    return SpotMixInputs(
        usage,
        queries.spot_bands(con),
        queries.fleet_spot_ratios(con, start=start),
        spot_forecast.warehouse_price_changes(con),
    )


def findings(inputs: SpotMixInputs, settings: SpotMixSettings, now: datetime | None = None) -> Findings:
    """The recommend step: each workload's spot share and expected saving; no connection."""
    if inputs.usage.is_empty():
        return Findings()
    usage = inputs.usage.with_columns(
        pl.col("provider_name").map_elements(provider_code, return_dtype=pl.Utf8).alias("provider"),
        *[
            pl.col("tags").map_elements(_tag_reader(k), return_dtype=pl.Utf8).alias(f"tag_{k}")
            for k in (
                "workload",
                "checkpointing",
                "latency_critical",
                "checkpoint_interval_min",
                "restart_overhead_min",
            )
        ],
    )
    replicas = usage.group_by("provider", "region", "instance_type", "team", "tag_workload").agg(
        pl.len().alias("replicas")
    )
    usage = usage.join(
        replicas, on=["provider", "region", "instance_type", "team", "tag_workload"], how="left", nulls_equal=True
    )
    prices = price_evidence(inputs.bands, inputs.fleet_ratios, inputs.price_changes)
    recs, withheld = [], []
    for row in usage.sort("resource_id").iter_rows(named=True):
        rec, reason = _assess(row, prices, inputs.bands, settings, now)
        if rec is not None:
            recs.append(rec)
        elif reason is not None:
            withheld.append(Withheld.from_detail("spot_mix", row, reason))
    return Findings(sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld)


def _tag_reader(key: str) -> Callable[[str | None], str | None]:
    return lambda tags: tag(tags, key)


def _assess(
    row: dict, prices: dict, bands: pl.DataFrame, s: SpotMixSettings, now: datetime | None
) -> tuple[Recommendation | None, str | None]:
    if row["provider"] not in providers.cloud_codes():
        return None, None  # no spot market (on-prem)
    workload = row["tag_workload"]
    checkpointing = bool(_flag(row["tag_checkpointing"]))  # unknown: assume it does not
    latency = _flag(row["tag_latency_critical"])
    latency_critical = latency if latency is not None else workload in SERVING
    share, rule = eligibility(workload, checkpointing, latency_critical, row["longest_run_hours"], row["replicas"], s)
    if rule is not None:
        return None, None  # not a candidate: nothing to withhold
    window_hours = (row["last_hour"] - row["first_hour"]).total_seconds() / 3600 + 1
    window_days = window_hours / 24
    if window_days < s.spot_min_days:
        return None, f"only {window_days:.1f} days billed (< {s.spot_min_days:g}): too little evidence"
    price = prices.get((row["provider"], row["region"], row["instance_type"]))
    if price is None:
        return None, (
            f"unpriced: no spot price for {row['instance_type']} in {row['region']} "
            "(no price history, fleet spot usage or spot advisor entry)"
        )
    band = band_of(bands, row["provider"], row["region"], row["instance_type"])
    interruptions = band["band_max_pct"] / 100 if band else s.spot_unknown_band_interruptions
    ckpt_h = _number(row["tag_checkpoint_interval_min"], s.spot_checkpoint_interval_min) / 60
    restart_h = _number(row["tag_restart_overhead_min"], s.spot_restart_overhead_min) / 60
    lost_h = (ckpt_h if checkpointing else row["mean_run_hours"]) / 2 + restart_h
    run_share = min(1.0, row["billed_hours"] / window_hours)
    rework = rework_fraction(interruptions, lost_h, run_share)
    saving_fraction = 1 - price["ratio"] * (1 + rework)
    monthly_cost = row["cost_usd"] / window_days * DAYS_PER_MONTH
    monthly_savings = money(monthly_cost * share * saving_fraction)
    if saving_fraction < s.spot_min_savings_fraction or monthly_savings < Decimal(str(s.spot_min_monthly_savings_usd)):
        return None, None
    volatility = price.get("volatility_weekly")
    confidence = (
        0.9
        * min(1.0, window_days / 14)
        * {1: 1.0, 2: 0.95, 3: 0.85}[price["rank"]]
        * (0.8 if band is None else (0.85 if band["band_index"] >= 3 else 1.0))
        * (1 - min(0.3, 2 * volatility) if volatility else 1.0)
    )
    current = {
        "instance_type": row["instance_type"],
        "gpu_model": row["gpu_model"],
        "gpu_count": row["gpu_count"],
        "pricing": "on_demand",
        "monthly_cost_usd": money(monthly_cost),
    }
    proposed = {
        **current,
        "pricing": "spot" if share >= 1 else "spot_mix",
        "spot_share": round(share, 4),
        "action": f"run {share:.0%} of it on spot" + ("" if share >= 1 else f", keep {1 - share:.0%} on-demand"),
        "on_demand_share": round(1 - share, 4),
        "monthly_cost_usd": money(monthly_cost) - monthly_savings,
    }
    evidence = {
        "workload": workload,
        "checkpointing": checkpointing,
        "latency_critical": latency_critical,
        "replicas": row["replicas"],
        "longest_run_hours": row["longest_run_hours"],
        "runs": row["runs"],
        "window_days": round(window_days, 2),
        "billed_hours": row["billed_hours"],
        "spot_ratio": round(price["ratio"], 4),
        "spot_price_source": price["source"],
        "price_volatility_weekly": round(volatility, 4) if volatility is not None else None,
        "interruption_band": band["band_label"] if band else "unknown (worst band assumed)",
        "interruptions_per_month": interruptions,
        "checkpoint_interval_min": round(ckpt_h * 60, 1),
        "restart_overhead_min": round(restart_h * 60, 1),
        "hours_lost_per_interruption": round(lost_h, 3),
        "rework_fraction": round(rework, 6),
        "expected_saving_fraction": round(saving_fraction, 4),
        "monthly_on_demand_cost_usd": money(monthly_cost),
    }
    if volatility:
        worst = 1 - min(1.0, price["ratio"] * math.exp(volatility * 2)) * (1 + rework)
        evidence["monthly_savings_if_ratio_up_2sd_usd"] = money(monthly_cost * share * worst)
    risk = (
        "Spot capacity can be reclaimed at short notice; the job resumes from its last checkpoint "
        f"(about {lost_h:.1f} h of work redone per interruption)."
        if not latency_critical
        else f"Keep {1 - share:.0%} of replicas on on-demand as the floor; spot replicas can vanish under load."
    )
    rec = recommendation.on_resource(  # row["provider"] is a cloud's code already: on_resource keeps it
        "spot_mix",
        row,
        (),
        workload,
        now,
        current=current,
        proposed=proposed,
        monthly_savings_usd=monthly_savings,
        confidence=round(confidence, 3),
        risk=risk,
        evidence=evidence,
    )
    return rec, None
