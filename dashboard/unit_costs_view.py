"""Unit costs of serving on the dashboard: the Team page's section and the "Unit costs" page.

The figures are ``derived.unit_costs.unit_costs`` (the builder the CLI, API and report call), scoped to the
viewer's teams; money and rates are cast to DOUBLE for display only.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.derived import unit_costs, unit_costs_empty
from gpufinops.kernel.labels import labels_of
from gpufinops.warehouse import windows
from gpufinops.warehouse.queries.fragments import filters
from gpufinops.warehouse.windows import Window

RATES = ("usd_per_1m_input_tokens", "usd_per_1m_output_tokens", "usd_per_1k_requests")
SHOWN = (*unit_costs.COLUMNS, "cost_basis")  # the CSV's columns, in their order, and how each was costed


def load(
    con: duckdb.DuckDBPyConnection,
    teams: list[str] | None,
    start: datetime | None,
    by: str = "model",
    end: datetime | None = None,
) -> tuple[pl.DataFrame, str | None, str | None]:
    """(the unit-cost rows of ``teams`` in [start, end), why kWh / CO2e are empty or None, why there are no rows
    or None: the filter that matched nothing, or the missing source, ``derived/unit_costs_empty.py``)."""
    frame = unit_costs.unit_costs(con, by=by, team=teams, start=start, end=end)
    if teams is not None:
        frame = frame.filter(pl.col("team").is_not_null())
    empty = unit_costs_empty.why_empty(con, team=teams, start=start, end=end) if frame.is_empty() else None
    return frame, unit_costs.carbon_note(con), empty


def partial_days(con: duckdb.DuckDBPyConnection, window: Window) -> list[str]:
    """The window's edge days the serving counters cover only in part (``2026-10-01 from 23:00 UTC``)."""
    where, params = filters(None, window.start, window.end, time_col="hour")
    first, last = con.execute(
        f"SELECT min(hour), max(hour) FROM serving_metrics_hourly WHERE {where}", params
    ).fetchall()[0]
    return windows.partial_days(window, first, last)


def render(
    frame: pl.DataFrame,
    note: str | None,
    heading: str | None = "Unit costs of serving",
    partial: tuple[str, ...] | list[str] = (),
    empty: str | None = None,
) -> None:
    """The rows as a table, a total line and the split rule's caption; ``partial``: the edge days the
    data covers in part (their rates are of those hours only); ``empty``: why there are no rows."""
    if heading:
        st.subheader(heading)
    if partial:
        st.caption("Partial days (the serving metrics start or end inside them): " + "; ".join(partial) + ".")
    if frame.is_empty():
        reason = empty or "no serving rows in this window"
        st.info(reason[0].upper() + reason[1:] + ".")
        return
    shown = frame.select([c for c in SHOWN if c in frame.columns]).with_columns(
        pl.col("cost_basis").map_elements(lambda v: labels_of(v, "cost_basis"), return_dtype=pl.Utf8),
    )
    total = frame["gpu_cost_usd"].sum()
    tokens = int(frame["input_tokens"].sum() or 0) + int(frame["output_tokens"].sum() or 0)
    st.caption(
        f"GPU cost of serving in the window: ${float(total):,.2f} for {tokens:,} tokens and "
        f"{frame['requests'].sum():,} requests. Cost is the pods' allocated GPU share (whole resources where "
        "no allocation exists); input tokens carry the share the servers spent in prefill where they export "
        "it, else the configured input-token weight (the unit-costs settings)."
    )
    rates = {c: st.column_config.NumberColumn(labels.label(c), format="$%.4f") for c in RATES}  # cents are too coarse
    labels.table(st, shown, dates=("day",), overrides=rates)
    if note:
        st.caption(f"kWh and kg CO2e are empty: {note}.")
