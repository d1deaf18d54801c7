"""Price charts: spot prices as steps over time against on-demand, and the spot saving against how often
AWS interrupts. Built on ``dashboard/charts.py``."""

from __future__ import annotations

from typing import Any

import polars as pl

from gpufinops.dashboard import charts
from gpufinops.dashboard.charts import Spec


def spot_prices(frame: pl.DataFrame, until: Any, title: str | None = None) -> Spec:
    """Spot price per zone / region as steps over time (a price holds until the next change, so each
    series runs on to ``until``), the on-demand price of the same type as a dashed rule."""
    points = frame.select("ts", "series", "price_usd")
    tails = (
        points.sort("ts")
        .group_by("series", maintain_order=True)
        .last()
        .filter(pl.col("ts") < until)
        .with_columns(pl.lit(until).cast(points.schema["ts"]).alias("ts"))
    )
    steps = charts.with_time_label(
        pl.concat([points, tails.select(points.columns)]).sort("series", "ts"), "ts", charts.MINUTE_FORMAT
    )
    points = charts.with_time_label(points, "ts", charts.MINUTE_FORMAT)
    layers = [
        {
            "data": {"name": "spot"},
            "mark": {"type": "line", "interpolate": "step-after"},
            "encoding": {
                "x": charts.time_x("ts"),
                "y": {
                    "field": "price_usd",
                    "type": "quantitative",
                    "title": "USD per hour",
                    "axis": {"format": "$,.2f"},
                },
                "color": {"field": "series", "type": "nominal", "title": "Spot (zone / region)"},
                "tooltip": [
                    charts.label_tooltip("ts", "From (UTC)"),
                    {"field": "series", "title": "Zone / region"},
                    charts.usd_tooltip("price_usd", "Spot per hour"),
                ],
            },
        },
        {
            "data": {"name": "spot_changes"},
            "mark": {"type": "point", "filled": True},
            "encoding": {
                "x": charts.time_x("ts"),
                "y": {"field": "price_usd", "type": "quantitative"},
                "color": {"field": "series", "type": "nominal", "title": "Spot (zone / region)"},
                "tooltip": [
                    charts.label_tooltip("ts", "From (UTC)"),
                    {"field": "series", "title": "Zone / region"},
                    charts.usd_tooltip("price_usd", "Spot per hour"),
                ],
            },
        },
    ]
    datasets = {"spot": steps, "spot_changes": points}
    on_demand = (
        frame.filter(pl.col("on_demand_usd").is_not_null()) if "on_demand_usd" in frame.columns else frame.clear()
    )
    if not on_demand.is_empty():
        datasets["on_demand"] = on_demand.group_by("region").agg(pl.col("on_demand_usd").max())
        layers.append(
            {
                "data": {"name": "on_demand"},
                "mark": {"type": "rule", "strokeDash": [6, 3], "color": "black"},
                "encoding": {
                    "y": {"field": "on_demand_usd", "type": "quantitative"},
                    "tooltip": [
                        {"field": "region", "title": "Region"},
                        charts.usd_tooltip("on_demand_usd", "On-demand per hour"),
                    ],
                },
            }
        )
    return charts.spec(datasets, {"layer": layers}, title)


def interruption_bands(frame: pl.DataFrame) -> Spec:
    """Spot saving per instance type and region (each bar labelled with both), coloured by how often
    AWS reclaims spot instances of that type there."""
    bars = frame.with_columns((pl.col("instance_type") + " · " + pl.col("region")).alias("type_region"))
    return charts.spec(
        {"bands": bars},
        {
            "data": {"name": "bands"},
            "mark": {"type": "bar"},
            "encoding": {
                "x": {"field": "savings_pct", "type": "quantitative", "title": "Spot saving over on-demand (%)"},
                "y": {
                    "field": "type_region",
                    "type": "nominal",
                    "title": None,
                    "sort": "-x",
                    "axis": {"labelLimit": charts.LABEL_LIMIT},
                },
                "color": {
                    "field": "band_label",
                    "type": "nominal",
                    "title": "Interrupted per month",
                    "sort": {"field": "band_index", "order": "ascending"},
                    "scale": {"scheme": "orangered"},
                },
                "tooltip": [
                    {"field": "instance_type", "title": "Instance type"},
                    {"field": "region", "title": "Region"},
                    {"field": "band_label", "title": "Interrupted per month"},
                    {"field": "savings_pct", "type": "quantitative", "title": "Saving %"},
                ],
            },
        },
        "Spot saving vs interruption frequency",
    )
