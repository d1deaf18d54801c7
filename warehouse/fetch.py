"""Typed reads of one row from a DuckDB cursor.

``cursor.fetchone()`` is typed ``tuple | None``: an aggregate (``SELECT count(*) …``) always returns a
row, so a ``None`` there is a bug, not a case to handle. These helpers say that once, with an error
that names what was expected, instead of ``fetchone()[0]`` failing with a ``TypeError`` on ``None``.
"""

from __future__ import annotations

from typing import Any

import duckdb


def one(cursor: duckdb.DuckDBPyConnection, what: str = "the query") -> tuple[Any, ...]:
    """The single row ``cursor`` returned; LookupError if it returned none or more than one.

    Read with ``fetchall``: after ``fetchone`` DuckDB keeps the result open, and the connection's next
    statement may then be refused ("connection has an unfinished result")."""
    rows = cursor.fetchall()
    if len(rows) != 1:
        raise LookupError(
            f"{what} returned {len(rows) or 'no'} rows, expected one" if rows else f"{what} returned no row"
        )
    return tuple(rows[0])


def scalar(cursor: duckdb.DuckDBPyConnection, what: str = "the query") -> Any:
    """The first column of the single row ``cursor`` returned."""
    return one(cursor, what)[0]
