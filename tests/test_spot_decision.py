"""The spot ratio a finding prices with is chosen by the decisions each yields in the spot-mix backtest
(real GCP price history), and the finding's price source names the choice."""

from __future__ import annotations

import polars as pl

from gpufinops.models import spot_backtest, spot_prices


def test_the_shipped_choice_is_what_the_backtest_measures():
    result = spot_backtest.backtest()
    model, last = result["mean_abs_error_pct_per_decision"], result["last_value_mean_abs_error_pct_per_decision"]
    assert spot_prices.FORECAST_BEATS_LAST_VALUE == (model < last), (model, last)
    assert result["used"].startswith("ridge" if model < last else "last value")


def test_a_losing_forecast_is_not_used_and_the_source_says_so(monkeypatch):
    from gpufinops.models import spot_forecast

    ratios = pl.DataFrame(
        {
            "provider": ["gcp"], "region": ["us-central1"], "instance_type": ["a2-highgpu-1g"],
            "ratio_now": [0.40], "ratio_forecast": [0.30], "volatility_weekly": [0.01],
            "horizon_weeks": [4], "method": ["ridge"],
        }
    )  # fmt: skip
    monkeypatch.setattr(
        spot_forecast, "forecast_ratios", lambda changes: ratios
    )  # the ridge fit itself: not under test
    changes = pl.DataFrame({"x": [1]})
    for beats, expected in ((False, 0.40), (True, 0.30)):
        monkeypatch.setattr(spot_prices, "FORECAST_BEATS_LAST_VALUE", beats)
        bands = pl.DataFrame(schema={"provider": pl.Utf8, "region": pl.Utf8, "instance_type": pl.Utf8,
                                     "savings_pct": pl.Float64, "source": pl.Utf8})  # fmt: skip
        fleet = pl.DataFrame(schema={"provider_name": pl.Utf8, "region": pl.Utf8, "instance_type": pl.Utf8,
                                     "spot_ratio": pl.Float64, "spot_hours": pl.Int64})  # fmt: skip
        price = spot_prices.price_evidence(bands, fleet, changes)[("gcp", "us-central1", "a2-highgpu-1g")]
        assert price["ratio"] == expected and price["ratio_forecast"] == 0.30
        assert ("loses to it" in price["source"]) is (not beats)
