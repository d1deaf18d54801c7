"""Cost anomalies on the Overview: each day a team's spend with a provider left its forecast interval, and
the line items that moved it, one row per item with its resource, service and change against its usual day
in columns of their own (a 1440 px window keeps the leading columns that fit whole: ``labels.fitting``), not
one long text cell past the table's edge."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.dashboard.common import money

SHOWN = ("day", "team", "provider", "direction", "cost_usd", "expected_usd", "expected_range")
# resource, service and the change first: what a reader opens the table for stays when the window is narrow
ITEMS = pl.Schema(
    {
        "resource": pl.Utf8(),
        "service": pl.Utf8(),
        "change_usd": pl.Float64(),  # its cost that day minus its usual day (its mean over the days before)
        "day": pl.Date(),
        "team": pl.Utf8(),
        "cost_usd": pl.Float64(),
        "usual_day_usd": pl.Float64(),
        "resource_id": pl.Utf8(),  # the whole id: in the column menu and the CSV download
    }
)
NO_RESOURCE, NO_SERVICE = "(no resource id)", "(no service)"
# A cloud's path-like ids (GCP's //compute.googleapis.com/projects/…/disks/name, Azure's /subscriptions/…/name)
# read by their name: the whole path would fill the table alone (it stays in the Resource ID column).
PATH_IDS = ("//", "/subscriptions/")


def render(anomalies: pl.DataFrame | None) -> None:
    st.subheader("Anomalies")
    if anomalies is None:
        st.info("forecast not available yet: anomaly detection comes with the forecast model.")
        return
    if anomalies.is_empty():
        st.success("No cost anomalies in the window.")
        return
    frame = anomalies.sort("day", descending=True).with_columns(
        pl.struct("lower_usd", "upper_usd")
        .map_elements(lambda band: f"{money(band['lower_usd'])} – {money(band['upper_usd'])}", return_dtype=pl.Utf8)
        .alias("expected_range"),
    )
    labels.table(st, frame.select([c for c in SHOWN if c in frame.columns]), dates=("day",))
    items = line_items(frame)
    st.markdown("**Line items that moved**")
    if items.is_empty():
        st.caption("No single line item moved by more than 1% of these anomalies' distance from their forecast.")
        return
    labels.table(st, items, dates=("day",))
    st.caption(
        "Change: the item's cost that day minus its usual day (its mean over the days before it; a day it was "
        "absent counts as no cost)."
    )


def line_items(anomalies: pl.DataFrame) -> pl.DataFrame:
    """One row per anomaly's line item (``top_line_items``, JSON), newest day first, largest change first."""
    rows = [
        _item_row(anomaly, item)
        for anomaly in anomalies.select("day", "team", "top_line_items").iter_rows(named=True)
        for item in _items(anomaly["top_line_items"])
    ]
    frame = pl.DataFrame(rows, schema=ITEMS)
    return frame.sort(["day", pl.col("change_usd").abs()], descending=True, nulls_last=True)


def _items(text: str | None) -> list[dict[str, Any]]:
    """The anomaly's line items; text that is not a JSON list of objects holds none."""
    try:
        items = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _item_row(anomaly: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    resource_id = _text(item.get("resource_id"))
    return {
        "resource": _resource_name(resource_id) if resource_id else NO_RESOURCE,
        "service": _text(item.get("service")) or NO_SERVICE,
        "change_usd": _number(item.get("delta_usd")),
        "day": anomaly["day"],
        "team": anomaly["team"],
        "cost_usd": _number(item.get("cost_usd")),
        "usual_day_usd": _number(item.get("baseline_usd")),
        "resource_id": resource_id or NO_RESOURCE,
    }


def _resource_name(resource_id: str) -> str:
    """A resource as its table names it: a cloud's path-like id by its last part, other ids whole."""
    if resource_id.lower().startswith(PATH_IDS) and resource_id.rstrip("/").count("/") > 2:
        return resource_id.rstrip("/").rsplit("/", 1)[-1]
    return resource_id


def _text(value: Any) -> str | None:
    """A text field on one line (no CR/LF inside a cell); None where it is missing or blank."""
    return (" ".join(str(value).split()) or None) if value is not None else None


def _number(value: Any) -> float | None:
    """A finite amount, else None (the grid shows a dash, never NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
