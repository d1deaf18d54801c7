"""Cost anomalies: days whose cost leaves the forecast model's one-step-ahead band.

A day is an anomaly when its cost is ``anomaly_z`` robust sigmas, a floor in dollars and a share of the
expectation away from what the local-level model (``models.forecast_fit``) expected. The level is
updated with clipped values, so one spike does not move the expectation; two out-of-band days of the
same sign in a row are a level shift and reset it. Each anomaly lists the line items (resource,
service, SKU, description) whose cost moved most against their mean of the week before.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import duckdb
import numpy as np
import polars as pl

from gpufinops.models.cost_series import as_day, daily_series
from gpufinops.models.forecast_fit import ForecastParams, fit_series, level_filter
from gpufinops.models.recommendation import provider_code
from gpufinops.warehouse import queries

ANOMALY_COLUMNS = {
    "day": pl.Date,
    "team": pl.Utf8,
    "provider": pl.Utf8,
    "cost_usd": pl.Float64,
    "expected_usd": pl.Float64,
    "lower_usd": pl.Float64,
    "upper_usd": pl.Float64,
    "direction": pl.Utf8,
    "top_line_items": pl.Utf8,
}


def series_anomalies(y: np.ndarray, days: list[date], params: ForecastParams = ForecastParams()) -> list[dict]:
    """Out-of-band days of one series: (index, expected, lower, upper, direction)."""
    if len(y) < params.min_season_days:
        return []  # too short to know what is normal: no anomaly is claimed
    fit = fit_series(y, days, params)
    dow = np.array([d.weekday() for d in days])
    f = fit.factors[dow]
    x = np.where(f > 0, y / np.where(f > 0, f, 1), y)
    preds, _ = level_filter(x, fit.alpha, fit.sigma, params.anomaly_z)
    out = []
    for t in range(7, len(y)):
        expected = preds[t] * f[t]
        band = max(params.anomaly_z * fit.sigma, params.anomaly_min_usd, params.anomaly_min_share * abs(expected))
        if abs(y[t] - expected) > band:
            out.append(
                {
                    "index": t,
                    "expected_usd": expected,
                    "lower_usd": max(0.0, expected - band),
                    "upper_usd": expected + band,
                    "direction": "spike" if y[t] > expected else "drop",
                }
            )
    return out


def cost_anomalies(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    start: datetime | date | None = None,
    end: datetime | date | None = None,
    params: ForecastParams = ForecastParams(),
    daily: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Days in [start, end) whose cost left the expected band, with the line items that moved.

    The whole history is used to learn what is normal; ``start``/``end`` only choose which days
    are reported.
    """
    daily = daily_series(con, teams, None, daily)
    if daily.is_empty():
        return pl.DataFrame(schema=ANOMALY_COLUMNS)
    lo = as_day(start) if start is not None else date.min
    hi = as_day(end) if end is not None else date.max
    found = []
    for (team, provider), part in daily.group_by("team", "provider", maintain_order=True):
        y, days = part["cost_usd"].to_numpy(), part["day"].to_list()
        for a in series_anomalies(y, days, params):
            day = days[a["index"]]
            if lo <= day < hi:
                found.append(
                    {
                        "day": day,
                        "team": team,
                        "provider": provider,
                        "cost_usd": float(y[a["index"]]),
                        **{k: a[k] for k in ("expected_usd", "lower_usd", "upper_usd", "direction")},
                    }
                )
    if not found:
        return pl.DataFrame(schema=ANOMALY_COLUMNS)
    items = _line_item_deltas(con, found, teams, params)
    for a in found:
        a["top_line_items"] = json.dumps(items.get((a["day"], a["team"], a["provider"], a["direction"]), []))
    return pl.DataFrame(found, schema=ANOMALY_COLUMNS).sort("day", "team", "provider", nulls_last=True)


def _line_item_deltas(
    con: duckdb.DuckDBPyConnection, found: list[dict], teams: list[str] | None, params: ForecastParams
) -> dict[tuple, list[dict]]:
    """Per anomaly, the line items whose cost moved most in its direction against their mean over
    the ``baseline_days`` before it (an item absent on a day cost 0 that day)."""
    first = min(a["day"] for a in found) - timedelta(days=params.baseline_days)
    last = max(a["day"] for a in found) + timedelta(days=1)
    to_ts = lambda d: datetime(d.year, d.month, d.day, tzinfo=UTC)  # noqa: E731
    lines = queries.daily_cost_by_line_item(con, teams=teams, start=to_ts(first), end=to_ts(last))
    lines = lines.with_columns(
        pl.col("provider_name").map_elements(provider_code, return_dtype=pl.Utf8).alias("provider")
    )
    keys = ["resource_id", "service", "sku_id", "charge_description"]
    out: dict[tuple, list[dict]] = {}
    for a in found:
        same = (pl.col("provider") == a["provider"]) & (
            pl.col("team").is_null() if a["team"] is None else pl.col("team") == a["team"]
        )
        part = lines.filter(same)
        base_lo = a["day"] - timedelta(days=params.baseline_days)
        today = part.filter(pl.col("day") == a["day"]).group_by(keys).agg(pl.col("cost_usd").sum())
        before = (
            part.filter((pl.col("day") >= base_lo) & (pl.col("day") < a["day"]))
            .group_by(keys)
            .agg((pl.col("cost_usd").sum() / params.baseline_days).alias("baseline_usd"))
        )
        moved = (
            today.join(before, on=keys, how="full", coalesce=True, nulls_equal=True)
            .with_columns(pl.col("cost_usd").fill_null(0.0), pl.col("baseline_usd").fill_null(0.0))
            .with_columns((pl.col("cost_usd") - pl.col("baseline_usd")).alias("delta_usd"))
        )
        sign = 1 if a["direction"] == "spike" else -1
        floor = max(0.01, 0.01 * abs(a["cost_usd"] - a["expected_usd"]))  # ignore items that barely moved
        moved = moved.filter(pl.col("delta_usd") * sign >= floor).sort(pl.col("delta_usd") * sign, descending=True)
        out[(a["day"], a["team"], a["provider"], a["direction"])] = [
            {
                **{k: r[k] for k in keys},
                "cost_usd": round(r["cost_usd"], 2),
                "baseline_usd": round(r["baseline_usd"], 2),
                "delta_usd": round(r["delta_usd"], 2),
            }
            for r in moved.head(params.top_line_items).iter_rows(named=True)
        ]
    return out
