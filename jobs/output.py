"""Printing frames as a table, CSV or JSON for the command line."""

from __future__ import annotations

import io
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import polars as pl


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def table(frame: pl.DataFrame, max_width: int = 60) -> str:
    header = frame.columns
    rows = [[_cell(v)[:max_width] for v in row] for row in frame.iter_rows()]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def to_json(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, default=_json_default, indent=2)


def csv_text(frame: pl.DataFrame) -> str:
    out = io.StringIO()
    flat = frame.with_columns([pl.col(c).cast(pl.Utf8) for c, t in frame.schema.items() if t.is_nested()])
    flat.write_csv(out)
    return out.getvalue()


def render(frame: pl.DataFrame, fmt: str) -> str:
    if fmt == "json":
        return to_json(frame.to_dicts())
    if fmt == "csv":
        return csv_text(frame)
    return table(frame)
