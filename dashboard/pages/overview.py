"""Overview (finance): spend this month vs budget and forecast, where it goes, what was saved."""

from __future__ import annotations

import streamlit as st

from gpufinops.dashboard import alerts_view, period, spend, spend_table, views
from gpufinops.dashboard.common import cached_call, connection, page_header
from gpufinops.models import kind_coverage
from gpufinops.models.budgets import monthly_budget_for
from gpufinops.warehouse import coverage, freshness


def budget_for(ctx) -> float | None:
    """The monthly budget of what the viewer sees ([[budgets]] and the [dashboard] aliases): the one
    over every cost line for every team, else the sum of their teams' own budgets."""
    amount = monthly_budget_for(ctx.settings.budgets, ctx.teams)
    return float(amount) if amount is not None else None


def main() -> None:
    ctx = page_header("Overview: GPU spend")
    try:
        with connection() as con:
            found = period.of_page(
                con, "overview_period", ctx.teams, "No cost data yet: run `gpufinops ingest` (or `gpufinops demo`)."
            )
            if found is None:
                return
            as_of, window = found
            data = spend.load_current(con, ctx.teams, period.days_back(window, as_of))
            if data.as_of is None:
                st.info("No cost data yet: run `gpufinops ingest` (or `gpufinops demo`).")
                return
            # the newest data per source, read once per load (a scan of every line item); stale against now
            stale = freshness.stale_sources(con, newest_rows=cached_call(con, freshness.newest_by_source))
            alerts = alerts_view.open_alerts(con, ctx.teams)
            start, end = window.start, period.query_end(window, as_of)
            hours = cached_call(con, coverage.gpu_hours, team=ctx.teams, start=start, end=end)  # one scan, cached
            shown = period.spend_in(data, window)
            head(ctx, data, shown, window, as_of, stale, hours)
            alerts_view.summary(alerts)
            view, tab = views.open_view("overview")
            with tab:  # only the open view is read and drawn
                if view == "Spend":
                    spend_table.render(spend_table.cached(con, ctx.teams, window), window)
                    spend.render_charts(shown)
                elif view == "Forecast":
                    spend.render_forecast(data)
                elif view == "Anomalies":
                    spend.render_anomalies(shown)
                else:
                    alerts_view.render(alerts)
    except FileNotFoundError as exc:
        st.error(str(exc))


def head(ctx, data, shown, window, as_of, stale, hours) -> None:
    """What the whole page covers, above its views: staleness, the window, the KPIs."""
    if not stale.is_empty():
        st.warning(
            f"Stale data — the figures below describe {window.label}, up to the newest day the "
            f"warehouse holds ({data.as_of:%Y-%m-%d}), not today: "
            + "; ".join(f"{r['source']}: {r['message']}" for r in stale.iter_rows(named=True))
        )
    st.caption(
        f"Data up to {data.as_of:%Y-%m-%d}; the newest month with data is {data.month_start:%B %Y}. "
        f"Every figure below covers {window.label}, in UTC days (forecast and savings: per month)."
    )
    allocation = coverage.figures_of(hours, ("allocation",))
    blind = kind_coverage.unknown_kinds_of(hours)
    budget = budget_for(ctx) if period.is_data_month(window, as_of) else None
    spend.render_kpis(shown, budget, period.kpi_period(window, as_of), allocation=allocation["allocation"], blind=blind)


main()
