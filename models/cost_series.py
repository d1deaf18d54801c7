"""The daily cost series the forecast and the anomalies fit: one per (team, provider), on a gapless grid."""

from __future__ import annotations

from datetime import UTC, date, datetime

import duckdb
import polars as pl

from gpufinops.models.frames import as_date, as_datetime
from gpufinops.models.recommendation import provider_code
from gpufinops.warehouse import allocation_queries


def daily_series(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, end: date | None, daily: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The (team, provider) daily series on a gapless grid; ``daily`` (the columns of
    ``allocation_queries.team_cost_series``: teams as they carry cost, shared GPUs by allocation) replaces
    the query, e.g. a budget's own scope of the cost lines."""
    daily = allocation_queries.team_cost_series(con, teams=teams) if daily is None else daily
    if daily.is_empty():
        return daily.with_columns(pl.lit(None, pl.Utf8).alias("provider"))
    daily = daily.with_columns(
        pl.col("provider_name").map_elements(provider_code, return_dtype=pl.Utf8).alias("provider")
    )
    complete_until = daily["complete_until"].max()
    if complete_until is not None:  # a day the data only partly covers (an export mid-day) is not a low day
        until = as_datetime(complete_until)
        daily = daily.filter(pl.col("day") < until.astimezone(UTC).date())
        if daily.is_empty():
            return daily.select("day", "team", "provider", "cost_usd")
    # rounded to micro-dollars: a parallel float sum's last bits differ run to run, and must not move the fit
    daily = daily.group_by("day", "team", "provider").agg(pl.col("cost_usd").sum().round(6))
    last = end or as_date(daily["day"].max())
    first = as_date(daily["day"].min())
    grid = pl.DataFrame({"day": pl.date_range(first, last, "1d", eager=True)})
    keys = daily.select("team", "provider").unique()
    # a day inside the data's span without lines for a series cost nothing on it; a series without a
    # team (unattributed spend) is matched too (nulls_equal): scope "all" forecasts every dollar
    return (
        keys.join(grid, how="cross")
        .join(daily, on=["team", "provider", "day"], how="left", nulls_equal=True)
        .with_columns(pl.col("cost_usd").fill_null(0.0))
        .sort("team", "provider", "day", nulls_last=True)
    )


def as_day(value: datetime | date) -> date:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.date()
    return value
