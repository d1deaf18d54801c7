"""Spot market: spot vs on-demand price history per GPU instance type and region; interruption bands.

Prices are market data, not any team's spend: every role sees them.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import streamlit as st

from gpufinops.dashboard import charts, labels, price_charts, views
from gpufinops.dashboard.common import connection, money, page_header
from gpufinops.dashboard.evidence import spot_until, spot_view
from gpufinops.kernel.labels import age
from gpufinops.warehouse import queries

STALE_AFTER = timedelta(days=2)  # spot prices change daily or faster: two days without one is stale


def main() -> None:
    page_header("Spot market")
    try:
        with connection() as con:
            view, tab = views.open_view("spot")
            with tab:  # only the open view is read and drawn
                if view == "Prices":
                    prices(con)
                else:
                    interruption(queries.spot_interruption(con))
    except FileNotFoundError as exc:
        st.error(str(exc))


def prices(con) -> None:
    """One instance type's spot price history (the sidebar picks provider, type and region) vs on-demand."""
    series = queries.spot_series(con)
    if series.is_empty():
        st.info("No spot price history yet: configure an `aws_spot_prices` or `gcp_catalog` source.")
        return
    providers = sorted(series["provider"].unique().to_list())
    provider = st.sidebar.selectbox("Provider", providers, key="spot_provider")
    types = sorted(series.filter(pl.col("provider") == provider)["instance_type"].unique().to_list())
    instance_type = st.sidebar.selectbox("Instance type", types, key="spot_type")
    regions = sorted(
        series.filter((pl.col("provider") == provider) & (pl.col("instance_type") == instance_type))["region"]
        .unique()
        .to_list()
    )
    region = st.sidebar.selectbox("Region", ["(all)", *regions], key="spot_region")
    found = queries.spot_price_history(con, provider, instance_type, None if region == "(all)" else region)
    view = spot_view(found)
    latest = found.sort("ts").tail(1).row(0, named=True)
    cols = st.columns(3)
    cols[0].metric("Latest spot price", f"{money(latest['price_usd'])}/h")
    cols[1].metric("On-demand", f"{money(latest['on_demand_usd'])}/h" if latest["on_demand_usd"] is not None else "—")
    if latest["on_demand_usd"]:
        cols[2].metric("Spot discount", f"{1 - float(latest['price_usd']) / float(latest['on_demand_usd']):.0%}")
    until = spot_until(view)
    last_seen = latest["ts"]
    if last_seen is not None and until - last_seen > STALE_AFTER:
        st.warning(
            f"Stale: the newest spot price is from {last_seen:%Y-%m-%d} "
            f"({age((until - last_seen).total_seconds() / 3600)} old); the chart holds it flat up to "
            f"{until:%Y-%m-%d} only because a price holds until it changes. Run the price source "
            "(`gpufinops ingest`) for current prices."
        )
    charts.draw(
        st,
        price_charts.spot_prices(
            view,
            until=until,
            title=f"{instance_type}: spot price (steps, held until the next change) vs on-demand (dashed)",
        ),
    )
    labels.table(st, view.select("ts", "region", "zone", "price_usd", "on_demand_usd"))


def interruption(bands: pl.DataFrame) -> None:
    """The spot advisor's interruption bands per instance type and region."""
    st.subheader("Interruption frequency")
    if bands.is_empty():
        st.info("No interruption bands yet (the AWS spot advisor data).")
        return
    charts.draw(st, price_charts.interruption_bands(bands))
    labels.table(
        st,
        bands,
        hide=("band_index",),
        overrides={"savings_pct": st.column_config.NumberColumn("Spot saving", format="%d%%")},
    )


main()
