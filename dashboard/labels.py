"""Human labels and formats for the pages' tables: every column a reader sees has a name they
understand (``Idle cost``, not ``idle_cost``), money reads ``$1,234.57``, utilisation ``87.0%``, a
day ``2026-10-31`` (never ``00:00:00``), a time to the minute, and an unknown value is a dash.

The frame keeps its field names (tests, downloads read them); only the column config relabels and formats them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import polars as pl
import streamlit as st

from gpufinops.dashboard.arrow_frames import arrow_table
from gpufinops.dashboard.column_labels import LABELS as LABELS
from gpufinops.kernel.labels import NO_TEAM, labels_of, team_label
from gpufinops.kernel.labels import label as code_label
from gpufinops.warehouse import inputs

MISSING = "—"
ISO_TEXT = r"\b(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(?::\d\d(?:\.\d+)?)?(?:Z|[+-]00:?00)?"

ACRONYMS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "usd": "(USD)",
    "id": "ID",
    "gib": "GiB",
    "mib": "MiB",
    "pct": "%",
    "p95": "p95",
    "mae": "MAE",
    "sm": "SM",
    "cpu": "CPU",
    "od": "on-demand",
    "onprem": "on-prem",
    "tdp": "TDP",
    "util": "utilisation",
    "mem": "memory",
    "co2e": "CO₂e",
    "kwh": "kWh",
    "1m": "1M",
}
UNITS_FIRST = ("kg ", "kWh", "$")  # a label that starts with a unit keeps the unit's case


# the source types a coverage sentence names as what would complete a figure (warehouse/inputs.py)
_SOURCE_TYPES = re.compile(
    r"\b("
    + "|".join(sorted({t for i in inputs.INPUTS.values() for t in i.source_types}, key=len, reverse=True))
    + r")\b"
)


def config_words(sentence: str) -> str:
    """A coverage sentence (``warehouse/coverage.py``) as Markdown: each source type it names as a `code`
    span, shown as the reader types it in ``type = "..."``, not as a label (the CLI prints it plain)."""
    return _SOURCE_TYPES.sub(lambda m: f"`{m.group(1)}`", sentence)


def label(field: str) -> str:
    """A column's human name: the table above, else its words (``gpu_hours_x`` → ``GPU hours x``)."""
    if field in LABELS:
        return LABELS[field]
    parts = [w for w in field.split("_") if w]
    words = [
        "$" if w == "usd" and parts[i + 1 : i + 2] == ["per"] else ACRONYMS.get(w, w)  # usd_per_1m: "$ per 1M"
        for i, w in enumerate(parts)
    ]
    text = " ".join(words)
    if not text:
        return field
    return text if text.startswith(UNITS_FIRST) else text[:1].upper() + text[1:]  # "kg CO₂e …", never "Kg co2e"


def _is_money(field: str) -> bool:
    return (
        field.endswith("_usd")
        or field in ("idle_cost", "gpu_cost", "effective_cost", "billed_cost")
        or field.endswith("_cost")
    )


def _is_percent_points(field: str) -> bool:  # 0–100
    return field.startswith("util_") or field.endswith(("_pct", "_util")) or "_util_" in field


def _is_fraction(field: str) -> bool:  # 0–1
    return field.endswith("_share") or field in ("confidence", "confidence_raw", "metric_coverage")


def column(field: str, dtype: pl.DataType, *, dates: Iterable[str] = ()) -> Any:
    """Streamlit's column configuration for one field."""
    name = label(field)
    if field in dates or dtype == pl.Date:
        return st.column_config.DateColumn(name, format="YYYY-MM-DD")
    if dtype.is_temporal():
        return st.column_config.DatetimeColumn(name, format="YYYY-MM-DD HH:mm", timezone="UTC")
    if dtype == pl.Boolean:
        return st.column_config.CheckboxColumn(name)
    if dtype.is_numeric():
        if _is_money(field):
            return st.column_config.NumberColumn(name, format="dollar")
        if _is_percent_points(field):
            return st.column_config.NumberColumn(name, format="%.1f%%")
        if _is_fraction(field):
            return st.column_config.NumberColumn(name, format="percent")
        if dtype.is_integer():
            return st.column_config.NumberColumn(name, format="localized")
        return st.column_config.NumberColumn(name, format="%.2f")
    return st.column_config.TextColumn(name)


# Columns whose values are codes, and the table of kernel/labels.py that names them.
CODE_COLUMNS = {
    "kind": "kind",
    "pattern": "pattern",
    "status": "status",
    "last_status": "status",
    "rule": "rule",
    "severity": "severity",
    "workload": "workload",
    "plan": "plan",
    "pricing": "pricing",
    "state": "state",
    "reason": "reason",
    "basis": "basis",
    "role": "role",
    "provider": "provider",
    "direction": "direction",
}
TEAM_COLUMNS = ("team",)
# Columns that list several codes of one table, comma-separated (an allocation row's methods).
CODE_LIST_COLUMNS = {"methods": "method"}


def value_label(field: str, value: Any) -> Any:
    """A cell's value as people read it: a code column's codes by their labels, no team as NO_TEAM."""
    if field in TEAM_COLUMNS:
        return team_label(value)
    if field in CODE_COLUMNS and isinstance(value, str):
        return code_label(value, CODE_COLUMNS[field])
    return value


