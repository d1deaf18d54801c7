"""The spot price a spot_mix finding expects, and the risk it prices: the spot / on-demand ratio (the
regression forecast where the warehouse has a price history, else what the fleet paid for spot, else the
spot advisor's typical saving), the advisor's interruption band and the share of paid hours an
interruption's redone work costs."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.models import spot_forecast
from gpufinops.models.recommendation import provider_code
from gpufinops.warehouse import queries

DAYS_PER_MONTH = 30.4375
HOURS_PER_MONTH = DAYS_PER_MONTH * 24

# Which spot ratio a finding prices with, chosen by the quality of the decisions each yields in
# :func:`backtest` (mean abs error of the predicted saving per decision, on the real GCP history), not by
# the forecast's own MAPE: False while the ridge forecast loses there to the last observed ratio, so the
# last value is used (and named in the finding's price source). tests/test_spot_decision.py re-runs the
# backtest and fails when this no longer matches it.
FORECAST_BEATS_LAST_VALUE = False


def spot_prices(con: duckdb.DuckDBPyConnection, start: datetime | None) -> dict[tuple, dict]:
    """(provider, region, instance type) -> the best spot price evidence available, with its source."""
    return price_evidence(
        queries.spot_bands(con), queries.fleet_spot_ratios(con, start=start), spot_forecast.warehouse_price_changes(con)
    )


def price_evidence(bands: pl.DataFrame, fleet_ratios: pl.DataFrame, changes: pl.DataFrame) -> dict[tuple, dict]:
    """:func:`spot_prices` over frames already read: the forecast where there is a price history, else
    what the fleet paid for spot, else the spot advisor's typical saving."""
    out: dict[tuple, dict] = {}
    for r in bands.iter_rows(named=True):
        if r["savings_pct"] is not None:
            out[(r["provider"], r["region"], r["instance_type"])] = {
                "ratio": 1 - r["savings_pct"] / 100,
                "source": f"spot advisor typical saving ({r['source']})",
                "volatility_weekly": None,
                "rank": 3,
            }
    for r in fleet_ratios.iter_rows(named=True):
        key = (provider_code(r["provider_name"]), r["region"], r["instance_type"])
        out[key] = {
            "ratio": r["spot_ratio"],
            "source": f"spot paid by the fleet ({r['spot_hours']} h)",
            "volatility_weekly": None,
            "rank": 2,
        }
    if not changes.is_empty():
        for r in spot_forecast.forecast_ratios(changes).iter_rows(named=True):
            use_forecast = FORECAST_BEATS_LAST_VALUE or r["method"] == "last_value"
            source = (
                f"{r['method']} forecast of the spot/on-demand ratio, next {r['horizon_weeks']} weeks"
                if use_forecast
                else "last spot/on-demand ratio of the price history (the ridge forecast loses to it in the "
                "spot-mix backtest, so it is not used)"
            )
            out[(r["provider"], r["region"], r["instance_type"])] = {
                "ratio": r["ratio_forecast"] if use_forecast else r["ratio_now"],
                "ratio_now": r["ratio_now"],
                "ratio_forecast": r["ratio_forecast"],
                "volatility_weekly": r["volatility_weekly"],
                "source": source,
                "rank": 1,
            }
    return out


def band_of(bands: pl.DataFrame, provider: str, region: str, instance_type: str) -> dict | None:
    hit = bands.filter(
        (pl.col("provider") == provider) & (pl.col("region") == region) & (pl.col("instance_type") == instance_type)
    )
    return hit.row(0, named=True) if hit.height else None


def rework_fraction(interruptions_per_month: float, lost_hours: float, run_share: float) -> float:
    """Share of the hours paid on spot that redo lost work: interruptions a month (scaled to the
    share of the month it runs) x hours lost each, over the hours it runs in a month."""
    hours = HOURS_PER_MONTH * max(run_share, 1e-9)
    return interruptions_per_month * run_share * lost_hours / hours
