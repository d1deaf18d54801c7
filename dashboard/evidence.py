"""A recommendation's detail: current vs proposed, its evidence, and the charts that back it.

Rendered generically from the ``current`` / ``proposed`` / ``evidence`` JSON, so a new kind of
recommendation shows without a code change. Charts where the data allows: the resource's
utilisation and memory against the proposed GPU's capacity, spot price history for its instance
type, and any series (a list of points) a model put in its evidence.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import charts, gpu_charts, labels, price_charts
from gpufinops.dashboard.common import cached_query, money

ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|\+00:00)$")
TIME_KEYS = ("ts", "hour", "day", "date", "month", "time", "timestamp")
LABEL_KEYS = ("option", "name", "label", "gpu", "instance_type", "region", "resource_id")


def parse(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


def _number(value: float) -> str:
    """A figure a reader scans: thousands separators, at most two decimals, no float noise."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


UNIT_SUFFIXES = (("_gib", " GiB"), ("_days", " days"), ("_hours", " h"), ("_min", " min"))


def _number_text(key: str, value: float) -> str:
    """A figure as text, by what its key says it is: money, percent, a fraction, a unit, or plain."""
    if "usd" in key or "cost" in key:
        return money(value) if abs(value) >= 0.01 or value == 0 else f"${value:.4f}"
    if labels._is_percent_points(key) or key.endswith("_pct"):
        return f"{_number(value)}%"
    if _is_fraction_key(key) and 0 <= value <= 1:
        return f"{value:.2%}" if 0 < value < 0.01 else f"{value:.1%}".replace(".0%", "%")
    if key == "hours":
        return f"{_number(value)} h"
    unit = next((unit for suffix, unit in UNIT_SUFFIXES if key.endswith(suffix)), "")
    return _number(value) + unit


def _text(key: str, value: Any) -> str:
    """One current / proposed / evidence value as text: money, percent, GiB, hours, or a plain figure."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number_text(key, value)
    if isinstance(value, list):
        return ", ".join(_text(key, v) for v in value[:12]) + (" …" if len(value) > 12 else "")
    if isinstance(value, dict):
        return "; ".join(f"{labels.label(k)} {_text(k, v)}" for k, v in list(value.items())[:8])[:300]
    if isinstance(value, str) and ISO_TIME.match(value):  # 2026-09-02T00:00:00Z -> 2026-09-02 00:00 UTC
        return value[:10] + " " + value[11:16] + " UTC"
    return str(labels.value_label(key, value))  # a code (pricing, pattern, …) by its label


FRACTION_WORDS = ("fraction", "share", "coverage", "ratio", "overhead", "confidence")
FRACTION_KEYS = {"break_even_utilisation", "hours_at_or_above_baseline"}


def _is_fraction_key(key: str) -> bool:
    """Evidence figures stored as 0–1 (shown as percent); utilisation ``_pct`` / ``util_`` are 0–100."""
    return key in FRACTION_KEYS or any(word in key for word in FRACTION_WORDS)


def comparison(current: dict[str, Any], proposed: dict[str, Any]) -> pl.DataFrame:
    keys = [k for k in dict.fromkeys([*current, *proposed]) if k != "action"]
    return pl.DataFrame(
        {
            "": [labels.label(k) for k in keys],
            "current": [_text(k, current.get(k)) for k in keys],
            "proposed": [_text(k, proposed.get(k)) if k in proposed else "(unchanged)" for k in keys],
        },
        schema={"": pl.Utf8, "current": pl.Utf8, "proposed": pl.Utf8},
    )


def scalar_evidence(evidence: dict[str, Any]) -> pl.DataFrame:
    rows = [(labels.label(k), _text(k, v)) for k, v in evidence.items() if not _is_series(v)]
    return pl.DataFrame(rows, schema={"evidence": pl.Utf8, "value": pl.Utf8}, orient="row")


def _is_series(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 1 and all(isinstance(v, (dict, int, float)) for v in value)


def _element(name: str) -> str:
    """What one entry of a per-item list is: ``per_gpu_util_p95`` → ``GPU``."""
    words = name.split("_")
    return labels.ACRONYMS.get(words[1], words[1]) if words[0] == "per" and len(words) > 1 else "#"


# A figure in the evidence that a series is read against: (series, column) -> (evidence key, label).
REFERENCES = {
    ("per_gpu_util_p95", "value"): ("spare_gpu_util_pct", "a GPU under this is spare"),
    ("options", "usd_per_gpu_hour"): ("onprem_cost_per_used_gpu_hour_usd", "on-prem, per used GPU-hour"),
    ("options", "usd_per_onprem_gpu_hour"): ("onprem_cost_per_gpu_hour_usd", "on-prem, per GPU-hour"),
}


def _reference(evidence: dict[str, Any], name: str, column: str) -> dict[str, Any]:
    key, label = REFERENCES.get((name, column), (None, None))
    value = evidence.get(key) if key else None
    return {"reference": charts.Reference(float(value), label or "")} if isinstance(value, (int, float)) else {}


def evidence_charts(name: str, value: list, evidence: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Charts for one list in the evidence: a per-item list of numbers (``per_gpu_util_p95``) is bars per
    item (GPU 0, GPU 1, …); a list of records with a time is a line over time; records without one
    (on-prem ``options``) are bars per record, labelled by their name."""
    title = labels.label(name)
    if all(isinstance(v, (int, float)) for v in value):
        item = _element(name)
        frame = pl.DataFrame({"item": [f"{item} {i}" for i in range(len(value))], "value": [float(v) for v in value]})
        figure = labels.label(name.split("_", 2)[2]) if name.startswith("per_") and name.count("_") >= 2 else title
        return [
            charts.category_bars(
                frame,
                category="item",
                value="value",
                category_title=item,
                value_title=figure + (" (%)" if labels._is_percent_points(name) else ""),
                value_format=",.1f",
                title=title,
                **_reference(evidence or {}, name, "value"),
            )
        ]
    try:
        frame = pl.DataFrame([v for v in value if isinstance(v, dict)], infer_schema_length=None)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        return []
    time_key = next((k for k in TIME_KEYS if k in frame.columns), None)
    numeric = [c for c, t in frame.schema.items() if t.is_numeric() and c != time_key][:2]
    if time_key is not None:
        frame = frame.with_columns(pl.col(time_key).cast(pl.Utf8).str.to_datetime(strict=False, time_zone="UTC"))
        return [
            charts.time_line(frame, x=time_key, y=y, y_title=labels.label(y), title=f"{title}: {labels.label(y)}")
            for y in numeric
        ]
    category = next((k for k in LABEL_KEYS if k in frame.columns), None)
    if category is None:
        frame = frame.with_row_index("item").with_columns((pl.col("item") + 1).cast(pl.Utf8))
        category = "item"
    return [
        charts.category_bars(
            frame,
            category=category,
            value=y,
            category_title=labels.label(category),
            value_title=labels.label(y),
            title=f"{title}: {labels.label(y)}",
            **_reference(evidence or {}, name, y),
        )
        for y in numeric
    ]