def _labeller(table: str) -> Callable[[str], str]:
    def one(value: str) -> str:
        return code_label(value, table)

    return one


def _list_labeller(table: str) -> Callable[[str], str]:
    def many(value: str) -> str:
        return labels_of(value, table)

    return many


def coded(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its code columns' values as labels and no team as NO_TEAM (charts' legends and
    tooltips read it; nothing else changes)."""
    exprs = []
    for name, dtype in frame.schema.items():
        if dtype == pl.Utf8 and name in TEAM_COLUMNS:
            exprs.append(pl.col(name).fill_null(NO_TEAM))
        elif dtype == pl.Utf8 and name in CODE_COLUMNS:
            exprs.append(pl.col(name).map_elements(_labeller(CODE_COLUMNS[name]), return_dtype=pl.Utf8))
        elif dtype == pl.Utf8 and name in CODE_LIST_COLUMNS:
            exprs.append(pl.col(name).map_elements(_list_labeller(CODE_LIST_COLUMNS[name]), return_dtype=pl.Utf8))
    return frame.with_columns(exprs) if exprs else frame


def view(frame: pl.DataFrame, *, dates: Iterable[str] = ()) -> pl.DataFrame:
    """The frame as shown: DECIMAL money as floats (display only), day columns as dates, code columns
    by their labels (kernel/labels.py), no team as NO_TEAM, missing text as a dash."""
    dates = set(dates)
    exprs = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Decimal):
            exprs.append(pl.col(name).cast(pl.Float64))
        elif name in dates and dtype.is_temporal():
            exprs.append(pl.col(name).cast(pl.Date))
        elif dtype == pl.Utf8 and name not in TEAM_COLUMNS:  # a time held as text (a watermark) reads as one
            exprs.append(pl.col(name).str.replace_all(ISO_TEXT, "$1 $2 UTC").fill_null(MISSING))
    return coded(frame.with_columns(exprs) if exprs else frame)


def config(frame: pl.DataFrame, *, dates: Iterable[str] = (), overrides: dict[str, Any] | None = None) -> dict:
    dates = tuple(dates)
    out = {name: column(name, dtype, dates=dates) for name, dtype in frame.schema.items()}
    out.update(overrides or {})
    return out


TABLE_WIDTH_PX = 700  # a table's width at a 1440 px window (the main column, sidebar open)
CHAR_PX, CELL_PADDING_PX, TEXT_COLUMN_MAX_PX = 7.2, 24, 320  # the grid's 14 px font; its cell padding; autosize cap


def _cell_text_chars(field: str, dtype: pl.DataType, value: Any) -> int:
    """How many characters the grid draws for ``value`` in the format ``column`` gives the field."""
    if value is None:
        return 1
    if dtype.is_temporal():
        return 16 if isinstance(value, datetime) else 10
    if dtype.is_numeric() and isinstance(value, (int, float)):
        if _is_money(field):
            return len(f"${value:,.2f}")
        if _is_percent_points(field) or _is_fraction(field):
            return len(f"{value * (100 if _is_fraction(field) else 1):.1f}%")
        return len(f"{value:,}") if isinstance(value, int) else len(f"{value:,.2f}")
    return len(str(value))


def column_px(frame: pl.DataFrame, field: str) -> float:
    """The width the grid gives ``field`` (its header or its widest cell, whichever is wider)."""
    dtype = frame.schema[field]
    widest = max((_cell_text_chars(field, dtype, v) for v in frame[field].head(200).to_list()), default=1)
    px = max(len(label(field)), widest) * CHAR_PX + CELL_PADDING_PX
    return min(px, TEXT_COLUMN_MAX_PX) if dtype == pl.Utf8 else px


def fitting(frame: pl.DataFrame, order: list[str], width_px: float = TABLE_WIDTH_PX) -> list[str]:
    """The leading columns of ``order`` that fit ``width_px`` whole (at least the first two): a column past
    the table's edge reads as cut."""
    kept: list[str] = []
    used = 0.0
    for field in order:
        used += column_px(frame, field)
        if used > width_px and len(kept) >= 2:
            break
        kept.append(field)
    return kept


def table(
    container: Any,
    frame: pl.DataFrame,
    *,
    dates: Iterable[str] = (),
    hide: Iterable[str] = (),
    overrides: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """``st.dataframe`` with human labels and formats for every column (``hide``: kept in the frame,
    not shown). The columns shown are those that fit the page's table width whole (``fitting``); the others
    stay in the table's column menu and its CSV download, and a caption names them."""
    shown = view(frame, dates=dates)
    hidden = set(hide)
    order = fitting(shown, [c for c in shown.columns if c not in hidden])
    more = [label(c) for c in shown.columns if c not in hidden and c not in order]
    if more:
        container.caption(f"More columns in the table's column menu (the eye icon): {', '.join(more)}.")
    return container.dataframe(
        arrow_table(shown),
        hide_index=True,
        width="stretch",
        column_order=order,
        column_config=config(shown, dates=dates, overrides=overrides),
        **kwargs,
    )
