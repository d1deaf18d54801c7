"""The column types the warehouse's tables share (``warehouse/*_schema.py``), and their DuckDB names."""

from __future__ import annotations

import pyarrow as pa

# Money and quantities: exact decimals. 15 fractional digits hold every value of the real FOCUS and
# CUR files (their finest is 15, quantities); 23 integral digits hold any bill.
DECIMAL = pa.decimal128(38, 15)
UTC_TS = pa.timestamp("us", tz="UTC")
JSON_META = {b"sql_type": b"JSON"}


def sql_type(field: pa.Field) -> str:
    """The DuckDB type of one arrow field."""
    if field.metadata and field.metadata.get(b"sql_type"):
        return field.metadata[b"sql_type"].decode()
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    simple = {
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.date32(): "DATE",
    }
    if t in simple:
        return simple[t]
    raise TypeError(f"no DuckDB type for arrow type {t} of column {field.name}")
