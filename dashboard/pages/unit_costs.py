"""Unit costs: $ per 1M input / output tokens and per 1,000 requests per model, team or namespace and day."""

from __future__ import annotations

from datetime import timedelta

import streamlit as st

from gpufinops.dashboard import unit_costs_view
from gpufinops.dashboard.common import cached_call, connection, page_header, window_picker
from gpufinops.warehouse import unit_costs


def main() -> None:
    ctx = page_header("Unit costs")
    days = window_picker("unit_cost_days")
    by = st.sidebar.selectbox("Per", tuple(unit_costs.GROUPINGS), key="unit_cost_by")
    try:
        with connection() as con:
            edge = con.execute("SELECT max(hour) FROM serving_metrics_hourly").fetchall()[0][0]
            start = None if edge is None else edge - timedelta(days=days)
            frame, note, empty = cached_call(con, unit_costs_view.load, teams=ctx.teams, start=start, by=by)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    unit_costs_view.render(frame, note, heading=None, empty=empty)


main()
