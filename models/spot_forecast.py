"""A regression forecast of the spot / on-demand price ratio per (provider, region, machine type).

Spot prices move in steps (GCP reprices spot every week or two; AWS more often), and whole
families move together. The history is resampled to a weekly panel of log ratios; for each
horizon h (weeks) a ridge regression predicts the change ``log r[t+h] - log r[t]`` from the
series' own recent changes (1, 4, 13, 26 weeks), how often it changed lately, the market's and
the machine family's mean changes over the same weeks, and where the series sits against its
family and region. Predicting the change (not the level) makes "no change" the model's natural
fall-back: the last-value baseline is the zero of the target.

Quality (``quality()``): walk-forward over the last ``test_days`` of the history; at each weekly
origin the model is fitted only on targets already known then, and the MAPE of the forecast ratio
is reported beside the last-value baseline's, for every horizon.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import polars as pl

from gpufinops.models.frames import as_datetime
from gpufinops.warehouse import queries

if TYPE_CHECKING:  # scikit-learn is imported where a ridge is fitted: ~0.9 s that every command validating
    from sklearn.linear_model import Ridge  # a [models] section (and the dashboard) would otherwise pay

GCP_HISTORY_CSV = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "data"
    / "gcp-pricing-cyclenerd"
    / "gcp_gpu_machine_price_changes.csv"
)
KEYS = ["provider", "region", "instance_type"]
FEATURES = (
    "d1",
    "d4",
    "d13",
    "d26",
    "changes_8w",
    "market_d4",
    "market_d13",
    "family_d4",
    "family_dev",
    "region_dev",
    "market_change_rate_4w",
    "weeks_since_change",
    "d4_if_due",
    "family_d4_if_due",
)
CHANGE_COLUMNS = pl.Schema(
    {
        "provider": pl.Utf8(),
        "region": pl.Utf8(),
        "instance_type": pl.Utf8(),
        "ts": pl.Datetime("us", "UTC"),
        "on_demand_usd": pl.Float64(),
        "spot_usd": pl.Float64(),
    }
)


@dataclass(frozen=True)
class SpotForecastParams:
    horizon_weeks: int = 4  # "the coming weeks" the spot model plans over
    ridge_alpha: float = 1.0
    volatility_weeks: int = 26  # window of the weekly log-ratio changes whose sd is the volatility
    validation_weeks: int = 8  # recent training weeks the shrinkage toward the last value is chosen on
    shrink_grid: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


# ---- input ----------------------------------------------------------------------------------------


def read_gcp_price_changes(path: str | Path = GCP_HISTORY_CSV) -> pl.DataFrame:
    """The Cyclenerd GCP GPU machine price-change history (one row per change) as price changes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"spot price history {str(path)!r} does not exist")
    raw = pl.read_csv(path, infer_schema_length=0)
    missing = {"commit_date", "machine_type", "region", "hour_ondemand_usd", "hour_spot_usd"} - set(raw.columns)
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return raw.select(
        pl.lit("gcp").alias("provider"),
        pl.col("region"),
        pl.col("machine_type").alias("instance_type"),
        pl.col("commit_date").str.to_datetime("%Y-%m-%dT%H:%M:%S%z", time_zone="UTC").alias("ts"),
        pl.col("hour_ondemand_usd").cast(pl.Float64).alias("on_demand_usd"),
        pl.col("hour_spot_usd").cast(pl.Float64, strict=False).alias("spot_usd"),
    ).cast(CHANGE_COLUMNS)


