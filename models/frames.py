"""Typed reads of polars scalars: ``Series.min()`` / ``max()`` / ``mean()`` are typed as any Python literal;
a model knows what its column holds, and says so here once (TypeError if the frame disagrees)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import polars as pl

from gpufinops.kernel.providers import provider_code


def as_datetime(value: Any) -> datetime:
    """A timestamp column's min or max (never on an empty column: the caller checked)."""
    if not isinstance(value, datetime):
        raise TypeError(f"expected a timestamp, got {value!r}")
    return value


def as_float(value: Any) -> float:
    """A numeric column's aggregate."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def frame(value: pl.DataFrame | pl.Series) -> pl.DataFrame:
    """``pl.from_arrow`` of a table is a DataFrame (its signature also allows a Series)."""
    if not isinstance(value, pl.DataFrame):
        raise TypeError("expected a table")
    return value


def as_date(value: Any) -> date:
    """A date column's min or max."""
    if not isinstance(value, date):
        raise TypeError(f"expected a date, got {value!r}")
    return value


def provider_codes(frame: pl.DataFrame, column: str) -> pl.Expr:
    """``provider_code`` of ``column`` on every row, as an expression over ``frame``: each distinct name
    (a bill holds a handful) is mapped once in Python, not each of a million rows; no name stays None."""
    names = frame.get_column(column).drop_nulls().unique().to_list()
    mapping = {name: provider_code(name) for name in names}
    return pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.Utf8)
