"""A recommendation's detail: current vs proposed, its evidence, and the charts that back it.

Rendered generically from the ``current`` / ``proposed`` / ``evidence`` JSON, so a new kind of
recommendation shows without a code change. Charts where the data allows: the resource's
utilisation and memory against the proposed GPU's capacity, spot price history for its instance
type, and any series (a list of points) a model put in its evidence.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl
import streamlit as st

from dashboard import charts
from dashboard.common import money
from warehouse import queries

TIME_KEYS = ("ts", "hour", "day", "date", "month", "time", "timestamp")


def parse(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


def _text(key: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and ("usd" in key or "cost" in key):
        return money(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)[:200]
    return "" if value is None else str(value)


def comparison(current: dict[str, Any], proposed: dict[str, Any]) -> pl.DataFrame:
    keys = list(dict.fromkeys([*current, *proposed]))
    return pl.DataFrame({"": keys, "current": [_text(k, current.get(k)) for k in keys],
                         "proposed": [_text(k, proposed.get(k)) for k in keys]}, schema={
        "": pl.Utf8, "current": pl.Utf8, "proposed": pl.Utf8})


def scalar_evidence(evidence: dict[str, Any]) -> pl.DataFrame:
    rows = [(k, _text(k, v)) for k, v in evidence.items() if not _is_series(v)]
    return pl.DataFrame(rows, schema={"evidence": pl.Utf8, "value": pl.Utf8}, orient="row")


def _is_series(value: Any) -> bool:
    return isinstance(value, list) and len(value) > 1 and all(isinstance(v, (dict, int, float)) for v in value)


def series_frames(evidence: dict[str, Any]) -> list[tuple[str, pl.DataFrame, str, list[str], bool]]:
    """(name, frame, x, numeric y columns, x is time) for each list-of-points in the evidence."""
    out = []
    for name, value in evidence.items():
        if not _is_series(value):
            continue
        if all(isinstance(v, (int, float)) for v in value):
            out.append((name, pl.DataFrame({"index": list(range(len(value))), name: value}), "index", [name], False))
            continue
        try:
            frame = pl.DataFrame([v for v in value if isinstance(v, dict)], infer_schema_length=None)
        except (TypeError, ValueError, pl.exceptions.PolarsError):
            continue
        x = next((k for k in TIME_KEYS if k in frame.columns), None)
        numeric = [c for c, t in frame.schema.items() if t.is_numeric() and c != x]
        if not numeric:
            continue
        temporal = x is not None
        if temporal:
            frame = frame.with_columns(pl.col(x).cast(pl.Utf8).str.to_datetime(strict=False, time_zone="UTC"))
        else:
            x = "index"
            frame = frame.with_row_index("index")
        out.append((name, frame, x, numeric, temporal))
    return out


def _capacities(con: duckdb.DuckDBPyConnection, current: dict[str, Any], proposed: dict[str, Any],
                measured_gib: float | None) -> pl.DataFrame:
    models = {label: side.get("gpu_model") for label, side in (("current", current), ("proposed", proposed))}
    specs = queries.gpu_memory_gib(con, [m for m in models.values() if m])
    memory = dict(zip(specs["gpu_model"].to_list(), specs["memory_gib"].to_list()))
    rows = [(f"{label}: {model}", memory[model]) for label, model in models.items() if model in memory]
    if not rows and measured_gib:
        rows = [("current (measured)", measured_gib)]
    return pl.DataFrame(rows, schema={"label": pl.Utf8, "memory_gib": pl.Float64}, orient="row")


def render(con: duckdb.DuckDBPyConnection, rec: dict[str, Any]) -> None:
    current, proposed, evidence = parse(rec["current"]), parse(rec["proposed"]), parse(rec["evidence"])
    left, right = st.columns(2)
    left.markdown("**Current → proposed**")
    left.dataframe(comparison(current, proposed), hide_index=True, width="stretch")
    right.markdown("**Evidence**")
    right.dataframe(scalar_evidence(evidence), hide_index=True, width="stretch")
    if rec.get("resource_id"):
        util = queries.resource_utilisation(con, rec["resource_id"])
        if not util.is_empty():
            left, right = st.columns(2)
            left.altair_chart(charts.utilisation(util, title="GPU utilisation over the window"),
                              width="stretch")
            caps = _capacities(con, current, proposed, util["mem_total_gib"].max())
            right.altair_chart(charts.memory(util, caps, title="Peak memory per GPU vs capacity"),
                               width="stretch")
    instance_type = current.get("instance_type") or evidence.get("instance_type")
    if instance_type and rec.get("provider"):
        prices = queries.spot_price_history(con, rec["provider"], instance_type)
        if not prices.is_empty():
            st.altair_chart(charts.spot_prices(_spot_view(prices), title=f"Spot price history: {instance_type}"),
                            width="stretch")
    for name, frame, x, ys, temporal in series_frames(evidence):
        for y in ys[:3]:
            st.altair_chart(charts.series(frame, x=x, y=y, title=f"{name}: {y}", temporal=temporal),
                            width="stretch")


def _spot_view(prices: pl.DataFrame) -> pl.DataFrame:
    return prices.with_columns(pl.col("price_usd").cast(pl.Float64), pl.col("on_demand_usd").cast(pl.Float64),
                               pl.coalesce("zone", "region").alias("series"))