def warehouse_price_changes(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The warehouse's spot/on-demand history (`price_history`, `spot_prices`) as price changes."""
    return queries.spot_price_changes(con).cast(CHANGE_COLUMNS)


# ---- panel and features --------------------------------------------------------------------------------


def weekly_panel(changes: pl.DataFrame, end: datetime | None = None) -> pl.DataFrame:
    """One row per series and week (Mondays 00:00 UTC) with the ratio in force then, and features."""
    points = (
        changes.filter(pl.col("spot_usd").is_not_null() & (pl.col("on_demand_usd") > 0) & (pl.col("spot_usd") > 0))
        .with_columns((pl.col("spot_usd") / pl.col("on_demand_usd")).log().alias("lr"))
        .sort("ts")
    )
    if points.is_empty():
        return pl.DataFrame()
    first = as_datetime(points["ts"].min())
    monday = datetime(first.year, first.month, first.day, tzinfo=UTC) - timedelta(days=first.weekday())
    last = end or as_datetime(points["ts"].max()) + timedelta(days=7)
    weeks = pl.DataFrame(
        {"week": pl.datetime_range(monday + timedelta(days=7), last, "1w", eager=True, time_zone="UTC")}
    )
    panel = (
        points.select(KEYS)
        .unique()
        .join(weeks, how="cross")
        .sort("week")
        .join_asof(
            points.select(*KEYS, "ts", "lr").sort("ts"),
            left_on="week",
            right_on="ts",
            by=KEYS,
            strategy="backward",
            check_sortedness=False,
        )
        .drop_nulls("lr")
        .drop("ts")
        .sort(*KEYS, "week")
    )
    return add_features(panel)


def add_features(panel: pl.DataFrame) -> pl.DataFrame:
    def lag(k: int) -> pl.Expr:
        return pl.col("lr").shift(k).over(KEYS)

    panel = panel.with_columns(
        pl.col("instance_type").str.replace(r"-\d+g?$", "").str.replace(r"\.\w+$", "").alias("family"),
        *[(pl.col("lr") - lag(k)).alias(f"d{k}") for k in (1, 4, 13, 26)],
        (pl.col("lr") != lag(1)).fill_null(False).cast(pl.Float64).alias("changed"),
    )
    panel = (
        panel.with_columns(
            pl.col("changed").rolling_sum(8, min_samples=1).over(KEYS).alias("changes_8w"),
            pl.col("d4").mean().over("week").alias("market_d4"),
            pl.col("d13").mean().over("week").alias("market_d13"),
            pl.col("d4").mean().over("week", "provider", "family").alias("family_d4"),
            (pl.col("lr") - pl.col("lr").mean().over("week", "provider", "family")).alias("family_dev"),
            (pl.col("lr") - pl.col("lr").mean().over("week", "provider", "region")).alias("region_dev"),
            pl.col("changed").mean().over("week").alias("market_change_rate"),
            # weeks since the ratio last moved: repricing comes in rounds (GCP: every one or two weeks)
            (pl.col("changed").cum_sum().over(KEYS)).alias("change_run"),
        )
        .with_columns(
            pl.col("market_change_rate").rolling_mean(4, min_samples=1).over(KEYS).alias("market_change_rate_4w"),
            (pl.int_range(pl.len()).over(KEYS, "change_run")).clip(0, 26).cast(pl.Float64).alias("weeks_since_change"),
        )
        .with_columns(
            # momentum matters when a move is due (the series did not move last week)
            (pl.col("d4") * (1 - pl.col("changed"))).alias("d4_if_due"),
            (pl.col("family_d4") * (1 - pl.col("changed"))).alias("family_d4_if_due"),
        )
    )
    return panel.with_columns([pl.col(f).fill_null(0.0).fill_nan(0.0) for f in FEATURES])


def with_target(panel: pl.DataFrame, h: int) -> pl.DataFrame:
    """The h-week-ahead change of the log ratio (null where the future is not yet known)."""
    return panel.with_columns((pl.col("lr").shift(-h).over(KEYS) - pl.col("lr")).alias("target"))


def fit_shrunk(
    x: np.ndarray,
    target: np.ndarray,
    weeks: np.ndarray,
    train: np.ndarray,
    h: int,
    until: np.datetime64,
    params: SpotForecastParams,
) -> tuple[Ridge, float]:
    """Fit the ridge, and a shrinkage toward the last value (0 = last value, 1 = the regression) chosen on
    the most recent ``validation_weeks`` of the training targets by a fit that did not see them."""
    from sklearn.linear_model import Ridge

    cut = until - np.timedelta64(7 * (h + params.validation_weeks), "D")
    inner, valid = train & (weeks + np.timedelta64(7 * h, "D") <= cut), train & (weeks > cut)
    shrink = 1.0
    if inner.sum() >= 50 and valid.sum() >= 10:
        pred = Ridge(alpha=params.ridge_alpha).fit(x[inner], target[inner]).predict(x[valid])
        errors = {k: float(np.mean(np.abs(np.exp(k * pred - target[valid]) - 1))) for k in params.shrink_grid}
        shrink = min(errors, key=lambda k: (errors[k], -k))
    return Ridge(alpha=params.ridge_alpha).fit(x[train], target[train]), shrink


# ---- forecast --------------------------------------------------------------------------------------

FORECAST_COLUMNS = pl.Schema(
    {
        "provider": pl.Utf8(),
        "region": pl.Utf8(),
        "instance_type": pl.Utf8(),
        "as_of_week": pl.Datetime("us", "UTC"),
        "ratio_now": pl.Float64(),
        "ratio_forecast": pl.Float64(),
        "ratio_forecast_end": pl.Float64(),
        "horizon_weeks": pl.Int64(),
        "volatility_weekly": pl.Float64(),
        "weeks_of_history": pl.Int64(),
        "method": pl.Utf8(),
    }
)


def forecast_ratios(
    changes: pl.DataFrame, *, as_of: datetime | None = None, params: SpotForecastParams = SpotForecastParams()
) -> pl.DataFrame:
    """Per series: the ratio now, its forecast mean over the next ``horizon_weeks`` weeks and at the
    last of them, and the weekly volatility of the log ratio (sd of weekly changes, recent window).
    Series or histories too short for the regression fall back to the last value (``method``)."""
    panel = weekly_panel(changes)
    if panel.is_empty():
        return pl.DataFrame(schema=FORECAST_COLUMNS)
    if as_of is not None:
        panel = panel.filter(pl.col("week") <= as_of)
    until = as_datetime(panel["week"].max())
    current = panel.filter(pl.col("week") == until)
    stats = (
        panel.filter(pl.col("week") > until - timedelta(weeks=params.volatility_weeks))
        .group_by(KEYS)
        .agg(pl.col("d1").std().fill_null(0.0).alias("volatility_weekly"))
    )
    history = panel.group_by(KEYS).agg(pl.len().alias("weeks_of_history"))
    x = current.select(FEATURES).to_numpy()
    x_all, weeks = panel.select(FEATURES).to_numpy(), panel["week"].to_numpy()
    until_np = np.datetime64(until.replace(tzinfo=None), "us")
    steps, method = [], "ridge"
    for h in range(1, params.horizon_weeks + 1):
        target = with_target(panel, h)["target"].to_numpy()
        train = ~np.isnan(target) & (weeks + np.timedelta64(7 * h, "D") <= until_np)
        if train.sum() < 50:
            steps, method = [np.zeros(len(x)) for _ in range(params.horizon_weeks)], "last_value"
            break
        model, shrink = fit_shrunk(x_all, target, weeks, train, h, until_np, params)
        steps.append(shrink * model.predict(x))
    lr = current["lr"].to_numpy()
    ratios = np.exp(lr[:, None] + np.column_stack(steps))
    out = current.select(*KEYS, pl.col("week").alias("as_of_week")).with_columns(
        pl.Series("ratio_now", np.exp(lr)),
        pl.Series("ratio_forecast", ratios.mean(axis=1)),
        pl.Series("ratio_forecast_end", ratios[:, -1]),
        pl.lit(params.horizon_weeks).alias("horizon_weeks"),
        pl.lit(method).alias("method"),
    )
    return (
        out.join(stats, on=KEYS, how="left")
        .join(history, on=KEYS, how="left")
        .with_columns(pl.col("volatility_weekly").fill_null(0.0))
        .select(list(FORECAST_COLUMNS))
        .cast(FORECAST_COLUMNS)
        .sort(KEYS)
    )


# ---- quality ----------------------------------------------------------------------------------------


def backtest(
    changes: pl.DataFrame,
    *,
    horizons: tuple[int, ...] = (1, 2, 4, 8),
    test_days: int = 182,
    params: SpotForecastParams = SpotForecastParams(),
) -> dict:
    """Walk-forward over the last ``test_days``: at each weekly origin, refit on what was known and
    forecast each horizon; MAPE of the ratio vs the last-value baseline, per horizon."""
    panel = weekly_panel(changes, end=as_datetime(changes["ts"].max()))
    if panel.is_empty():
        raise ValueError("no spot price history to backtest")
    last_week = as_datetime(panel["week"].max())
    test_start = last_week - timedelta(days=test_days)
    x_all = panel.select(FEATURES).to_numpy()
    weeks = panel["week"].to_numpy()
    lr = panel["lr"].to_numpy()
    result: dict = {
        "test_start": test_start.date().isoformat(),
        "test_end": last_week.date().isoformat(),
        "series": panel.select(KEYS).unique().height,
        "horizons": {},
    }
    for h in horizons:
        target = with_target(panel, h)["target"].to_numpy()
        known = ~np.isnan(target)
        origins = sorted(
            {
                w
                for w in panel.filter(pl.col("week") >= test_start)["week"].to_list()
                if w + timedelta(weeks=h) <= last_week
            }
        )
        model_err, naive_err = [], []
        for origin in origins:
            o = np.datetime64(origin.replace(tzinfo=None), "us")
            train = known & (weeks + np.timedelta64(7 * h, "D") <= o)
            test = known & (weeks == o)
            if train.sum() < 50 or not test.any():
                continue
            model, shrink = fit_shrunk(x_all, target, weeks, train, h, o, params)
            actual = np.exp(lr[test] + target[test])
            forecast = np.exp(lr[test] + shrink * model.predict(x_all[test]))
            model_err.extend(np.abs(forecast - actual) / actual)
            naive_err.extend(np.abs(np.exp(lr[test]) - actual) / actual)
        if not model_err:
            continue
        result["horizons"][h] = {
            "model_mape_pct": round(float(np.mean(model_err)) * 100, 3),
            "last_value_mape_pct": round(float(np.mean(naive_err)) * 100, 3),
            "points": len(model_err),
            "origins": len(origins),
        }
    if not result["horizons"]:
        raise ValueError(f"spot price history too short for a {test_days}-day walk-forward test")
    return result


def quality(source: duckdb.DuckDBPyConnection | str | Path | None = None, **kwargs) -> dict:
    """Backtest on the warehouse's history (a connection) or a Cyclenerd CSV (default: the real GCP
    GPU history shipped in tests/data). Both MAPEs are reported, whichever wins."""
    if isinstance(source, duckdb.DuckDBPyConnection):
        changes, name = warehouse_price_changes(source), "warehouse price_history/spot_prices"
    else:
        path = Path(source) if source is not None else GCP_HISTORY_CSV
        changes, name = read_gcp_price_changes(path), str(path.name)
    result = backtest(changes, **kwargs)
    h = SpotForecastParams().horizon_weeks
    headline = result["horizons"].get(h) or next(iter(result["horizons"].values()))
    result.update(
        source=name,
        headline_horizon_weeks=h,
        model_mape_pct=headline["model_mape_pct"],
        last_value_mape_pct=headline["last_value_mape_pct"],
        beats_last_value=headline["model_mape_pct"] < headline["last_value_mape_pct"],
        method="ridge regression on weekly log-ratio changes, walk-forward refit at every origin",
    )
    return result
