"""Altair charts for the pages. Inputs are polars frames whose money columns are already floats."""

from __future__ import annotations

import altair as alt
import polars as pl

USD_AXIS = alt.Axis(format="$,.0f")
USD = ",.2f"


def _usd_tooltip(field: str, title: str | None = None) -> alt.Tooltip:
    return alt.Tooltip(f"{field}:Q", format=f"${USD}", title=title or field)


def stacked_area(frame: pl.DataFrame, *, x: str, y: str, color: str, title: str | None = None) -> alt.Chart:
    return alt.Chart(frame, title=title).mark_area().encode(
        x=alt.X(f"{x}:T", title=None), y=alt.Y(f"{y}:Q", title="USD", axis=USD_AXIS, stack=True),
        color=alt.Color(f"{color}:N"), tooltip=[f"{x}:T", f"{color}:N", _usd_tooltip(y)])


def stacked_bar(frame: pl.DataFrame, *, x: str, y: str, color: str, title: str | None = None,
                temporal: bool = True) -> alt.Chart:
    x_enc = alt.X(f"{x}:T" if temporal else f"{x}:N", title=None)
    if temporal:
        x_enc = alt.X(f"yearmonth({x}):O", title=None)
    return alt.Chart(frame, title=title).mark_bar().encode(
        x=x_enc, y=alt.Y(f"{y}:Q", title="USD", axis=USD_AXIS),
        color=alt.Color(f"{color}:N"), tooltip=[f"{color}:N", _usd_tooltip(y)])


def share_line(frame: pl.DataFrame, *, x: str, y: str, title: str | None = None) -> alt.Chart:
    return alt.Chart(frame, title=title).mark_line(point=True).encode(
        x=alt.X(f"{x}:T", title=None), y=alt.Y(f"{y}:Q", title="GPU share", axis=alt.Axis(format="%"),
                                               scale=alt.Scale(domain=[0, 1])),
        tooltip=[f"{x}:T", alt.Tooltip(f"{y}:Q", format=".1%")])


def forecast(frame: pl.DataFrame, title: str | None = None) -> alt.Chart:
    """Actual to date vs forecast with its interval, per horizon (month_end / next_month)."""
    base = alt.Chart(frame, title=title).encode(x=alt.X("horizon:N", title=None))
    bars = base.mark_bar(opacity=0.35).encode(
        y=alt.Y("forecast_usd:Q", title="USD", axis=USD_AXIS),
        tooltip=["horizon:N", _usd_tooltip("actual_to_date_usd", "actual to date"),
                 _usd_tooltip("forecast_usd", "forecast"), _usd_tooltip("lower_usd", "lower"),
                 _usd_tooltip("upper_usd", "upper")])
    actual = base.mark_bar(size=14).encode(y="actual_to_date_usd:Q")
    interval = base.mark_errorbar(ticks=True).encode(y="lower_usd:Q", y2="upper_usd:Q")
    return bars + actual + interval


def heatmap(frame: pl.DataFrame, *, x: str, y: str, value: str, title: str | None = None,
            fmt: str = ".0f") -> alt.Chart:
    base = alt.Chart(frame, title=title).encode(x=alt.X(f"{x}:N", title=None), y=alt.Y(f"{y}:N", title=None))
    rect = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", scale=alt.Scale(scheme="redyellowgreen", domain=[0, 100]), title="util %"),
        tooltip=[f"{x}:N", f"{y}:N", alt.Tooltip(f"{value}:Q", format=fmt), "gpu_hours:Q"])
    text = base.mark_text(baseline="middle").encode(text=alt.Text(f"{value}:Q", format=fmt))
    return rect + text


def bar_usd(frame: pl.DataFrame, *, x: str, y: str, color: str | None = None, title: str | None = None) -> alt.Chart:
    enc = {"x": alt.X(f"{x}:Q", title="USD", axis=USD_AXIS), "y": alt.Y(f"{y}:N", sort="-x", title=None),
           "tooltip": [f"{y}:N", _usd_tooltip(x)]}
    if color:
        enc["color"] = alt.Color(f"{color}:N")
    return alt.Chart(frame, title=title).mark_bar().encode(**enc)


def utilisation(frame: pl.DataFrame, title: str | None = None) -> alt.Chart:
    """Utilisation (mean and peak, %) of a resource over its window."""
    long = frame.select("hour", "util_mean", "util_max").unpivot(index="hour", variable_name="measure",
                                                                  value_name="percent")
    return alt.Chart(long, title=title).mark_line().encode(
        x=alt.X("hour:T", title=None), y=alt.Y("percent:Q", title="GPU utilisation %", scale=alt.Scale(domain=[0, 100])),
        color="measure:N", tooltip=["hour:T", "measure:N", alt.Tooltip("percent:Q", format=".1f")])


def memory(frame: pl.DataFrame, capacities: pl.DataFrame, title: str | None = None) -> alt.Chart:
    """Peak GPU memory used per hour against the current and proposed GPUs' capacity (rules)."""
    line = alt.Chart(frame, title=title).mark_line().encode(
        x=alt.X("hour:T", title=None), y=alt.Y("mem_used_max_gib:Q", title="GiB per GPU"),
        tooltip=["hour:T", alt.Tooltip("mem_used_max_gib:Q", format=".2f")])
    if capacities.is_empty():
        return line
    rules = alt.Chart(capacities).mark_rule(strokeDash=[6, 3]).encode(
        y="memory_gib:Q", color=alt.Color("label:N", title="capacity"), tooltip=["label:N", "memory_gib:Q"])
    return line + rules


def spot_prices(frame: pl.DataFrame, title: str | None = None) -> alt.Chart:
    """Spot price per region/zone over time, with the on-demand price of the same type as a dashed line."""
    lines = alt.Chart(frame, title=title).mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("ts:T", title=None), y=alt.Y("price_usd:Q", title="USD per hour", axis=alt.Axis(format="$,.2f")),
        color=alt.Color("series:N", title="spot"), tooltip=["ts:T", "series:N", _usd_tooltip("price_usd", "spot")])
    od = frame.filter(frame["on_demand_usd"].is_not_null()) if "on_demand_usd" in frame.columns else frame.clear()
    if od.is_empty():
        return lines
    per_region = od.group_by("region").agg(pl.col("on_demand_usd").max())
    rule = alt.Chart(per_region).mark_rule(strokeDash=[6, 3], color="black").encode(
        y="on_demand_usd:Q", tooltip=["region:N", _usd_tooltip("on_demand_usd", "on-demand")])
    return lines + rule


def series(frame: pl.DataFrame, *, x: str, y: str, title: str | None = None, temporal: bool = True) -> alt.Chart:
    """A generic evidence series (a list of points a model put in its evidence)."""
    return alt.Chart(frame, title=title).mark_line(point=True).encode(
        x=alt.X(f"{x}:T" if temporal else f"{x}:Q", title=x), y=alt.Y(f"{y}:Q", title=y), tooltip=[x, y])


def interruption_bands(frame: pl.DataFrame) -> alt.Chart:
    """Spot saving per instance type and region, coloured by how often spot instances are reclaimed."""
    return alt.Chart(frame, title="Spot saving vs interruption frequency").mark_bar().encode(
        x=alt.X("savings_pct:Q", title="saving over on-demand %"),
        y=alt.Y("instance_type:N", title=None, sort="-x"), yOffset="region:N",
        color=alt.Color("band_label:N", title="interrupted / month",
                        sort=alt.EncodingSortField("band_index", order="ascending"),
                        scale=alt.Scale(scheme="orangered")),
        tooltip=["instance_type:N", "region:N", "band_label:N", "savings_pct:Q"])
