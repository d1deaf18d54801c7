"""The pages' charts as Vega-Lite specs (plain dicts, drawn by ``st.vega_lite_chart``): the building
blocks every chart shares (a spec over named frames, formats, tooltips, the UTC time axis) and the two
charts of any one figure (bars per category, a line over time). The chart families are beside it:
``spend_charts`` (money over time and per category), ``gpu_charts`` (utilisation and memory) and
``price_charts`` (spot prices and interruption).

Inputs are polars frames whose money columns are already floats. Every title, axis and legend is a
label a reader understands; bars are for categories, lines only over time (in UTC: a day is never
shifted by the browser's time zone, and never shows ``00:00:00``). The specs are written directly
rather than through Altair: Altair's import and its JSON-schema validation of every chart were a
third of a cold page's server time (docs/dashboard.md, *Page loads*, has the profile).
"""

from __future__ import annotations

from dataclasses import dataclass
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


def usd_tooltip(field: str, title: str) -> Spec:
    return {"field": field, "type": "quantitative", "format": USD_FORMAT, "title": title}


def time_x(field: str) -> Spec:
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


def label_tooltip(field: str, title: str) -> Spec:
    return {"field": f"{field}_label", "type": "nominal", "title": title}


@dataclass(frozen=True)
class Reference:
    """A dashed reference line on a bar chart: the figure, and what it is (a threshold, a cost to beat)."""

    value: float
    title: str = ""


def category_bars(
    frame: pl.DataFrame,
    *,
    category: str,
    value: str,
    category_title: str,
    value_title: str,
    value_format: str = ",.2f",
    title: str | None = None,
    reference: Reference | None = None,
) -> Spec:
    """Bars of one figure per category (a GPU, an option), in the frame's order; horizontal when the
    names are long (they stay readable); an optional dashed reference line (the threshold a GPU must
    stay under, the on-prem cost to beat)."""
    order = [str(v) for v in frame[category].to_list()]
    horizontal = max((len(v) for v in order), default=0) > 12
    cat = {
        "field": category,
        "type": "nominal",
        "title": None if horizontal else category_title,
        "sort": order,
        "axis": {"labelAngle": 0, "labelLimit": LABEL_LIMIT},
    }
    val = {"field": value, "type": "quantitative", "title": value_title}
    tooltip = [
        {"field": category, "title": category_title},
        {"field": value, "type": "quantitative", "format": value_format, "title": value_title},
    ]
    layers = [
        {
            "data": {"name": "bars"},
            "mark": {"type": "bar"},
            "encoding": {"x": val, "y": cat, "tooltip": tooltip}
            if horizontal
            else {"x": cat, "y": val, "tooltip": tooltip},
        }
    ]
    datasets = {"bars": frame.with_columns(pl.col(category).cast(pl.Utf8))}
    if reference is not None:
        datasets["reference"] = pl.DataFrame({"reference": [reference.value], "label": [reference.title]})
        layers.append(
            {
                "data": {"name": "reference"},
                "mark": {"type": "rule", "strokeDash": [6, 3], "color": "black"},
                "encoding": {
                    ("x" if horizontal else "y"): {"field": "reference", "type": "quantitative"},
                    "tooltip": [
                        {"field": "label", "title": "Reference"},
                        {"field": "reference", "type": "quantitative", "format": value_format, "title": value_title},
                    ],
                },
            }
        )
    return spec(datasets, {"layer": layers}, title)


def time_line(frame: pl.DataFrame, *, x: str, y: str, y_title: str, title: str | None = None) -> Spec:
    """One figure over time (an evidence series with timestamps)."""
    return spec(
        {"series": with_time_label(frame, x, MINUTE_FORMAT)},
        {
            "data": {"name": "series"},
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": time_x(x),
                "y": {"field": y, "type": "quantitative", "title": y_title},
                "tooltip": [
                    label_tooltip(x, "When (UTC)"),
                    {"field": y, "type": "quantitative", "format": ",.2f", "title": y_title},
                ],
            },
        },
        title,
    )
