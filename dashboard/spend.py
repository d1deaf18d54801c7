"""The spend picture shared by the Overview (every team in scope) and the Team page (one team).

``load`` runs the queries (no Streamlit), ``render`` draws them: the figures shown are the
queries' own results, formatted, so a test can compare one with the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import anomalies_view, charts, labels, precomputed, spend_charts
from gpufinops.dashboard.common import data_version, db_path, money, money_frame, month_bounds, total
from gpufinops.kernel.labels import NO_TEAM
from gpufinops.models import kind_coverage, plans
from gpufinops.models.kind_coverage import KindsUnknown
from gpufinops.warehouse import allocation_queries, queries
from gpufinops.warehouse.coverage import Coverage

SAVINGS_STATUS = {"identified": "open", "accepted": "accepted", "realised": "applied"}


@dataclass
class Spend:
    as_of: datetime | None
    month_start: datetime | None
    month_to_date: Decimal
    gpu_month_to_date: Decimal
    daily: pl.DataFrame  # per day, provider, team, service: as the teams carry it (allocation_queries)
    savings: pl.DataFrame
    forecast: pl.DataFrame | None  # None: the forecast model is not installed
    anomalies: pl.DataFrame | None
    allocated_gpu_month_to_date: Decimal = Decimal(0)  # its workloads' share of shared GPUs
    unallocated_gpu_month_to_date: Decimal = Decimal(0)  # idle capacity of shared GPUs it carries
    outlook: Any = None  # models.outlook.Outlook of the month the newest data falls in (None: no forecast)


def _forecast(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, as_of: datetime, start: datetime
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, Any]:
    """Forecast, anomalies and this month's outlook (``models.outlook.month_outlook``: the number the
    budgets, the report and the API quote) from the forecast model, when it is present."""
    try:
        import gpufinops.models.forecast  # noqa: F401  (an optional model)
    except ImportError:
        return None, None, None
    # fitted by the load job and stored; computed here only when it is not (an old warehouse, a load
    # since, a lead's several teams): the same functions on the same data, so the same numbers
    fits = precomputed.stored_fits(con, teams, as_of, start) or precomputed.compute_fits(con, teams, as_of, start)
    return fits.forecast, fits.anomalies, fits.outlook


def load(con: duckdb.DuckDBPyConnection, teams: list[str] | None, days: int, forecaster=_forecast) -> Spend:
    as_of = queries.latest_charge_day(con, team=teams)
    if as_of is None:
        return Spend(None, None, Decimal(0), Decimal(0), pl.DataFrame(), pl.DataFrame(), None, None, outlook=None)
    month_start, month_end = month_bounds(as_of)
    start = precomputed.spend_start(as_of, days)
    daily = allocation_queries.team_spend_daily(con, team=teams, start=start, end=as_of + timedelta(days=1))
    mtd = daily.filter(pl.col("day") >= month_start)
    forecast, anomalies, outlook = forecaster(con, teams, as_of, start)
    return Spend(
        as_of,
        month_start,
        total(mtd, "effective_cost"),
        total(mtd, "gpu_cost"),
        daily,
        queries.savings_by_status(con, team=teams),
        forecast,
        anomalies,
        total(mtd, "allocated_gpu_cost"),
        total(mtd, "unallocated_gpu_cost"),
        outlook=outlook,
    )


@st.cache_data(ttl=3600, max_entries=256, show_spinner="Fitting the forecast …")
def _forecast_cached(
    _con: duckdb.DuckDBPyConnection,
    db_file: str,
    cost_version: tuple,
    teams: tuple[str, ...] | None,
    as_of: datetime,
    start: datetime,
):
    return _forecast(_con, list(teams) if teams is not None else None, as_of, start)


@st.cache_data(ttl=900, max_entries=256, show_spinner="Computing spend …")
def _load_cached(
    _con: duckdb.DuckDBPyConnection,
    db_file: str,
    version: tuple,
    cost_version: tuple,
    teams: tuple[str, ...] | None,
    days: int,
) -> Spend:
    def forecaster(con, teams_list, as_of, start):  # the fit depends on cost data only, not on decisions
        return _forecast_cached(
            con, db_file, cost_version, tuple(teams_list) if teams_list is not None else None, as_of, start
        )

    return load(_con, list(teams) if teams is not None else None, days, forecaster)


def load_current(con: duckdb.DuckDBPyConnection, teams: list[str] | None, days: int) -> Spend:
    """``load``, reused across renders while the warehouse's data version is unchanged (an ingest, a
    model run or a decision changes it); the forecast inside it is refitted only when cost data
    changes (an ingest). The key holds the viewer's teams: no scope shares a result."""
    cost_version = queries.cost_data_version(con)
    return _load_cached(
        con,
        str(db_path().resolve()),
        data_version(con),
        cost_version,
        tuple(teams) if teams is not None else None,
        days,
    )


