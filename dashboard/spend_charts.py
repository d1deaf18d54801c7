"""Spend charts: money over time (stacked by a category, a share per day), per category (bars, bars side
by side), and the month forecast with its interval. Built on ``dashboard/charts.py``."""

from __future__ import annotations

import polars as pl

from gpufinops.dashboard import charts
from gpufinops.dashboard.charts import Spec


def stacked_area(
    frame: pl.DataFrame, *, x: str, y: str, color: str, color_title: str, title: str | None = None
) -> Spec:
    """Daily spend stacked by a category (provider, team)."""
    return charts.spec(
        {"daily": charts.with_time_label(frame, x)},
        {
            "data": {"name": "daily"},
            "mark": {"type": "area"},
            "encoding": {
                "x": charts.time_x(x),
                "y": {
                    "field": y,
                    "type": "quantitative",
                    "stack": True,
                    "title": "Spend (USD)",
                    "axis": charts.USD_AXIS,
                },
                "color": {"field": color, "type": "nominal", "title": color_title},
                "tooltip": [
                    charts.label_tooltip(x, "Day"),
                    {"field": color, "type": "nominal", "title": color_title},
                    charts.usd_tooltip(y, "Spend"),
                ],
            },
        },
        title,
    )


def bar_usd(
    frame: pl.DataFrame,
    *,
    x: str,
    y: str,
    y_title: str,
    x_title: str = "Spend (USD)",
    color: str | None = None,
    color_title: str | None = None,
    title: str | None = None,
) -> Spec:
    """Horizontal bars of money per category, largest first."""
    encoding: Spec = {
        "x": {"field": x, "type": "quantitative", "title": x_title, "axis": charts.USD_AXIS},
        "y": {"field": y, "type": "nominal", "sort": "-x", "title": None, "axis": {"labelLimit": charts.LABEL_LIMIT}},
        "tooltip": [{"field": y, "type": "nominal", "title": y_title}, charts.usd_tooltip(x, x_title.split(" (")[0])],
    }
    if color:
        encoding["color"] = {"field": color, "type": "nominal", "title": color_title or color}
        encoding["tooltip"].insert(1, {"field": color, "type": "nominal", "title": color_title or color})
    return charts.spec(
        {"bars": frame}, {"data": {"name": "bars"}, "mark": {"type": "bar"}, "encoding": encoding}, title
    )


def share_line(frame: pl.DataFrame, *, x: str, y: str, y_title: str, title: str | None = None) -> Spec:
    """A share (0–1) per day, as a line over time."""
    return charts.spec(
        {"share": charts.with_time_label(frame, x)},
        {
            "data": {"name": "share"},
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": charts.time_x(x),
                "y": {
                    "field": y,
                    "type": "quantitative",
                    "title": y_title,
                    "axis": {"format": "%"},
                    "scale": {"domain": [0, 1]},
                },
                "tooltip": [
                    charts.label_tooltip(x, "Day"),
                    {"field": y, "type": "quantitative", "format": ".1%", "title": y_title},
                ],
            },
        },
        title,
    )


FORECAST_MEASURES = {"actual_to_date_usd": "Spent so far", "forecast_usd": "Forecast"}


def forecast(frame: pl.DataFrame, title: str | None = None) -> Spec:
    """Per forecast month (a category): the forecast bar, what is spent so far inside it, and the 80 %
    interval as a whisker. ``frame``: ``label``, ``actual_to_date_usd``, ``forecast_usd``, ``lower_usd``,
    ``upper_usd``."""
    bars = frame.unpivot(
        index="label", on=list(FORECAST_MEASURES), variable_name="measure", value_name="usd"
    ).with_columns(pl.col("measure").replace_strict(FORECAST_MEASURES))
    order = list(frame["label"])
    x = {"field": "label", "type": "nominal", "title": None, "sort": order, "axis": {"labelAngle": 0}}
    interval_tooltip = [
        {"field": "label", "title": "Month"},
        charts.usd_tooltip("forecast_usd", "Forecast"),
        charts.usd_tooltip("lower_usd", "80% interval from"),
        charts.usd_tooltip("upper_usd", "80% interval to"),
    ]
    return charts.spec(
        {"forecast_bars": bars, "forecast": frame},
        {
            "layer": [
                {
                    "data": {"name": "forecast_bars"},
                    "mark": {"type": "bar", "width": {"band": 0.6}},
                    "encoding": {
                        "x": x,
                        "y": {
                            "field": "usd",
                            "type": "quantitative",
                            "stack": None,
                            "title": "USD",
                            "axis": charts.USD_AXIS,
                        },
                        "color": {
                            "field": "measure",
                            "type": "nominal",
                            "title": None,
                            "scale": {"domain": list(FORECAST_MEASURES.values()), "range": ["#1f4e79", "#9ecae9"]},
                            "sort": list(FORECAST_MEASURES.values()),
                        },
                        "order": {"field": "measure", "sort": "descending"},
                        "tooltip": [
                            {"field": "label", "title": "Month"},
                            {"field": "measure", "title": "Figure"},
                            charts.usd_tooltip("usd", "USD"),
                        ],
                    },
                },
                {
                    "data": {"name": "forecast"},
                    "mark": {"type": "rule", "color": "black"},
                    "encoding": {
                        "x": x,
                        "y": {"field": "lower_usd", "type": "quantitative", "title": "USD"},
                        "y2": {"field": "upper_usd"},
                        "tooltip": interval_tooltip,
                    },
                },
                *(
                    {
                        "data": {"name": "forecast"},
                        "mark": {"type": "tick", "color": "black", "size": 24, "thickness": 1.5},
                        "encoding": {"x": x, "y": {"field": edge, "type": "quantitative"}, "tooltip": interval_tooltip},
                    }
                    for edge in ("lower_usd", "upper_usd")
                ),
            ]
        },
        title,
    )


def grouped_bars(
    frame: pl.DataFrame,
    *,
    category: str,
    group: str,
    value: str,
    category_title: str,
    group_title: str,
    value_title: str,
    title: str | None = None,
) -> Spec:
    """Horizontal bars of a money figure per category, one bar per group side by side (on-prem vs cloud)."""
    return charts.spec(
        {"bars": frame},
        {
            "data": {"name": "bars"},
            "mark": {"type": "bar"},
            "encoding": {
                "y": {"field": category, "type": "nominal", "title": None, "axis": {"labelLimit": charts.LABEL_LIMIT}},
                "yOffset": {"field": group, "type": "nominal"},
                "x": {"field": value, "type": "quantitative", "title": value_title, "axis": {"format": "$,.2f"}},
                "color": {"field": group, "type": "nominal", "title": group_title},
                "tooltip": [
                    {"field": category, "title": category_title},
                    {"field": group, "title": group_title},
                    charts.usd_tooltip(value, value_title),
                ],
            },
        },
        title,
    )
