"""Open alerts on the Overview and Team pages (read from the ``alerts`` table through
warehouse.alerts_queries: the rules run in `gpufinops alerts run` / `serve`, never in the dashboard)."""

from __future__ import annotations

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.kernel.labels import label as code_label
from gpufinops.kernel.labels import period_text
from gpufinops.warehouse import alerts_queries

SHOWN = ("severity", "title", "summary", "rule", "period", "value_usd", "limit_usd", "opened_at")


def open_alerts(con: duckdb.DuckDBPyConnection, teams: list[str] | None) -> pl.DataFrame:
    """The open alerts a viewer of ``teams`` may see (None: every alert)."""
    return alerts_queries.alerts(con, teams=teams, status="open")


def summary(frame: pl.DataFrame) -> None:
    """One line above a page's views: how many alerts are open, by severity (the Alerts view lists them)."""
    if frame.is_empty():
        return
    counts = frame.group_by("severity").len()
    said = ", ".join(
        f"{n} {code_label(s, 'severity').lower()}"
        for s, n in sorted(counts.iter_rows(), key=lambda r: ("critical", "warning", "info").index(r[0]))
    )
    st.warning(
        f"{frame.height} open alert(s): {said} (the Alerts view lists them). `gpufinops alerts list` lists "
        "them too; they resolve on their own when the condition no longer holds."
    )


def render(frame: pl.DataFrame, *, heading: str = "Open alerts") -> None:
    """The open alerts, one row each."""
    st.subheader(heading)
    if frame.is_empty():
        st.success("No open alerts.")
        return
    view = frame.select(*SHOWN).with_columns(pl.col("value_usd").cast(pl.Float64), pl.col("limit_usd").cast(pl.Float64))
    if "period" in view.columns:  # 2026-10, or the day an idle stretch began: never an ISO timestamp
        view = view.with_columns(pl.col("period").map_elements(period_text, return_dtype=pl.Utf8))
    labels.table(
        st,
        view,
        overrides={
            "value_usd": st.column_config.NumberColumn("Value", format="dollar"),
            "limit_usd": st.column_config.NumberColumn("Limit", format="dollar"),
            "title": st.column_config.TextColumn("Alert"),
            "summary": st.column_config.TextColumn("Summary", width="large", help="hover a cell to read it whole"),
        },
    )
