"""The pages' charts as Vega-Lite specs (plain dicts, drawn by ``st.vega_lite_chart``).

Inputs are polars frames whose money columns are already floats. Every title, axis and legend is a
label a reader understands; bars are for categories, lines only over time (in UTC: a day is never
shifted by the browser's time zone, and never shows ``00:00:00``). The specs are written directly
rather than through Altair: Altair's import and its JSON-schema validation of every chart were a
third of a cold page's server time (docs/dashboard.md, *Page loads*, has the profile).
"""

from __future__ import annotations

from typing import Any

import polars as pl

Spec = dict[str, Any]

USD_AXIS = {"format": "$,.0f"}
USD_FORMAT = "$,.2f"
HOUR_FORMAT = "%Y-%m-%d %H:00"
MINUTE_FORMAT = "%Y-%m-%d %H:%M"
DAY_AXIS = {"format": "%b %d", "labelOverlap": True}
LABEL_LIMIT = 260  # category labels (services, "team · GPU") are not cut at Vega's 180 px default


def spec(datasets: dict[str, pl.DataFrame], body: Spec, title: str | None = None) -> Spec:
    """A Vega-Lite spec over named datasets (each a polars frame Streamlit sends as Arrow)."""
    from gpufinops.dashboard.labels import coded  # codes and no team by their labels, in legends and tooltips

    out: Spec = {"datasets": {name: coded(frame) for name, frame in datasets.items()}, **body}
    if title:
        out["title"] = {"text": title, "anchor": "start"}
    return out


def draw(container: Any, chart: Spec) -> None:
    """One chart in a Streamlit container, as wide as the column."""
    container.vega_lite_chart(spec=chart, width="stretch")


def _usd_tooltip(field: str, title: str) -> Spec:
    return {"field": field, "type": "quantitative", "format": USD_FORMAT, "title": title}


def _time_x(field: str) -> Spec:
    """A time axis in UTC. No ``timeUnit``: Streamlit runs Vega's expression interpreter (no eval), and
    a time unit is an expression per data point: on an hourly 60-day series it was most of the chart."""
    return {"field": field, "type": "temporal", "title": None, "scale": {"type": "utc"}, "axis": DAY_AXIS}


def with_time_label(frame: pl.DataFrame, field: str, fmt: str = "%Y-%m-%d") -> pl.DataFrame:
    """The frame with ``<field>_label``, its time as UTC text for tooltips (formatted here, not per
    point in the browser)."""
    value = pl.col(field)
    if frame.schema[field] == pl.Date:
        value = value.cast(pl.Datetime("us", "UTC"))
    elif getattr(frame.schema[field], "time_zone", None):
        value = value.dt.convert_time_zone("UTC")
    return frame.with_columns(value.dt.strftime(fmt).alias(f"{field}_label"))


def _label_tooltip(field: str, title: str) -> Spec:
    return {"field": f"{field}_label", "type": "nominal", "title": title}


def stacked_area(frame: pl.DataFrame, *, x: str, y: str, color: str, color_title: str,
                 title: str | None = None) -> Spec:
    """Daily spend stacked by a category (provider, team)."""
    return spec({"daily": with_time_label(frame, x)}, {
        "data": {"name": "daily"}, "mark": {"type": "area"},
        "encoding": {
            "x": _time_x(x),
            "y": {"field": y, "type": "quantitative", "stack": True, "title": "Spend (USD)", "axis": USD_AXIS},
            "color": {"field": color, "type": "nominal", "title": color_title},
            "tooltip": [_label_tooltip(x, "Day"), {"field": color, "type": "nominal", "title": color_title},
                        _usd_tooltip(y, "Spend")]}}, title)


def bar_usd(frame: pl.DataFrame, *, x: str, y: str, y_title: str, x_title: str = "Spend (USD)",
            color: str | None = None, color_title: str | None = None, title: str | None = None) -> Spec:
    """Horizontal bars of money per category, largest first."""
    encoding: Spec = {
        "x": {"field": x, "type": "quantitative", "title": x_title, "axis": USD_AXIS},
        "y": {"field": y, "type": "nominal", "sort": "-x", "title": None, "axis": {"labelLimit": LABEL_LIMIT}},
        "tooltip": [{"field": y, "type": "nominal", "title": y_title}, _usd_tooltip(x, x_title.split(" (")[0])]}
    if color:
        encoding["color"] = {"field": color, "type": "nominal", "title": color_title or color}
        encoding["tooltip"].insert(1, {"field": color, "type": "nominal", "title": color_title or color})
    return spec({"bars": frame}, {"data": {"name": "bars"}, "mark": {"type": "bar"}, "encoding": encoding}, title)


