"""The gpufinops dashboard (Streamlit): GPU spend, idle GPUs and data health, read-only.

Pages call ``warehouse.queries`` only (no SQL here) over a read-only connection opened per
render, so an ingest can write while the dashboard is open. Money is cast to float for charts only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import altair as alt
import polars as pl
import streamlit as st

from warehouse import db, queries

DB_PATH = Path(os.environ.get("GPUFINOPS_DB", "data/gpufinops.duckdb"))


def load() -> dict[str, pl.DataFrame]:
    with db.reader(DB_PATH) as con:
        return {"totals": queries.cost_totals(con), "daily": queries.cost_daily(con),
                "recs": queries.recommendations(con), "health": queries.ingest_status(con)}


def money_frame(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    return frame.with_columns([pl.col(c).cast(pl.Float64) for c in cols])


def main() -> None:
    st.set_page_config(page_title="gpufinops", layout="wide")
    st.title("gpufinops: GPU spend and waste")
    st.warning("No authentication is configured: this dashboard shows every team (demo mode).")
    try:
        data = load()
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    totals = money_frame(data["totals"], "effective_cost", "gpu_cost", "billed_cost")
    cols = st.columns(3)
    cols[0].metric("Spend (effective)", f"${totals['effective_cost'].sum():,.2f}")
    cols[1].metric("GPU spend", f"${totals['gpu_cost'].sum():,.2f}")
    recs = data["recs"]
    savings = float(recs["monthly_savings_usd"].cast(pl.Float64).sum()) if not recs.is_empty() else 0.0
    cols[2].metric("Savings identified", f"${savings:,.2f}/month")

    st.subheader("Daily spend by provider")
    daily = money_frame(data["daily"], "effective_cost").group_by("day", "provider").agg(
        pl.col("effective_cost").sum()).sort("day")
    chart = alt.Chart(daily).mark_area().encode(
        x=alt.X("day:T", title=None), y=alt.Y("effective_cost:Q", title="USD", axis=alt.Axis(format="$,.0f")),
        color="provider:N", tooltip=["day:T", "provider:N", alt.Tooltip("effective_cost:Q", format="$,.2f")])
    st.altair_chart(chart, use_container_width=True)

    st.subheader("Idle GPUs")
    if recs.is_empty():
        st.info("No recommendations yet: run `gpufinops recommend`.")
    else:
        table = recs.select(
            "team", "provider", "resource_id",
            pl.col("evidence").map_elements(lambda e: json.loads(e).get("pattern"), return_dtype=pl.Utf8).alias("pattern"),
            pl.col("monthly_savings_usd").cast(pl.Float64).alias("monthly savings (USD)"),
            "confidence", "risk")
        st.dataframe(table, use_container_width=True, hide_index=True,
                     column_config={"monthly savings (USD)": st.column_config.NumberColumn(format="$%.2f")})

    st.subheader("Data health")
    st.dataframe(data["health"], use_container_width=True, hide_index=True)


main()