def savings_figure(spend: Spend, label: str) -> Decimal:
    """One number, computed where every other total is (models.plans.total: primary and step objects),
    for the one status ``label`` stands for (identified = open, accepted, realised = applied)."""
    return plans.total(spend.savings.to_dicts(), statuses=(SAVINGS_STATUS[label],))


def forecast_month_end(spend: Spend) -> tuple[str, Decimal, Decimal, Decimal] | None:
    """(month, forecast, lower, upper) of the month the newest cost data falls in, for the teams in
    scope: ``models.outlook``'s, the one number the budgets, the report and the API quote (a complete
    month's forecast is its actual, with a zero-width interval)."""
    if spend.outlook is None:
        return None
    o = spend.outlook
    return f"{o.period_start:%B %Y}", o.forecast_usd, o.lower_usd, o.upper_usd


def render_kpis(
    spend: Spend,
    budget: float | None,
    period: str = "this month",
    *,
    allocation: Coverage | None = None,
    blind: Sequence[KindsUnknown] = (),
) -> None:
    """The KPIs of ``spend`` (cut to the page's window: ``dashboard.period.spend_in``); ``period`` names
    that window in their titles ("this month", "September 2026"). ``allocation`` (its coverage) and ``blind``
    (kinds that could not look): what their missing inputs hide reads *unknown* and why, never $0."""
    cols = st.columns(4)
    delta = None
    if budget:
        left = Decimal(str(budget)) - spend.month_to_date
        delta = f"{money(abs(left))} {'under' if left >= 0 else 'over'} budget"  # the word says good or bad
    cols[0].metric(
        f"Spend {period}",
        money(spend.month_to_date),
        delta=delta,
        # green under budget, red over it, by colour and word: an arrow (up for "under") would read as growth
        delta_color="normal" if budget is None or spend.month_to_date <= Decimal(str(budget)) else "inverse",
        delta_arrow="off",
    )
    if budget:
        cols[0].caption(f"budget {money(budget)}")
    fc = forecast_month_end(spend)
    if fc is None:
        cols[1].metric("Forecast to month end", "—", help="forecast not available yet")
    else:
        cols[1].metric(f"Forecast: {fc[0]}", money(fc[1]), help="80% prediction interval below")
        complete = spend.outlook.complete
        cols[1].caption("complete: every day known" if complete else f"interval {money(fc[2])} – {money(fc[3])}")
    share = (spend.gpu_month_to_date / spend.month_to_date) if spend.month_to_date else Decimal(0)
    cols[2].metric(f"GPU spend {period}", money(spend.gpu_month_to_date))
    cols[2].caption(f"{float(share):.1%} of spend")
    _savings_identified(cols[3], savings_figure(spend, "identified"), blind)
    cols = st.columns(4)
    cols[0].metric("Savings accepted per month", money(savings_figure(spend, "accepted")))
    cols[1].metric(
        "Savings realised per month", money(savings_figure(spend, "realised")), help="recommendations marked applied"
    )
    none_shared = not spend.allocated_gpu_month_to_date and not spend.unallocated_gpu_month_to_date
    unknown = allocation is not None and not allocation.known and none_shared  # no metrics: who held them?
    cols[2].metric(
        f"Shared GPUs: allocated {period}",
        "unknown" if unknown else money(spend.allocated_gpu_month_to_date),
        help="GPU cost of shared nodes charged to the workloads that ran on them (pods, MIG slices, "
        "time-sliced and MPS workloads), by measured presence",
    )
    cols[3].metric(
        f"Shared GPUs: unallocated {period}",
        "unknown" if unknown else money(spend.unallocated_gpu_month_to_date),
        help="idle capacity of shared GPUs (no workload on them), carried by the nodes' teams "
        '(or spread over their users: [allocation] unallocated = "spread")',
    )
    if allocation is not None and allocation.sentence():
        cols[2].caption(labels.config_words(allocation.sentence()))
    elif none_shared:
        cols[2].caption(f"no shared GPUs in this scope {period} (no pods, MIG slices or time-sliced work)")


def _savings_identified(col, amount: Decimal, blind: Sequence[KindsUnknown]) -> None:
    """Open savings per month in the words the weekly report and ``recommend`` use (``models/kind_coverage``):
    with blind kinds, none found reads *unknown* (not $0), some "at least"; each group's reason on hover."""
    reasons = "\n\n".join(labels.config_words(group.line()) for group in blind)
    shown = kind_coverage.savings_value(money(amount), bool(amount), blind)
    col.metric("Savings identified per month", shown, help=f"open recommendations\n\n{reasons}".strip())
    if blind:
        col.caption(labels.config_words(kind_coverage.could_not_look(blind)))


