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
from gpufinops.kernel.labels import NO_TEAM, labels_of, team_label
from gpufinops.kernel.labels import label as code_label
from gpufinops.warehouse import inputs

MISSING = "—"
ISO_TEXT = r"\b(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(?::\d\d(?:\.\d+)?)?(?:Z|[+-]00:?00)?"

LABELS = {
    "team": "Team",
    "provider": "Provider",
    "service": "Service",
    "region": "Region",
    "zone": "Zone",
    "source": "Source",
    "source_type": "Type",
    "kind": "Kind",
    "status": "Status",
    "risk": "Risk",
    "id": "ID",
    "resource_id": "Resource ID",
    "resource": "Resource",
    "workload": "Workload",
    "action": "Action",
    "change": "Change",
    "pattern": "Pattern",
    "confidence": "Confidence",
    "confidence_raw": "Confidence before calibration",
    "model_version": "Model version",
    "created_at": "Found at",
    "monthly_savings_usd": "Savings per month",
    "gpu_model": "GPU model",
    "gpu_hours": "GPU-hours",
    "util_mean": "Mean utilisation",
    "util_p95": "p95 utilisation",
    "util_max": "Peak utilisation",
    "idle_resource_hours": "Idle resource-hours",
    "idle_gpu_hours": "Idle GPU-hours",
    "idle_cost": "Idle cost",
    "gpu_cost": "GPU cost",
    "effective_cost": "Spend",
    "billed_cost": "Billed",
    "attributed_gpu_hours": "Attributed GPU-hours",
    "unattributed_gpu_hours": "Unattributed GPU-hours",
    "team_gpu_hours": "GPU-hours with a team",
    "unattributed_share": "Unattributed share",
    "host": "Host",
    "hosts": "Hosts",
    "first_hour": "First hour",
    "last_hour": "Last hour",
    "stale": "Stale",
    "last_status": "Last status",
    "hours_since_success": "Hours since success",
    "last_success_at": "Last success",
    "last_started_at": "Last run",
    "last_rows": "Rows (last run)",
    "watermark": "Watermark",
    "last_error": "Last error",
    "job": "Job",
    "started_at": "Started",
    "finished_at": "Finished",
    "error": "Error",
    "day": "Day",
    "cost_usd": "Cost",
    "expected_usd": "Expected",
    "lower_usd": "Expected from",
    "upper_usd": "Expected to",
    "direction": "Direction",
    "top_line_items": "Line items that moved",
    "ts": "From (UTC)",
    "price_usd": "Spot per hour",
    "on_demand_usd": "On-demand per hour",
    "instance_type": "Instance type",
    "band_label": "Interrupted per month",
    "band_index": "Band",
    "savings_pct": "Spot saving",
    "decision": "Decision",
    "reason": "Reason",
    "actor": "By",
    "decided_at": "Decided at",
    "rows": "Rows",
    "runs": "Runs",
    "expected_range": "Expected range",
    "severity": "Severity",
    "rule": "Rule",
    "period": "Period",
    "opened_at": "Opened",
    "newest_data_at": "Newest data",
    "message": "Freshness",
    "failing": "Failing",
    "missing": "Missing",
    # evidence and current / proposed keys
    "util_threshold_pct": "Idle threshold",
    "mem_max_gib": "Peak memory",
    "window_days": "Window",
    "lookback_days": "Look-back",
    "billed_hours": "Billed hours",
    "measured_hours": "Measured hours",
    "idle_hours": "Idle hours",
    "idle_fraction": "Idle share of hours",
    "metric_coverage": "Metric coverage",
    "idle_cost_usd": "Idle cost in the window",
    "off_hours_share_of_idle": "Idle time off hours",
    "gpu_count": "GPU count",
    "pricing": "Pricing",
    "monthly_cost_usd": "Cost per month",
    "state": "State",
    "precision": "Precision",
    "busy_gpus": "Busy GPUs",
    "spare_gpus": "Spare GPUs",
    "busy_util_p95": "p95 utilisation of the busy GPUs",
    "spare_util_p95_max": "Highest p95 of a spare GPU",
    "per_gpu_util_p95": "p95 utilisation per GPU",
    "cost_per_gpu_month_usd": "Cost per GPU-month",
    "spare_gpu_util_pct": "Spare below",
    "mem_needed_gib": "Memory needed",
    "target_usable_memory_gib": "Target's usable memory",
    "predicted_target_util_p95": "Predicted p95 on the target",
    "baseline_target_util_p95": "Spec-ratio estimate of p95",
    "current_usd_per_hour": "Current per hour",
    "target_usd_per_hour": "Target per hour",
    "options": "Cloud options",
    "usd_per_gpu_hour": "USD per GPU-hour",
    "usd_per_onprem_gpu_hour": "USD per on-prem GPU-hour",
    "option": "Option",
    "util_mean_pct": "Mean utilisation",
    "onprem_option": "On-prem option",
    "break_even_utilisation_pct": "Break-even utilisation",
    "gpu_cost_usd": "GPU cost",
    "usd_per_1m_input_tokens": "$ per 1M input tokens",
    "usd_per_1m_output_tokens": "$ per 1M output tokens",
    "usd_per_1k_requests": "$ per 1,000 requests",
    "kwh": "kWh",
    "kg_co2e": "kg CO₂e",
    # energy and emissions (warehouse/queries/carbon.py): units as written, never "Kg co2e" or "GPU kwh"
    "gpu_kwh": "GPU energy (kWh)",
    "node_kwh": "Node energy (kWh)",
    "kg_co2e_per_gpu_hour": "kg CO₂e per GPU-hour",
    "embodied_kg_co2e": "Embodied kg CO₂e",
    "withheld_gpu_hours": "GPU-hours without a power reading",
    "withheld_resources": "Resources without a power reading",
    "withheld_days": "Days without a power reading",
    "period_label": "Period",
    "emissions_coverage": "Emissions coverage",
    "cost_basis": "Costed by",
    # shared-GPU allocation (warehouse/allocation_queries.py)
    "namespace": "Namespace",
    "basis": "Allocated by",
    "resources": "Resources",
    "methods": "Methods",
    "unallocated_cost": "Unallocated cost",
    "unallocated_gpu_hours": "Unallocated GPU-hours",
    "node_gpu_cost": "Node's GPU cost",
}
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
