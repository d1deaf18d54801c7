"""GPU charts: the utilisation matrix (team × GPU model), one resource's utilisation per hour, and its
memory against the GPUs' capacity. Built on ``dashboard/charts.py``."""

from __future__ import annotations

import polars as pl

from gpufinops.dashboard import charts
from gpufinops.dashboard.charts import Spec


def heatmap(
    frame: pl.DataFrame,
    *,
    x: str,
    y: str,
    value: str,
    x_title: str,
    y_title: str,
    value_title: str,
    title: str | None = None,
) -> Spec:
    """A utilisation matrix (team × GPU model), the figure in each cell."""
    encoding = {
        "x": {"field": x, "type": "nominal", "title": x_title, "axis": {"labelAngle": 0}},
        "y": {"field": y, "type": "nominal", "title": y_title},
    }
    tooltip = [
        {"field": y, "title": y_title},
        {"field": x, "title": x_title},
        {"field": value, "type": "quantitative", "format": ".1f", "title": value_title},
    ]
    if "util_p95" in frame.columns:
        tooltip.append({"field": "util_p95", "type": "quantitative", "format": ".1f", "title": "p95 utilisation %"})
    if "gpu_hours" in frame.columns:
        tooltip.append({"field": "gpu_hours", "type": "quantitative", "format": ",.0f", "title": "GPU-hours"})
    return charts.spec(
        {"cells": frame},
        {
            "data": {"name": "cells"},
            "encoding": encoding,
            "layer": [
                {
                    "mark": "rect",
                    "encoding": {
                        "color": {
                            "field": value,
                            "type": "quantitative",
                            "title": value_title,
                            "scale": {"scheme": "redyellowgreen", "domain": [0, 100]},
                        },
                        "tooltip": tooltip,
                    },
                },
                {
                    "mark": {"type": "text", "baseline": "middle"},
                    "encoding": {"text": {"field": value, "type": "quantitative", "format": ".0f"}},
                },
            ],
        },
        title,
    )


def utilisation_heatmap(frame: pl.DataFrame, title: str) -> Spec:
    """Mean GPU utilisation per team and GPU model: the fleet's and a team's page."""
    return heatmap(
        frame,
        x="gpu_model",
        y="team",
        value="util_mean",
        x_title="GPU model",
        y_title="Team",
        value_title="Mean utilisation %",
        title=title,
    )


def utilisation(frame: pl.DataFrame, title: str | None = None) -> Spec:
    """Mean and peak GPU utilisation (%) of one resource per hour."""
    long = (
        frame.select("hour", "util_mean", "util_max")
        .unpivot(index="hour", variable_name="measure", value_name="percent")
        .with_columns(pl.col("measure").replace_strict({"util_mean": "Mean", "util_max": "Peak"}))
    )
    return charts.spec(
        {"utilisation": charts.with_time_label(long, "hour", charts.HOUR_FORMAT)},
        {
            "data": {"name": "utilisation"},
            "mark": {"type": "line"},
            "encoding": {
                "x": charts.time_x("hour"),
                "y": {
                    "field": "percent",
                    "type": "quantitative",
                    "title": "GPU utilisation (%)",
                    "scale": {"domain": [0, 100]},
                },
                "color": {"field": "measure", "type": "nominal", "title": "Utilisation"},
                "tooltip": [
                    charts.label_tooltip("hour", "Hour (UTC)"),
                    {"field": "measure", "title": "Measure"},
                    {"field": "percent", "type": "quantitative", "format": ".1f", "title": "Utilisation %"},
                ],
            },
        },
        title,
    )


def memory(frame: pl.DataFrame, capacities: pl.DataFrame, title: str | None = None) -> Spec:
    """Peak GPU memory used per hour, against the current and proposed GPUs' capacity (dashed)."""
    line = {
        "data": {"name": "memory"},
        "mark": {"type": "line"},
        "encoding": {
            "x": charts.time_x("hour"),
            "y": {"field": "mem_used_max_gib", "type": "quantitative", "title": "Memory per GPU (GiB)"},
            "tooltip": [
                charts.label_tooltip("hour", "Hour (UTC)"),
                {"field": "mem_used_max_gib", "type": "quantitative", "format": ".2f", "title": "Peak used (GiB)"},
            ],
        },
    }
    layers = [line]
    datasets = {"memory": charts.with_time_label(frame.select("hour", "mem_used_max_gib"), "hour", charts.HOUR_FORMAT)}
    if not capacities.is_empty():
        datasets["capacity"] = capacities
        layers.append(
            {
                "data": {"name": "capacity"},
                "mark": {"type": "rule", "strokeDash": [6, 3]},
                "encoding": {
                    "y": {"field": "memory_gib", "type": "quantitative"},
                    "color": {"field": "label", "type": "nominal", "title": "GPU capacity"},
                    "tooltip": [
                        {"field": "label", "title": "GPU"},
                        {"field": "memory_gib", "type": "quantitative", "format": ".0f", "title": "Capacity (GiB)"},
                    ],
                },
            }
        )
    return charts.spec(datasets, {"layer": layers}, title)
