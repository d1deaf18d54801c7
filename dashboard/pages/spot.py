"""Spot market: spot vs on-demand price history per GPU instance type and region; interruption bands.

Prices are market data, not any team's spend: every role sees them.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import charts
from dashboard.common import connection, money, money_columns, page_header
from warehouse import queries


def series_label() -> pl.Expr:
    """A price series is a zone (or the region when the zone is the region or unknown)."""
    return (pl.when(pl.col("zone").is_null() | (pl.col("zone") == pl.col("region"))).then(pl.col("region"))
            .otherwise(pl.col("zone")).alias("series"))


def main() -> None:
    page_header("Spot market")
    try:
        with connection() as con:
            series = queries.spot_series(con)
            bands = queries.spot_interruption(con)
            if series.is_empty():
                prices = None
            else:
                providers = sorted(series["provider"].unique().to_list())
                provider = st.sidebar.selectbox("Provider", providers, key="spot_provider")
                types = sorted(series.filter(pl.col("provider") == provider)["instance_type"].unique().to_list())
                instance_type = st.sidebar.selectbox("Instance type", types, key="spot_type")
                regions = sorted(series.filter((pl.col("provider") == provider) & (pl.col("instance_type") == instance_type))
                                 ["region"].unique().to_list())
                region = st.sidebar.selectbox("Region", ["(all)", *regions], key="spot_region")
                prices = queries.spot_price_history(con, provider, instance_type, None if region == "(all)" else region)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if prices is None:
        st.info("No spot price history yet: configure an `aws_spot_prices` or `gcp_catalog` source.")
    else:
        view = prices.with_columns(pl.col("price_usd").cast(pl.Float64), pl.col("on_demand_usd").cast(pl.Float64),
                                   series_label())
        latest = prices.sort("ts").tail(1).row(0, named=True)
        cols = st.columns(3)
        cols[0].metric("Latest spot price", f"{money(latest['price_usd'])}/h")
        cols[1].metric("On-demand", f"{money(latest['on_demand_usd'])}/h" if latest["on_demand_usd"] is not None else "—")
        if latest["on_demand_usd"]:
            cols[2].metric("Spot discount", f"{1 - float(latest['price_usd']) / float(latest['on_demand_usd']):.0%}")
        st.altair_chart(charts.spot_prices(view, title=f"{instance_type}: spot (lines) vs on-demand (dashed)"),
                        width="stretch")
        st.dataframe(view.select("ts", "region", "zone", "price_usd", "on_demand_usd"), hide_index=True,
                     width="stretch", column_config=money_columns("price_usd", "on_demand_usd"))
    st.subheader("Interruption frequency")
    if bands.is_empty():
        st.info("No interruption bands yet (the AWS spot advisor data).")
    else:
        st.altair_chart(charts.interruption_bands(bands), width="stretch")
        st.dataframe(bands, hide_index=True, width="stretch",
                     column_config={"savings_pct": st.column_config.NumberColumn(format="%d%%")})


main()
