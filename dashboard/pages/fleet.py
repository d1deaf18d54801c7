"""GPU fleet: utilisation per team × GPU model, idle GPU-hours and their cost, unattributed GPU-hours."""

from __future__ import annotations

import polars as pl
import streamlit as st

from gpufinops.dashboard import carbon_view, charts, gpu_charts, labels, period, spend_charts, views
from gpufinops.dashboard.common import (
    cached_call,
    cached_query,
    connection,
    money,
    money_frame,
    page_header,
    total,
)
from gpufinops.dashboard.precomputed import IDLE_UTIL_PCT
from gpufinops.warehouse import coverage
from gpufinops.warehouse.queries import carbon as carbon_queries


def main() -> None:
    ctx = page_header("GPU fleet")
    try:
        with connection() as con:
            found = period.of_page(con, "fleet_period", ctx.teams, "No GPU usage in your scope yet.")
            # no bill (said above): the GPU metrics' utilisation is still what they measured
            found = found or period.of_metrics(con, "fleet_period", ctx.teams)
            if found is None:
                return
            as_of, window = found
            start, end = window.start, period.query_end(window, as_of)
            util = cached_query(con, "fleet_utilisation", team=ctx.teams, **span(start, end))
            idle = cached_query(con, "idle_gpu_cost", team=ctx.teams, idle_util_pct=IDLE_UTIL_PCT, **span(start, end))
            cover = coverage.figures_of(cached_call(con, coverage.gpu_hours, team=ctx.teams, start=start, end=end))
            st.caption(f"Every figure on this page covers {window.label}, in UTC days.")
            if util.is_empty() and idle.is_empty():
                st.info(f"No GPU usage in your scope in {window.label}.")
                return
            _kpis(idle, cover["idle_cost"], cover["utilisation"])
            view, tab = views.open_view("fleet")
            with tab:  # only the open view is read and drawn
                if view == "Utilisation":
                    charts.draw(st, gpu_charts.utilisation_heatmap(util, "Mean GPU utilisation % (team × GPU model)"))
                elif view == "Idle GPUs":
                    render_idle(idle, cover["idle_cost"])
                elif view == "Energy and emissions":
                    emissions = cached_call(
                        con, carbon_queries.carbon_summary, by="team", team=ctx.teams, start=start, end=end
                    )
                    sources = cached_call(con, carbon_queries.sources, team=ctx.teams, start=start, end=end)
                    carbon_view.render(
                        emissions,
                        sources,
                        heading="Energy and emissions per team",
                        window=window,
                        cover=cover["emissions"],
                    )
                else:
                    render_unattributed(con, ctx, start, end, cover)
    except FileNotFoundError as exc:
        st.error(str(exc))


def render_idle(idle: pl.DataFrame, idle_cover: coverage.Coverage) -> None:
    st.subheader("Idle GPUs and their cost")
    idle_view = money_frame(idle, "idle_cost", "gpu_cost").with_columns(pl.col("idle_gpu_hours").cast(pl.Int64))
    if not idle_cover.known:  # no idle figure is measured: the columns would read 0, which is not what is known
        idle_view = idle_view.drop("idle_resource_hours", "idle_gpu_hours", "idle_cost")
    chart_rows = idle.filter(pl.col("idle_cost") > 0) if idle_cover.known else idle.clear()
    chart_rows = (
        money_frame(chart_rows, "idle_cost", "gpu_cost")
        .filter(pl.col("idle_cost") > 0)
        .with_columns((pl.col("team") + " · " + pl.col("gpu_model").fill_null("?")).alias("team · GPU"))
    )
    if not chart_rows.is_empty():
        charts.draw(
            st,
            spend_charts.bar_usd(
                chart_rows,
                x="idle_cost",
                y="team · GPU",
                y_title="Team · GPU model",
                x_title="Idle GPU cost (USD)",
                color="team",
                color_title="Team",
                title="Idle GPU cost in the window",
            ),
        )
    labels.table(st, idle_view)


def render_unattributed(con, ctx, start, end, cover: dict[str, coverage.Coverage]) -> None:
    """GPU-hours nobody's bill claims belong to no team: only a viewer of every team sees them."""
    st.subheader("Unattributed GPU-hours")
    if ctx.teams is not None:
        st.caption("Unattributed GPU-hours belong to no team: finance sees them.")
        return
    unattributed = cached_query(con, "unattributed_gpu_hours", **span(start, end))
    attribution = cached_query(con, "gpu_hours_attribution", **span(start, end))
    if not cover["utilisation"].known:
        st.info(labels.config_words(cover["attribution"].sentence()))
    elif unattributed.is_empty():
        st.success("Every measured GPU-hour in the window is matched to a billed resource and a team.")
    else:
        no_bill = int(unattributed.filter(pl.col("missing") == "billed resource")["gpu_hours"].sum())
        no_team = int(unattributed.filter(pl.col("missing") == "team")["gpu_hours"].sum())
        st.warning(
            f'{no_bill + no_team:,} GPU-hours in the window belong to no team (the "(unattributed)" row '
            f"of the Utilisation view): {no_bill:,} on hosts no bill claims (map them in the source's `resource_map`, or "
            f"the bill has not arrived yet), {no_team:,} on billed resources without a team tag."
        )
        labels.table(st, unattributed)
    if not attribution.is_empty():  # the same hours as the sentence above, by source
        teamless = pl.col("gpu_hours") - pl.col("team_gpu_hours")
        labels.table(
            st,
            attribution.with_columns(
                teamless.alias("no_team_gpu_hours"), (teamless / pl.col("gpu_hours")).alias("no_team_share")
            ).select(
                "source",
                "gpu_hours",
                "team_gpu_hours",
                "no_team_gpu_hours",
                "no_team_share",
                "attributed_gpu_hours",
                "unattributed_gpu_hours",
            ),
            overrides={
                "no_team_gpu_hours": st.column_config.NumberColumn("GPU-hours of no team", format="localized"),
                "no_team_share": st.column_config.NumberColumn("Share of no team", format="percent"),
                "attributed_gpu_hours": st.column_config.NumberColumn("On a billed resource", format="localized"),
                "unattributed_gpu_hours": st.column_config.NumberColumn("On no billed resource", format="localized"),
            },
        )


def span(start, end) -> dict:
    """The window as query arguments: ``end`` only where it cuts the data (the stored results' keys)."""
    return {"start": start} if end is None else {"start": start, "end": end}


def _kpis(idle: pl.DataFrame, idle_cover: coverage.Coverage, util_cover: coverage.Coverage) -> None:
    """The idle KPIs, each unknown where its inputs are missing, and one warning per reason."""
    cols = st.columns(3)
    cols[0].metric(
        "Idle GPU cost",
        idle_cover.value_or_unknown(money(total(idle, "idle_cost"))),
        help=f"billed GPU hours whose measured peak utilisation stayed under {IDLE_UTIL_PCT:.0f}%",
    )
    cols[1].metric("Idle GPU-hours", idle_cover.value_or_unknown(f"{int(total(idle, 'idle_gpu_hours')):,}"))
    cols[2].metric(
        "GPU-hours measured", f"{util_cover.covered:,.0f} of {util_cover.total:,.0f}", help="of the billed GPU-hours"
    )
    reasons: dict[str, list[str]] = {}  # one warning per reason, naming every figure it leaves unknown
    for figure in (idle_cover, util_cover):
        if figure.detail():
            reasons.setdefault(figure.detail(), []).append(figure.label)
    for detail, names in reasons.items():
        st.warning(labels.config_words(f"{' and '.join(names)}: {detail}"))


main()
