"""Team: one team's spend, its GPU fleet and its recommendations (a lead picks among its own teams)."""

from __future__ import annotations

import streamlit as st

from gpufinops.dashboard import (
    alerts_view,
    carbon_view,
    charts,
    gpu_charts,
    labels,
    period,
    spend,
    unit_costs_view,
    views,
)
from gpufinops.dashboard.common import cached_call, cached_query, connection, page_header
from gpufinops.dashboard.recommendation_list import listed
from gpufinops.models import kind_coverage
from gpufinops.models.budgets import monthly_budget_for
from gpufinops.warehouse import allocation_queries, coverage
from gpufinops.warehouse.queries import carbon as carbon_queries


def main() -> None:
    ctx = page_header("Team")
    try:
        with connection() as con:
            teams = cached_query(con, "cost_teams", team=ctx.teams)
            if not teams:
                period.say_empty(con, ctx.teams, "No team has cost data in your scope yet.")
                return
            team = st.sidebar.selectbox("Team", teams, key="team_pick")
            if not ctx.scope.allows(team):  # the options are scoped already; never trust a widget
                st.error("Access denied.")
                return
            found = period.of_page(con, "team_period", [team], f"No cost data for {team} yet.")
            if found is None:  # listed for its cost lines, which a reload removed since
                return
            as_of, window = found
            data = spend.load_current(con, [team], period.days_back(window, as_of))
            start, end = window.start, period.query_end(window, as_of)
            alerts = alerts_view.open_alerts(con, [team])
            hours = cached_call(con, coverage.gpu_hours, team=[team], start=start, end=end)  # one scan, cached
            cover, blind = coverage.figures_of(hours), kind_coverage.unknown_kinds_of(hours)
            st.header(team)
            st.caption(
                f"Every figure on this page covers {window.label}, in UTC days (forecast and savings: per month)."
            )
            budget = monthly_budget_for(ctx.settings.budgets, [team]) if period.is_data_month(window, as_of) else None
            shown = period.spend_in(data, window)
            spend.render_kpis(
                shown,
                float(budget) if budget is not None else None,
                period.kpi_period(window, as_of),
                allocation=cover["allocation"],
                blind=blind,
            )
            alerts_view.summary(alerts)
            view, tab = views.open_view("team")
            with tab:  # only the open view is read and drawn
                if view == "Spend":
                    spend.render_charts(shown, by_team=False)
                elif view == "Forecast":
                    spend.render_forecast(data)
                elif view == "Shared GPUs":
                    shared = cached_call(
                        con, allocation_queries.allocation_by_workload, team=[team], start=start, end=end
                    )
                    idle = cached_call(con, allocation_queries.unallocated_by_node, team=[team], start=start, end=end)
                    render_shared(shared, idle, cover["allocation"])
                elif view == "GPU fleet":
                    fleet = cached_query(con, "fleet_utilisation", team=[team], start=start, end=end)
                    render_fleet(fleet, cover["utilisation"])
                elif view == "Energy and emissions":
                    emissions = cached_call(
                        con, carbon_queries.carbon_summary, by="resource", team=[team], start=start, end=end
                    )
                    sources = cached_call(con, carbon_queries.sources, team=[team], start=start, end=end)
                    carbon_view.render(emissions, sources, window=window, cover=cover["emissions"])
                elif view == "Unit costs":
                    serving, note, empty = cached_call(con, unit_costs_view.load, teams=[team], start=start, end=end)
                    unit_costs_view.render(serving, note, empty=empty)
                elif view == "Recommendations":
                    render_recommendations(cached_call(con, listed, team=[team]), blind)
                else:
                    alerts_view.render(alerts, heading=f"Open alerts of {team}")
    except FileNotFoundError as exc:
        st.error(str(exc))


def render_fleet(fleet, cover: coverage.Coverage) -> None:
    st.subheader("GPU fleet")
    if fleet.is_empty():
        st.info(labels.config_words(cover.sentence()) or "No GPU metrics for this team in the window.")
        return
    charts.draw(
        st,
        gpu_charts.utilisation_heatmap(
            fleet, "Mean GPU utilisation % per GPU model (p95 and GPU-hours on hover; every team on the GPU fleet page)"
        ),
    )


def render_recommendations(recs, blind) -> None:
    st.subheader("Recommendations")
    for group in blind:
        st.warning(labels.config_words(f"Unknown findings: {group.line()}"))
    if recs.is_empty():
        if blind:  # kinds that could not look found nothing: that is not "no waste"
            st.info("No recommendations for this team where the models could see the data.")
        else:
            st.success("No recommendations for this team.")
        return
    labels.table(
        st,
        recs.select("monthly_savings_usd", "kind", "resource", "action", "confidence", "status", "resource_id"),
        hide=("resource_id",),
    )
    st.caption("Accept or dismiss them on the Recommendations page.")


def render_shared(shared, idle_nodes, cover: coverage.Coverage) -> None:
    """Shared GPUs: what the team's workloads were charged on shared nodes, and the idle capacity it carries."""
    st.subheader("Shared GPUs")
    if shared.is_empty() and idle_nodes.is_empty() and not cover.known:
        st.info(
            labels.config_words(cover.sentence())
        )  # no metrics: which workloads held the GPUs is unknown, not "none"
        return
    if shared.is_empty() and idle_nodes.is_empty():
        st.info(
            "No shared-GPU allocation for this team in the window (its GPU resources carry no pods, MIG "
            "slices or time-sliced workloads, so they stay with their tag's team)."
        )
        return
    if not shared.is_empty():
        st.caption(
            "Allocated: each workload's share of the GPU-hours it held (pods by presence, MIG by slices, "
            "time-sliced and MPS workloads by measured activity, else equally)."
        )
        labels.table(st, shared)
    if not idle_nodes.is_empty():
        st.caption("Unallocated: idle capacity of shared nodes this team carries, per node.")
        labels.table(st, idle_nodes)


main()
