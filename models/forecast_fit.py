"""The cost forecast's model: a local-level model with a multiplicative day-of-week profile, and its backtest.

Each daily cost series is fitted with exponential smoothing (ETS(A,N,N)) on the series divided by its
day-of-week profile: GPU fleets bill the same machines every day, and notebooks and work-hours
machines make weekdays dearer than weekends. The day-of-week factors are medians of each day's ratio
to its centred 7-day mean (a level shift, a machine starting or stopping, does not bend them); the
smoothing weight is the one with the smallest one-step-ahead absolute error on the series itself.
The 80 % prediction interval of a sum of future days is the local-level model's exact variance of
that sum, with the day noise measured robustly (MAD of the one-step errors). ``models.forecast``
forecasts the warehouse's series with it; ``models.anomalies`` finds the days that leave its band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

import numpy as np
import polars as pl

Z80 = 1.2815515655446004  # two-sided 80 % normal quantile
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class ForecastParams:
    season_window_days: int = 56  # days of history the day-of-week factors are taken from
    alphas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
    min_season_days: int = 14  # fewer days of history: no day-of-week profile
    anomaly_z: float = 4.0  # robust sigmas outside the expectation that make an anomaly
    anomaly_min_usd: float = 25.0  # and at least this many dollars away from it
    anomaly_min_share: float = 0.10  # and at least this share of the expectation
    top_line_items: int = 5
    baseline_days: int = 7  # line items are compared with their mean over these days
    min_sigma_share: float = 0.01  # floor of the day noise, as a share of the level


@dataclass
class SeriesFit:
    factors: np.ndarray  # 7 day-of-week factors (Monday first), mean 1
    alpha: float
    level: float  # level after the last observed day (deseasonalised $/day)
    sigma: float  # robust sd of one-step errors, $/day
    history_days: int


# ---- fitting ----------------------------------------------------------------------------------


def dow_factors(y: np.ndarray, dow: np.ndarray, params: ForecastParams = ForecastParams()) -> np.ndarray:
    """Median ratio of each weekday's cost to its centred 7-day mean, normalised to mean 1."""
    n = len(y)
    if n < params.min_season_days:
        return np.ones(7)
    lo = max(0, n - params.season_window_days)
    kernel = np.ones(7) / 7
    centred = np.convolve(y, kernel, mode="same")
    idx = np.arange(max(lo, 3), n - 3)  # only days with a full centred window
    ratios = np.where(centred[idx] > 0, y[idx] / np.where(centred[idx] > 0, centred[idx], 1), np.nan)
    factors = np.ones(7)
    for d in range(7):
        vals = ratios[(dow[idx] == d) & ~np.isnan(ratios)]
        if len(vals) >= 2:
            factors[d] = float(np.median(vals))
    factors = np.clip(factors, 0.0, None)
    mean = factors.mean()
    return factors / mean if mean > 0 else np.ones(7)


def level_filter(
    x: np.ndarray, alpha: float, sigma: float | None = None, clip_z: float | None = None
) -> tuple[np.ndarray, float]:
    """One-step-ahead deseasonalised predictions and the final level. With ``clip_z`` the update
    uses clipped values and two same-sign breaches in a row reset the level (anomaly mode)."""
    level = float(np.mean(x[: min(7, len(x))]))
    preds = np.empty(len(x))
    streak_sign = 0
    streak: list[float] = []  # the values of the current run of same-sign breaches
    for t, value in enumerate(x):
        preds[t] = level
        err = value - level
        if clip_z is not None and sigma is not None and sigma > 0 and abs(err) > clip_z * sigma:
            sign = 1 if err > 0 else -1
            streak = streak + [value] if sign == streak_sign else [value]
            streak_sign = sign
            if len(streak) >= 2:
                level, streak_sign, streak = float(np.mean(streak)), 0, []
                continue
            err = sign * clip_z * sigma
        else:
            streak_sign, streak = 0, []
        level += alpha * err
    return preds, level


