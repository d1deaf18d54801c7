"""Unit costs: $ per 1M input / output tokens and per 1,000 requests per model, team or namespace and day."""

from __future__ import annotations

import streamlit as st

from gpufinops.dashboard import period, unit_costs_view
from gpufinops.dashboard.common import cached_call, cached_query, connection, page_header
from gpufinops.derived import unit_costs


def main() -> None:
    ctx = page_header("Unit costs")
    by = st.sidebar.selectbox("Per", tuple(unit_costs.GROUPINGS), key="unit_cost_by")
    try:
        with connection() as con:
            as_of = cached_query(con, "latest_charge_day", team=ctx.teams)
            window = None
            if as_of is not None:  # the page's period: whole UTC days, a month by default
                window = period.picker(
                    "unit_cost_period", cached_call(con, period.months_with_data, teams=ctx.teams), as_of
                )
            start, end = (window.start, window.end) if window is not None else (None, None)
            frame, note, empty = cached_call(con, unit_costs_view.load, teams=ctx.teams, start=start, by=by, end=end)
            partial = unit_costs_view.partial_days(con, window) if window is not None else []
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if window is not None:
        st.caption(f"Every figure on this page covers {window.label}, in UTC days.")
    unit_costs_view.render(frame, note, heading=None, partial=partial, empty=empty)


main()
