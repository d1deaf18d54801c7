"""Overview (finance): spend this month vs budget and forecast, where it goes, what was saved."""

from __future__ import annotations

import streamlit as st

from gpufinops.dashboard import alerts_view, spend, spend_table
from gpufinops.dashboard.common import connection, page_header, window_picker
from gpufinops.models.budgets import monthly_budget_for
from gpufinops.warehouse import freshness, windows


def budget_for(ctx) -> float | None:
    """The monthly budget of what the viewer sees ([[budgets]] and the [dashboard] aliases): the one
    over every cost line for every team, else the sum of their teams' own budgets."""
    amount = monthly_budget_for(ctx.settings.budgets, ctx.teams)
    return float(amount) if amount is not None else None


def main() -> None:
    ctx = page_header("Overview: GPU spend")
    days = window_picker("overview_days")
    try:
        with connection() as con:
            data = spend.load_current(con, ctx.teams, days)
            stale = freshness.stale_sources(con)
            alerts = alerts_view.open_alerts(con, ctx.teams)
            month = windows.month_of(data.as_of) if data.as_of is not None else None  # the KPIs' month (UTC)
            by_team = spend_table.cached(con, ctx.teams, month) if month is not None else None
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if data.as_of is None:
        st.info("No cost data yet: run `gpufinops ingest` (or `gpufinops demo`).")
        return
    if not stale.is_empty():
        st.warning(
            f"Stale data — the figures below describe {data.month_start:%B %Y}, the newest month the "
            f"warehouse holds, not today: "
            + "; ".join(f"{r['source']}: {r['message']}" for r in stale.iter_rows(named=True))
        )
    st.caption(f"Data up to {data.as_of:%Y-%m-%d}; the newest month with data is {data.month_start:%B %Y}.")
    spend.render_kpis(data, budget_for(ctx))
    if month is not None and by_team is not None:
        spend_table.render(by_team, month)
    alerts_view.render(alerts)
    spend.render_charts(data)
    spend.render_forecast(data)
    spend.render_anomalies(data)


main()
