"""Spot / on-demand ratio forecast: reads the real GCP history, forecasts from the warehouse too, and
beats the last-value baseline at the planning horizon on the last 6 months (walk-forward)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpufinops.models import spot_forecast as sf
from gpufinops.warehouse import db

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def synthetic(weeks: int, trend: float, regions: int = 12) -> pl.DataFrame:
    """Series whose spot price moves by ``trend`` (log) every other week, all together."""
    rows = []
    for r in range(regions):
        for w in range(0, weeks, 2):
            rows.append(
                {
                    "provider": "gcp",
                    "region": f"r{r}",
                    "instance_type": "a2-highgpu-1g",
                    "ts": T0 + timedelta(weeks=w, days=3),
                    "on_demand_usd": 3.0,
                    "spot_usd": 3.0 * 0.3 * (1 + trend) ** (w // 2) * (1 + 0.01 * r),
                }
            )
    return pl.DataFrame(rows, schema=sf.CHANGE_COLUMNS)


def test_reads_the_real_history_and_rejects_bad_files(tmp_path):
    changes = sf.read_gcp_price_changes()
    assert changes.height > 17000 and set(changes["provider"]) == {"gcp"}
    assert changes["ts"].min().year == 2022 and changes["ts"].max().year == 2026
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sf.read_gcp_price_changes(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("commit_date,machine_type\n2024-01-01T00:00:00+00:00,a2-highgpu-1g\n")
    with pytest.raises(ValueError, match="missing column.*hour_spot_usd"):
        sf.read_gcp_price_changes(bad)


def test_a_rising_market_is_forecast_to_keep_rising_and_a_flat_one_to_stay():
    rising = sf.forecast_ratios(synthetic(80, 0.05))
    assert (rising["method"] == "ridge").all()
    assert (rising["ratio_forecast_end"] > rising["ratio_now"] * 1.02).all()
    flat = sf.forecast_ratios(synthetic(80, 0.0))
    assert ((flat["ratio_forecast"] / flat["ratio_now"] - 1).abs() < 0.005).all()
    assert (flat["volatility_weekly"] == 0).all()


def test_too_little_history_falls_back_to_the_last_value():
    out = sf.forecast_ratios(synthetic(6, 0.05, regions=2))
    assert (out["method"] == "last_value").all()
    assert (out["ratio_forecast"] == out["ratio_now"]).all()


def test_forecast_from_the_warehouse_matches_the_csv(warehouse):
    changes = sf.read_gcp_price_changes().filter(pl.col("instance_type").str.starts_with("a2-highgpu"))
    rows = (
        pl.concat(
            [
                changes.select(
                    "provider",
                    "region",
                    "instance_type",
                    pl.lit(pricing).alias("pricing"),
                    pl.col("ts").alias("effective_from"),
                    pl.col(column).alias("price"),
                )
                for pricing, column in (("on_demand", "on_demand_usd"), ("spot", "spot_usd"))
            ]
        )
        .drop_nulls("price")
        .to_arrow()
    )
    with db.writer(warehouse) as con:
        con.register("rows", rows)
        con.execute(
            "INSERT INTO price_history SELECT provider, region, instance_type, pricing, effective_from, "
            "price, 'USD', 'test', 'run' FROM rows"
        )
        from_db = sf.forecast_ratios(sf.warehouse_price_changes(con))
    from_csv = sf.forecast_ratios(changes)
    joined = from_csv.join(from_db, on=sf.KEYS, suffix="_db")
    assert joined.height == from_csv.height > 50
    assert (joined["ratio_now"] - joined["ratio_now_db"]).abs().max() < 1e-6
    assert (joined["ratio_forecast"] - joined["ratio_forecast_db"]).abs().max() < 1e-3


def test_beats_the_last_value_at_the_planning_horizon_on_the_real_history():
    q = sf.quality(horizons=(sf.SpotForecastParams().horizon_weeks,))
    assert q["test_end"] >= "2026-07" and q["series"] > 1000
    h = q["horizons"][q["headline_horizon_weeks"]]
    assert h["points"] > 10000 and h["origins"] >= 20
    assert q["model_mape_pct"] == h["model_mape_pct"] and q["last_value_mape_pct"] == h["last_value_mape_pct"]
    assert q["beats_last_value"] and h["model_mape_pct"] < h["last_value_mape_pct"]