def fit_series(y: np.ndarray, days: list[date], params: ForecastParams = ForecastParams()) -> SeriesFit:
    """Fit the day-of-week profile and the smoothing weight to one daily series."""
    dow = np.array([d.weekday() for d in days])
    factors = dow_factors(y, dow, params)
    f = factors[dow]
    x = np.where(f > 0, y / np.where(f > 0, f, 1), y)
    warm = min(7, max(1, len(y) // 2))
    best_alpha, best_err = params.alphas[0], math.inf
    for alpha in params.alphas:
        preds, _ = level_filter(x, alpha)
        err = float(np.mean(np.abs(y[warm:] - preds[warm:] * f[warm:]))) if len(y) > warm else 0.0
        if err < best_err * (1 - 1e-9):  # relative: a float-noise tie keeps the smaller weight (deterministic)
            best_alpha, best_err = alpha, err
    preds, level = level_filter(x, best_alpha)
    resid = (y - preds * f)[warm:]
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(resid - np.median(resid)))) if len(resid) >= 3 else 0.0
    if len(resid) < 3 or sigma == 0.0:
        sigma = max(sigma, float(np.std(resid)) if len(resid) >= 2 else 0.5 * abs(level))
    # a perfectly flat history does not make the future certain: at least 1 % of the level per day
    sigma = max(sigma, params.min_sigma_share * abs(level))
    return SeriesFit(factors, best_alpha, level, sigma, len(y))


def sum_interval_halfwidth(fit: SeriesFit, steps: list[int], z: float = Z80) -> float:
    """Half-width of the prediction interval of the sum over future days ``steps`` (1 = tomorrow)
    under the local-level model: error of day j = e_j + alpha * sum of e_i for i < j."""
    if not steps:
        return 0.0
    chosen = set(steps)
    coeffs = [
        (1.0 if i in chosen else 0.0) + fit.alpha * sum(1 for j in chosen if j > i) for i in range(1, max(steps) + 1)
    ]
    return z * fit.sigma * math.sqrt(sum(c * c for c in coeffs))


# ---- backtest -----------------------------------------------------------------------------------


def backtest(
    daily: pl.DataFrame,
    *,
    horizon_days: int = 7,
    min_history_days: int = 28,
    step_days: int = 7,
    min_actual_usd: float = 1.0,
    params: ForecastParams = ForecastParams(),
) -> dict:
    """Forecast ``horizon_days`` ahead from origins every ``step_days`` (each fit sees only days
    before its origin) and score against the actuals; the baseline is seasonal-naive (the same
    weekday of the last observed week). MAPE over (series, day) points with an actual of at least
    ``min_actual_usd``; WAPE (sum of absolute errors / sum of actuals) over the same points."""
    model_err, naive_err, actuals, points, origins = [], [], [], 0, set()
    for _, part in daily.group_by("team", "provider", maintain_order=True):
        y, days = part["cost_usd"].to_numpy(), part["day"].to_list()
        for origin in range(min_history_days, len(y) - horizon_days + 1, step_days):
            fit = fit_series(y[:origin], days[:origin], params)
            origins.add(days[origin])
            for h in range(horizon_days):
                t = origin + h
                if y[t] < min_actual_usd:
                    continue
                model = max(0.0, fit.level * fit.factors[days[t].weekday()])
                naive = y[origin - 7 + (h % 7)]
                model_err.append(abs(model - y[t]))
                naive_err.append(abs(naive - y[t]))
                actuals.append(y[t])
                points += 1
    if not points:
        raise ValueError(f"not enough history to backtest: need more than {min_history_days + horizon_days} days")
    act = np.array(actuals)
    return {
        "model_mape_pct": round(float(np.mean(np.array(model_err) / act)) * 100, 3),
        "seasonal_naive_mape_pct": round(float(np.mean(np.array(naive_err) / act)) * 100, 3),
        "model_wape_pct": round(float(np.sum(model_err) / act.sum()) * 100, 3),
        "seasonal_naive_wape_pct": round(float(np.sum(naive_err) / act.sum()) * 100, 3),
        "points": points,
        "origins": len(origins),
        "series": daily.select("team", "provider").unique().height,
        "horizon_days": horizon_days,
        "min_history_days": min_history_days,
    }