def render_charts(spend: Spend, *, by_team: bool = True) -> None:
    """Daily spend by provider (and by team, when more than one team is shown), spend by service, the
    GPU share per day."""
    daily = money_frame(
        spend.daily,
        "effective_cost",
        "gpu_cost",
        "billed_cost",
        "allocated_gpu_cost",
        "unallocated_gpu_cost",
        "tagged_cost",
    )
    by_provider = daily.group_by("day", "provider").agg(pl.col("effective_cost").sum()).sort("day")
    by_service = daily.group_by("service").agg(pl.col("effective_cost").sum()).sort("effective_cost")
    share = (
        daily.group_by("day")
        .agg(pl.col("gpu_cost").sum() / pl.col("effective_cost").sum())
        .rename({"gpu_cost": "gpu_share"})
        .sort("day")
    )
    provider_chart = spend_charts.stacked_area(
        by_provider,
        x="day",
        y="effective_cost",
        color="provider",
        color_title="Provider",
        title="Daily spend by provider",
    )
    service_chart = spend_charts.bar_usd(
        by_service, x="effective_cost", y="service", y_title="Service", title="Spend by service in the window"
    )
    share_chart = spend_charts.share_line(
        share, x="day", y="gpu_share", y_title="GPU share of spend", title="GPU share of spend per day"
    )
    left, right = st.columns(2)
    charts.draw(left, provider_chart)
    if by_team:
        by_team_frame = (  # spend without a team has the one name for it, not a blank legend entry
            daily.with_columns(pl.col("team").fill_null(NO_TEAM))
            .group_by("day", "team")
            .agg(pl.col("effective_cost").sum())
            .sort("day")
        )
        charts.draw(
            right,
            spend_charts.stacked_area(
                by_team_frame,
                x="day",
                y="effective_cost",
                color="team",
                color_title="Team",
                title="Daily spend by team",
            ),
        )
        left, right = st.columns(2)
    else:  # one team: a by-team chart would repeat the provider chart's total
        charts.draw(right, service_chart)
        charts.draw(st, share_chart)
        return
    charts.draw(left, service_chart)
    charts.draw(right, share_chart)


HORIZONS = {"month_end": "{month:%B %Y}", "next_month": "{month:%B %Y}"}


def forecast_view(forecast: pl.DataFrame, outlook: Any = None) -> pl.DataFrame:
    """The forecast summed over the teams and providers in scope, one row per forecast month, its
    label the month's name (``November 2026``). The month the newest data falls in is ``outlook``'s row
    (the number every surface quotes); the months after it are the model's."""
    columns = ("actual_to_date_usd", "forecast_usd", "lower_usd", "upper_usd")
    frame = forecast.group_by("horizon", "month").agg([pl.col(c).sum() for c in columns])
    if outlook is not None:
        row = pl.DataFrame(
            {
                "horizon": ["month_end"],
                "month": [outlook.period_start],
                **{
                    c: [float(v)]
                    for c, v in zip(
                        columns, (outlook.actual_usd, outlook.forecast_usd, outlook.lower_usd, outlook.upper_usd)
                    )
                },
            },
            schema=frame.schema,
        )
        frame = pl.concat([row, frame.filter(pl.col("month") > outlook.period_start)])
    frame = money_frame(frame, *columns).sort("month")
    return frame.with_columns(pl.col("month").dt.strftime("%B %Y").alias("label"))


def render_forecast(spend: Spend) -> None:
    st.subheader("Forecast")
    if spend.forecast is None:
        st.info("forecast not available yet (the forecast model is not installed).")
        return
    if spend.forecast.is_empty():
        st.info("Not enough history to forecast yet.")
        return
    view = forecast_view(spend.forecast, spend.outlook)
    left, right = st.columns(2)
    charts.draw(left, spend_charts.forecast(view, title="Spend per month: forecast, 80% interval"))
    figures = view.select(
        pl.col("label").alias("month"),
        "actual_to_date_usd",
        "forecast_usd",
        pl.format(
            "{} – {}",
            pl.col("lower_usd").map_elements(money, return_dtype=pl.Utf8),
            pl.col("upper_usd").map_elements(money, return_dtype=pl.Utf8),
        ).alias("interval"),
    )
    right.markdown("**Forecast figures**")
    labels.table(
        right,
        figures,
        overrides={
            "month": st.column_config.TextColumn("Month"),
            "actual_to_date_usd": st.column_config.NumberColumn("Spent so far", format="dollar"),
            "forecast_usd": st.column_config.NumberColumn("Forecast", format="dollar"),
            "interval": st.column_config.TextColumn("80% interval"),
        },
    )
    right.caption(
        "The first month is the one the newest data falls in: its known days are actuals and only the "
        "rest is forecast (a complete month's forecast is what it cost). Teams' and providers' intervals "
        "are added, so the total's is wider than its own."
    )


def render_anomalies(spend: Spend) -> None:
    """The window's cost anomalies and the line items that moved them (``dashboard/anomalies_view.py``)."""
    anomalies_view.render(spend.anomalies)
