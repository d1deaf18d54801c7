"""The Overview's spend-by-team table for the page's window: ``warehouse.spend_by`` (the figure
``gpufinops costs``, ``GET /v1/costs`` and the MCP ``costs`` tool give), spend and GPU spend per team
with the total."""

from __future__ import annotations

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.dashboard.common import cached_call, money
from gpufinops.warehouse import spend_by
from gpufinops.warehouse.windows import Window

TOTAL = "Total"


def load(con: duckdb.DuckDBPyConnection, teams: list[str] | None, window: Window) -> pl.DataFrame:
    """One row per team (largest spend first) and a last ``Total`` row: ``effective_cost``,
    ``gpu_cost`` (exact decimals) and the team's share of the spend."""
    spent = spend_by.spend_by(con, by="team", window=window, cost="effective", teams=teams)
    gpu = spend_by.spend_by(con, by="team", window=window, cost="gpu", teams=teams)
    rows = spent.rows.rename({"cost_usd": "effective_cost"}).join(
        gpu.rows.select("team", pl.col("cost_usd").alias("gpu_cost")), on="team", how="full", coalesce=True
    )
    rows = rows.sort("effective_cost", descending=True, nulls_last=True).select(
        "team", "effective_cost", "gpu_cost", "share"
    )
    total = pl.DataFrame(
        {"team": [TOTAL], "effective_cost": [spent.total_usd], "gpu_cost": [gpu.total_usd], "share": [1.0]}
    )
    return pl.concat([rows, total.cast(rows.schema)])


def cached(con: duckdb.DuckDBPyConnection, teams: list[str] | None, window: Window) -> pl.DataFrame:
    """:func:`load`, reused across renders while the warehouse's data version is unchanged."""
    return cached_call(con, load, teams=teams, window=window)


def render(frame: pl.DataFrame, window: Window) -> None:
    """The table under its heading (the window named)."""
    st.subheader(f"Spend by team, {window.label}")
    if frame.height <= 1:
        st.info(f"No spend in {window.label}.")
        return
    shown = frame.with_columns(
        pl.col("effective_cost").map_elements(money, return_dtype=pl.Utf8),
        pl.col("gpu_cost").map_elements(money, return_dtype=pl.Utf8),
        (pl.col("share") * 100).round(1),
    )
    labels.table(
        st,
        shown,
        overrides={
            "team": st.column_config.TextColumn("Team"),
            "effective_cost": st.column_config.TextColumn("Spend"),
            "gpu_cost": st.column_config.TextColumn("GPU spend"),
            "share": st.column_config.NumberColumn("Share of spend", format="%.1f%%"),
        },
    )
    st.caption(
        "Shared GPUs are charged to the teams whose workloads ran on them; the same figures as "
        "`gpufinops costs --by team`, GET /v1/costs and the MCP costs tool (calendar days in UTC)."
    )