def share_line(frame: pl.DataFrame, *, x: str, y: str, y_title: str, title: str | None = None) -> Spec:
    """A share (0–1) per day, as a line over time."""
    return spec({"share": with_time_label(frame, x)}, {
        "data": {"name": "share"}, "mark": {"type": "line", "point": True},
        "encoding": {
            "x": _time_x(x),
            "y": {"field": y, "type": "quantitative", "title": y_title, "axis": {"format": "%"},
                  "scale": {"domain": [0, 1]}},
            "tooltip": [_label_tooltip(x, "Day"), {"field": y, "type": "quantitative", "format": ".1%",
                                                    "title": y_title}]}},
        title)


FORECAST_MEASURES = {"actual_to_date_usd": "Spent so far", "forecast_usd": "Forecast"}


def forecast(frame: pl.DataFrame, title: str | None = None) -> Spec:
    """Per forecast month (a category): the forecast bar, what is spent so far inside it, and the 80 %
    interval as a whisker. ``frame``: ``label``, ``actual_to_date_usd``, ``forecast_usd``, ``lower_usd``,
    ``upper_usd``."""
    bars = frame.unpivot(index="label", on=list(FORECAST_MEASURES), variable_name="measure", value_name="usd") \
        .with_columns(pl.col("measure").replace_strict(FORECAST_MEASURES))
    order = list(frame["label"])
    x = {"field": "label", "type": "nominal", "title": None, "sort": order, "axis": {"labelAngle": 0}}
    interval_tooltip = [{"field": "label", "title": "Month"}, _usd_tooltip("forecast_usd", "Forecast"),
                        _usd_tooltip("lower_usd", "80% interval from"), _usd_tooltip("upper_usd", "80% interval to")]
    return spec({"forecast_bars": bars, "forecast": frame}, {"layer": [
        {"data": {"name": "forecast_bars"}, "mark": {"type": "bar", "width": {"band": 0.6}},
         "encoding": {"x": x, "y": {"field": "usd", "type": "quantitative", "stack": None, "title": "USD",
                                    "axis": USD_AXIS},
                      "color": {"field": "measure", "type": "nominal", "title": None,
                                "scale": {"domain": list(FORECAST_MEASURES.values()), "range": ["#1f4e79", "#9ecae9"]},
                                "sort": list(FORECAST_MEASURES.values())},
                      "order": {"field": "measure", "sort": "descending"},
                      "tooltip": [{"field": "label", "title": "Month"}, {"field": "measure", "title": "Figure"},
                                  _usd_tooltip("usd", "USD")]}},
        {"data": {"name": "forecast"}, "mark": {"type": "rule", "color": "black"},
         "encoding": {"x": x, "y": {"field": "lower_usd", "type": "quantitative", "title": "USD"},
                      "y2": {"field": "upper_usd"}, "tooltip": interval_tooltip}},
        *({"data": {"name": "forecast"}, "mark": {"type": "tick", "color": "black", "size": 24, "thickness": 1.5},
           "encoding": {"x": x, "y": {"field": edge, "type": "quantitative"}, "tooltip": interval_tooltip}}
          for edge in ("lower_usd", "upper_usd")),
    ]}, title)


def heatmap(frame: pl.DataFrame, *, x: str, y: str, value: str, x_title: str, y_title: str, value_title: str,
            title: str | None = None) -> Spec:
    """A utilisation matrix (team × GPU model), the figure in each cell."""
    encoding = {"x": {"field": x, "type": "nominal", "title": x_title, "axis": {"labelAngle": 0}},
                "y": {"field": y, "type": "nominal", "title": y_title}}
    tooltip = [{"field": y, "title": y_title}, {"field": x, "title": x_title},
               {"field": value, "type": "quantitative", "format": ".1f", "title": value_title}]
    if "util_p95" in frame.columns:
        tooltip.append({"field": "util_p95", "type": "quantitative", "format": ".1f", "title": "p95 utilisation %"})
    if "gpu_hours" in frame.columns:
        tooltip.append({"field": "gpu_hours", "type": "quantitative", "format": ",.0f", "title": "GPU-hours"})
    return spec({"cells": frame}, {"data": {"name": "cells"}, "encoding": encoding, "layer": [
        {"mark": "rect", "encoding": {
            "color": {"field": value, "type": "quantitative", "title": value_title,
                      "scale": {"scheme": "redyellowgreen", "domain": [0, 100]}},
            "tooltip": tooltip}},
        {"mark": {"type": "text", "baseline": "middle"},
         "encoding": {"text": {"field": value, "type": "quantitative", "format": ".0f"}}},
    ]}, title)


