"""spot_mix's decisions backtested on a real spot price history: the savings the model would have
promised against what the price paths then delivered (``gpufinops evaluate`` prints it; the choice of
``models.spot_prices.FORECAST_BEATS_LAST_VALUE`` rests on it)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl

from gpufinops.models.frames import as_datetime
from gpufinops.models.spot_mix import SpotMixSettings
from gpufinops.models.spot_prices import rework_fraction


def backtest(
    source: str | None = None,
    *,
    step_weeks: int = 4,
    test_days: int = 182,
    settings: SpotMixSettings = SpotMixSettings(),
) -> dict:
    """The savings the model would have promised vs what the price paths then delivered.

    On the real GCP GPU history (default: the Cyclenerd CSV in tests/data), every ``step_weeks`` over
    the last ``test_days`` and for every (machine type, region), a reference workload (one machine,
    checkpointed training, 24/7, worst-band interruptions and default checkpoint/restart) decides from
    what was known then: predicted saving = on-demand $ x (1 - forecast ratio x (1 + rework)) over the
    next ``horizon_weeks``; realised = the same with the ratios that actually followed, week by week.
    Reported for the regression forecast and for the last-value ratio, with the decision error."""
    from gpufinops.models.spot_forecast import (
        FEATURES,
        GCP_HISTORY_CSV,
        KEYS,
        SpotForecastParams,
        fit_shrunk,
        read_gcp_price_changes,
        weekly_panel,
        with_target,
    )

    changes = read_gcp_price_changes(source or GCP_HISTORY_CSV)
    params = SpotForecastParams()
    horizon = params.horizon_weeks
    panel = weekly_panel(changes, end=as_datetime(changes["ts"].max()))
    on_demand = panel.join_asof(
        changes.sort("ts").select(*KEYS, "ts", "on_demand_usd"),
        left_on="week",
        right_on="ts",
        by=KEYS,
        strategy="backward",
        check_sortedness=False,
    )
    panel = panel.with_columns(on_demand["on_demand_usd"].alias("on_demand_usd"))
    lost = (settings.spot_checkpoint_interval_min / 2 + settings.spot_restart_overhead_min) / 60
    rework = rework_fraction(settings.spot_unknown_band_interruptions, lost, 1.0)
    x_all, weeks, lr = panel.select(FEATURES).to_numpy(), panel["week"].to_numpy(), panel["lr"].to_numpy()
    targets = {h: with_target(panel, h)["target"].to_numpy() for h in range(1, horizon + 1)}
    last_week = as_datetime(panel["week"].max())
    origins = [
        w
        for w in sorted(
            panel.filter(pl.col("week") >= last_week - timedelta(days=test_days))["week"].unique().to_list()
        )
        if w + timedelta(weeks=horizon) <= last_week
    ][::step_weeks]
    sums = {"predicted_model": 0.0, "predicted_last_value": 0.0, "realised": 0.0, "on_demand": 0.0}
    decisions = regrets = 0
    abs_err: dict[str, list] = {"model": [], "last_value": []}
    for origin in origins:
        o = np.datetime64(origin.replace(tzinfo=None), "us")
        rows = (weeks == o) & np.all([~np.isnan(targets[h]) for h in targets], axis=0)
        if not rows.any():
            continue
        predicted = np.zeros(rows.sum())
        for h, target in targets.items():
            train = ~np.isnan(target) & (weeks + np.timedelta64(7 * h, "D") <= o)
            model, shrink = fit_shrunk(x_all, target, weeks, train, h, o, params)
            predicted += np.exp(lr[rows] + shrink * model.predict(x_all[rows])) / horizon
        realised = np.mean([np.exp(lr[rows] + targets[h][rows]) for h in targets], axis=0)
        dollars = panel["on_demand_usd"].to_numpy()[rows] * 24 * 7 * horizon

        def saving(ratio: np.ndarray, dollars: np.ndarray = dollars) -> np.ndarray:
            return dollars * (1 - ratio * (1 + rework))

        sums["predicted_model"] += float(saving(predicted).sum())
        sums["predicted_last_value"] += float(saving(np.exp(lr[rows])).sum())
        sums["realised"] += float(saving(realised).sum())
        sums["on_demand"] += float(dollars.sum())
        for name, ratio in (("model", predicted), ("last_value", np.exp(lr[rows]))):
            abs_err[name].extend(np.abs(saving(ratio) - saving(realised)) / np.abs(saving(realised)))
        go = (1 - predicted * (1 + rework)) >= settings.spot_min_savings_fraction
        decisions += int(go.sum())
        regrets += int((go & ((1 - realised * (1 + rework)) < 0)).sum())
    if not sums["on_demand"]:
        raise ValueError("spot price history too short for the spot-mix backtest")
    err = lambda p: round((p - sums["realised"]) / sums["realised"] * 100, 3)  # noqa: E731
    return {
        "source": Path(source or GCP_HISTORY_CSV).name,
        "decision_points": len(origins),
        "series": panel.select(KEYS).unique().height,
        "horizon_weeks": horizon,
        "reference_workload": "1 machine, 24/7, checkpointed; worst interruption band; "
        f"{settings.spot_checkpoint_interval_min:g} min checkpoints, "
        f"{settings.spot_restart_overhead_min:g} min restart",
        "on_demand_usd": round(sums["on_demand"], 2),
        "predicted_savings_usd": round(sums["predicted_model"], 2),
        "predicted_savings_last_value_usd": round(sums["predicted_last_value"], 2),
        "realised_savings_usd": round(sums["realised"], 2),
        "prediction_error_pct": err(sums["predicted_model"]),
        "last_value_prediction_error_pct": err(sums["predicted_last_value"]),
        "mean_abs_error_pct_per_decision": round(float(np.mean(abs_err["model"])) * 100, 3),
        "last_value_mean_abs_error_pct_per_decision": round(float(np.mean(abs_err["last_value"])) * 100, 3),
        "spot_decisions": decisions,
        "decisions_that_lost_money": regrets,
        "used": "ridge forecast"
        if np.mean(abs_err["model"]) < np.mean(abs_err["last_value"])
        else "last value (the forecast loses on error per decision)",
    }
