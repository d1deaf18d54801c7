"""Row checks for GPU metric samples, in the pass that parses them (see ``ingest/validate.py``).

A sample's time is plausible (not before 2000, not more than a day in the future); every figure is
finite (``NaN``/``inf`` are refused, never stored) and in range: utilisation 0–100 %, activity ratios
0–1, memory and power not negative, memory used not above the total. The checks are SQL over the
sample columns (``nvidia_smi_csv`` parses in DuckDB) and vectorised Arrow over exposition lines
(``dcgm_exporter``) or plain Python over answer values (``prometheus``); all name the file or target,
the line, the column and the value.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from ingest.files import sql_literal
from ingest.validate import EARLIEST, FUTURE_SLACK, Check, _txt

# sample column -> (low, high) of its valid range; None: unbounded
RANGES: dict[str, tuple[float, float | None]] = {
    "util": (0, 100), "gr_active": (0, 1), "sm_active": (0, 1), "tensor_active": (0, 1), "fp16_active": (0, 1),
    "fp32_active": (0, 1), "dram_active": (0, 1), "mem_used_mib": (0, None), "mem_free_mib": (0, None),
    "mem_reserved_mib": (0, None), "mem_total_mib": (0, None), "power_w": (0, None),
}


def _range_text(low: float, high: float | None) -> str:
    return f"is outside {low:g}–{high:g}" if high is not None else f"is below {low:g}"


def latest(now: datetime | None = None) -> datetime:
    return (now or datetime.now(timezone.utc)) + FUTURE_SLACK


def sample_checks(labels: dict[str, str], now: datetime | None = None) -> list[Check]:
    """Checks over sample columns; ``labels`` maps the columns present to the source's name for them,
    ``__unparsed_<column>`` ones (the raw text of a value that did not parse) included."""
    checks = [Check(labels[c], f"{c} IS NOT NULL", c, sql_literal("is not a number, a time or an N/A marker"))
              for c in labels if c.startswith("__unparsed_")]
    if "ts" in labels:
        checks.append(Check(labels["ts"], f"ts < TIMESTAMPTZ {sql_literal(EARLIEST.isoformat())} OR ts > TIMESTAMPTZ "
                                          f"{sql_literal(latest(now).isoformat())}", _txt("ts"),
                            sql_literal("is not a plausible time (before 2000 or more than a day in the future)")))
    for column, (low, high) in RANGES.items():
        if column not in labels:
            continue
        checks.append(Check(labels[column], f"NOT isfinite({column})", _txt(column), sql_literal("is not a finite number")))
        bad = f"{column} < {low}" + (f" OR {column} > {high}" if high is not None else "")
        checks.append(Check(labels[column], bad, _txt(column), sql_literal(_range_text(low, high))))
    if "mem_used_mib" in labels and "mem_total_mib" in labels:
        checks.append(Check(labels["mem_used_mib"], "mem_used_mib > mem_total_mib", _txt("mem_used_mib"),
                            f"{sql_literal('is more than ' + labels['mem_total_mib'] + ' ')} || {_txt('mem_total_mib')}"))
    return checks


# ---- Arrow: exposition lines ----------------------------------------------------------------------

def bad_lines(columns: pa.Array, values: pa.Array, stamps_ms: pa.Array, names: list[str],
              now: datetime | None = None) -> tuple[pa.Array, pa.Array]:
    """(mask of lines that fail a check, the reason of each), for lines whose ``columns`` index into
    ``names`` (sample column names; null for families not read)."""
    reason = pa.nulls(len(values), pa.string())
    finite = pc.is_finite(values)
    for i, name in enumerate(names):
        low, high = RANGES.get(name, (None, None))
        mine = pc.fill_null(pc.equal(columns, i), False)
        out = pc.invert(finite)
        text = "is not a finite number"
        reason = pc.if_else(pc.and_(mine, pc.and_(out, pc.is_null(reason))), text, reason)
        if low is not None:
            outside = pc.less(values, low) if high is None else pc.or_(pc.less(values, low), pc.greater(values, high))
            reason = pc.if_else(pc.and_(pc.and_(mine, pc.fill_null(outside, False)), pc.is_null(reason)),
                                _range_text(low, high), reason)
    earliest_ms = int(EARLIEST.timestamp() * 1000)
    latest_ms = int(latest(now).timestamp() * 1000)
    implausible = pc.fill_null(pc.or_(pc.less(stamps_ms, earliest_ms), pc.greater(stamps_ms, latest_ms)), False)
    reason = pc.if_else(pc.and_(pc.and_(implausible, pc.is_valid(columns)), pc.is_null(reason)),
                        "has a timestamp that is not a plausible time (before 2000 or more than a day in the future)",
                        reason)
    return pc.is_valid(reason), reason


# ---- Python: answer values ------------------------------------------------------------------------

def bad_figure(figure: str, value: float) -> str | None:
    """Why an hourly figure from Prometheus is refused, or None. ``figure`` is a FIGURES name."""
    if not math.isfinite(value):
        return "is not a finite number"
    column = {"util_mean": "util", "util_p95": "util", "util_max": "util", "mem_used_max": "mem_used_mib",
              "mem_free_min": "mem_free_mib", "mem_reserved_max": "mem_reserved_mib", "mem_total_max": "mem_total_mib",
              "sm_mean": "sm_active", "gr_mean": "gr_active", "tensor_mean": "tensor_active",
              "power_mean": "power_w", "samples": "mem_used_mib"}.get(figure)
    if column is None:
        return None
    low, high = RANGES[column]
    if value < low or (high is not None and value > high):
        return _range_text(low, high)
    return None