def utilisation(frame: pl.DataFrame, title: str | None = None) -> Spec:
    """Mean and peak GPU utilisation (%) of one resource per hour."""
    long = frame.select("hour", "util_mean", "util_max").unpivot(index="hour", variable_name="measure",
                                                                  value_name="percent") \
        .with_columns(pl.col("measure").replace_strict({"util_mean": "Mean", "util_max": "Peak"}))
    return spec({"utilisation": with_time_label(long, "hour", HOUR_FORMAT)}, {
        "data": {"name": "utilisation"}, "mark": {"type": "line"},
        "encoding": {
            "x": _time_x("hour"),
            "y": {"field": "percent", "type": "quantitative", "title": "GPU utilisation (%)",
                  "scale": {"domain": [0, 100]}},
            "color": {"field": "measure", "type": "nominal", "title": "Utilisation"},
            "tooltip": [_label_tooltip("hour", "Hour (UTC)"), {"field": "measure", "title": "Measure"},
                        {"field": "percent", "type": "quantitative", "format": ".1f", "title": "Utilisation %"}]}},
        title)


def memory(frame: pl.DataFrame, capacities: pl.DataFrame, title: str | None = None) -> Spec:
    """Peak GPU memory used per hour, against the current and proposed GPUs' capacity (dashed)."""
    line = {"data": {"name": "memory"}, "mark": {"type": "line"}, "encoding": {
        "x": _time_x("hour"),
        "y": {"field": "mem_used_max_gib", "type": "quantitative", "title": "Memory per GPU (GiB)"},
        "tooltip": [_label_tooltip("hour", "Hour (UTC)"),
                    {"field": "mem_used_max_gib", "type": "quantitative", "format": ".2f", "title": "Peak used (GiB)"}]}}
    layers = [line]
    datasets = {"memory": with_time_label(frame.select("hour", "mem_used_max_gib"), "hour", HOUR_FORMAT)}
    if not capacities.is_empty():
        datasets["capacity"] = capacities
        layers.append({"data": {"name": "capacity"}, "mark": {"type": "rule", "strokeDash": [6, 3]}, "encoding": {
            "y": {"field": "memory_gib", "type": "quantitative"},
            "color": {"field": "label", "type": "nominal", "title": "GPU capacity"},
            "tooltip": [{"field": "label", "title": "GPU"},
                        {"field": "memory_gib", "type": "quantitative", "format": ".0f", "title": "Capacity (GiB)"}]}})
    return spec(datasets, {"layer": layers}, title)


def spot_prices(frame: pl.DataFrame, until: Any, title: str | None = None) -> Spec:
    """Spot price per zone / region as steps over time (a price holds until the next change, so each
    series runs on to ``until``), the on-demand price of the same type as a dashed rule."""
    points = frame.select("ts", "series", "price_usd")
    tails = points.sort("ts").group_by("series", maintain_order=True).last() \
        .filter(pl.col("ts") < until).with_columns(pl.lit(until).cast(points.schema["ts"]).alias("ts"))
    steps = with_time_label(pl.concat([points, tails.select(points.columns)]).sort("series", "ts"), "ts", MINUTE_FORMAT)
    points = with_time_label(points, "ts", MINUTE_FORMAT)
    layers = [{"data": {"name": "spot"}, "mark": {"type": "line", "interpolate": "step-after"},
               "encoding": {
                   "x": _time_x("ts"),
                   "y": {"field": "price_usd", "type": "quantitative", "title": "USD per hour",
                         "axis": {"format": "$,.2f"}},
                   "color": {"field": "series", "type": "nominal", "title": "Spot (zone / region)"},
                   "tooltip": [_label_tooltip("ts", "From (UTC)"), {"field": "series", "title": "Zone / region"},
                               _usd_tooltip("price_usd", "Spot per hour")]}},
              {"data": {"name": "spot_changes"}, "mark": {"type": "point", "filled": True},
               "encoding": {"x": _time_x("ts"), "y": {"field": "price_usd", "type": "quantitative"},
                            "color": {"field": "series", "type": "nominal", "title": "Spot (zone / region)"},
                            "tooltip": [_label_tooltip("ts", "From (UTC)"), {"field": "series", "title": "Zone / region"},
                                        _usd_tooltip("price_usd", "Spot per hour")]}}]
    datasets = {"spot": steps, "spot_changes": points}
    on_demand = frame.filter(pl.col("on_demand_usd").is_not_null()) if "on_demand_usd" in frame.columns else frame.clear()
    if not on_demand.is_empty():
        datasets["on_demand"] = on_demand.group_by("region").agg(pl.col("on_demand_usd").max())
        layers.append({"data": {"name": "on_demand"}, "mark": {"type": "rule", "strokeDash": [6, 3], "color": "black"},
                       "encoding": {"y": {"field": "on_demand_usd", "type": "quantitative"},
                                    "tooltip": [{"field": "region", "title": "Region"},
                                                _usd_tooltip("on_demand_usd", "On-demand per hour")]}})
    return spec(datasets, {"layer": layers}, title)