def _capacities(
    con: duckdb.DuckDBPyConnection, current: dict[str, Any], proposed: dict[str, Any], measured_gib: float | None
) -> pl.DataFrame:
    models = {label: side.get("gpu_model") for label, side in (("current", current), ("proposed", proposed))}
    specs = cached_query(con, "gpu_memory_gib", gpu_models=[m for m in models.values() if m])
    memory = dict(zip(specs["gpu_model"].to_list(), specs["memory_gib"].to_list()))
    rows = [(f"{label}: {model}", memory[model]) for label, model in models.items() if model in memory]
    if not rows and measured_gib:
        rows = [("current (measured)", measured_gib)]
    return pl.DataFrame(rows, schema={"label": pl.Utf8, "memory_gib": pl.Float64}, orient="row")


def render(con: duckdb.DuckDBPyConnection, rec: dict[str, Any]) -> None:
    current, proposed, evidence = parse(rec["current"]), parse(rec["proposed"]), parse(rec["evidence"])
    if proposed.get("action"):
        st.markdown(f"**Action:** {proposed['action']}")
    left, right = st.columns(2)
    # static tables: a few rows of text each, drawn as HTML (an interactive grid costs the browser more)
    left.markdown("**Current → proposed**")
    left.table(
        comparison(current, proposed).rename({"": " ", "current": "Current", "proposed": "Proposed"}), hide_index=True
    )
    right.markdown("**Evidence**")
    right.table(scalar_evidence(evidence).rename({"evidence": "Evidence", "value": "Value"}), hide_index=True)
    if rec.get("resource_id"):
        util = cached_query(con, "resource_utilisation", resource_id=rec["resource_id"])  # one scan per data version
        if not util.is_empty():
            shown, hours = downsample(util)
            per = "per hour" if hours == 1 else f"per {hours} hours"
            left, right = st.columns(2)
            charts.draw(left, gpu_charts.utilisation(shown, title=f"GPU utilisation {per}"))
            # mem_total_gib is a DOUBLE column: its max is a float, or None when every row is NULL
            caps = _capacities(con, current, proposed, cast(float | None, util["mem_total_gib"].max()))
            charts.draw(right, gpu_charts.memory(shown, caps, title=f"Peak memory per GPU vs capacity, {per}"))
    instance_type = current.get("instance_type") or evidence.get("instance_type")
    if instance_type and rec.get("provider"):
        prices = cached_query(con, "spot_price_history", provider=rec["provider"], instance_type=instance_type)
        if not prices.is_empty():
            view = spot_view(prices)
            charts.draw(
                st, price_charts.spot_prices(view, until=spot_until(view), title=f"Spot price history: {instance_type}")
            )
    for name, value in evidence.items():
        if _is_series(value):
            for chart in evidence_charts(name, value, evidence)[:3]:
                charts.draw(st, chart)


MAX_POINTS = 480  # a chart column is ~600 px wide: more points than this are drawn on top of each other


def downsample(util: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Hourly utilisation in buckets of whole hours, at most MAX_POINTS of them: the mean of the means,
    the peak of the peaks (an idle night or a spike survives). Returns the frame and the bucket size."""
    hours = max(1, -(-util.height // MAX_POINTS))
    if hours == 1:
        return util, 1
    return util.sort("hour").group_by_dynamic("hour", every=f"{hours}h").agg(
        pl.col("util_mean").mean(),
        pl.col("util_max").max(),
        pl.col("mem_used_max_gib").max(),
        pl.col("mem_total_gib").max(),
    ), hours


def spot_view(prices: pl.DataFrame) -> pl.DataFrame:
    """Spot price rows as the chart reads them: floats, one series per zone (or region)."""
    return prices.with_columns(
        pl.col("price_usd").cast(pl.Float64),
        pl.col("on_demand_usd").cast(pl.Float64),
        pl.when(pl.col("zone").is_null() | (pl.col("zone") == pl.col("region")))
        .then(pl.col("region"))
        .otherwise(pl.col("zone"))
        .alias("series"),
    )


def spot_until(view: pl.DataFrame) -> datetime:
    """Where a price series' last step ends: now (a price holds until it changes), at least a day
    after the last change."""
    last = cast(datetime, view["ts"].max())  # ts is a TIMESTAMPTZ column of a non-empty frame
    return max(datetime.now(UTC), last + timedelta(days=1))