def interruption_bands(frame: pl.DataFrame) -> Spec:
    """Spot saving per instance type and region (each bar labelled with both), coloured by how often
    AWS reclaims spot instances of that type there."""
    bars = frame.with_columns((pl.col("instance_type") + " · " + pl.col("region")).alias("type_region"))
    return spec({"bands": bars}, {
        "data": {"name": "bands"}, "mark": {"type": "bar"},
        "encoding": {
            "x": {"field": "savings_pct", "type": "quantitative", "title": "Spot saving over on-demand (%)"},
            "y": {"field": "type_region", "type": "nominal", "title": None, "sort": "-x",
                  "axis": {"labelLimit": LABEL_LIMIT}},
            "color": {"field": "band_label", "type": "nominal", "title": "Interrupted per month",
                      "sort": {"field": "band_index", "order": "ascending"}, "scale": {"scheme": "orangered"}},
            "tooltip": [{"field": "instance_type", "title": "Instance type"}, {"field": "region", "title": "Region"},
                        {"field": "band_label", "title": "Interrupted per month"},
                        {"field": "savings_pct", "type": "quantitative", "title": "Saving %"}]}},
        "Spot saving vs interruption frequency")


def category_bars(frame: pl.DataFrame, *, category: str, value: str, category_title: str, value_title: str,
                  value_format: str = ",.2f", title: str | None = None, reference: float | None = None,
                  reference_title: str | None = None) -> Spec:
    """Bars of one figure per category (a GPU, an option), in the frame's order; horizontal when the
    names are long (they stay readable); an optional dashed reference line (the threshold a GPU must
    stay under, the on-prem cost to beat)."""
    order = [str(v) for v in frame[category].to_list()]
    horizontal = max((len(v) for v in order), default=0) > 12
    cat = {"field": category, "type": "nominal", "title": None if horizontal else category_title, "sort": order,
           "axis": {"labelAngle": 0, "labelLimit": LABEL_LIMIT}}
    val = {"field": value, "type": "quantitative", "title": value_title}
    tooltip = [{"field": category, "title": category_title},
               {"field": value, "type": "quantitative", "format": value_format, "title": value_title}]
    layers = [{"data": {"name": "bars"}, "mark": {"type": "bar"},
               "encoding": {"x": val, "y": cat, "tooltip": tooltip} if horizontal else
                           {"x": cat, "y": val, "tooltip": tooltip}}]
    datasets = {"bars": frame.with_columns(pl.col(category).cast(pl.Utf8))}
    if reference is not None:
        datasets["reference"] = pl.DataFrame({"reference": [float(reference)], "label": [reference_title or ""]})
        layers.append({"data": {"name": "reference"}, "mark": {"type": "rule", "strokeDash": [6, 3], "color": "black"},
                       "encoding": {("x" if horizontal else "y"): {"field": "reference", "type": "quantitative"},
                                    "tooltip": [{"field": "label", "title": "Reference"},
                                                {"field": "reference", "type": "quantitative", "format": value_format,
                                                 "title": value_title}]}})
    return spec(datasets, {"layer": layers}, title)


def grouped_bars(frame: pl.DataFrame, *, category: str, group: str, value: str, category_title: str,
                 group_title: str, value_title: str, title: str | None = None) -> Spec:
    """Horizontal bars of a money figure per category, one bar per group side by side (on-prem vs cloud)."""
    return spec({"bars": frame}, {
        "data": {"name": "bars"}, "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": category, "type": "nominal", "title": None, "axis": {"labelLimit": LABEL_LIMIT}},
            "yOffset": {"field": group, "type": "nominal"},
            "x": {"field": value, "type": "quantitative", "title": value_title, "axis": {"format": "$,.2f"}},
            "color": {"field": group, "type": "nominal", "title": group_title},
            "tooltip": [{"field": category, "title": category_title}, {"field": group, "title": group_title},
                        _usd_tooltip(value, value_title)]}}, title)


def time_line(frame: pl.DataFrame, *, x: str, y: str, y_title: str, title: str | None = None) -> Spec:
    """One figure over time (an evidence series with timestamps)."""
    return spec({"series": with_time_label(frame, x, MINUTE_FORMAT)}, {
        "data": {"name": "series"}, "mark": {"type": "line", "point": True},
        "encoding": {"x": _time_x(x), "y": {"field": y, "type": "quantitative", "title": y_title},
                     "tooltip": [_label_tooltip(x, "When (UTC)"),
                                 {"field": y, "type": "quantitative", "format": ",.2f", "title": y_title}]}}, title)
