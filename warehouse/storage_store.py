"""The storage inventory in the warehouse: each source's rows replace its own, in one transaction, checked first.

Every value is checked against the storage tables' domains before anything is written (one sentence naming
the table, row, column and value); a refused inventory leaves the warehouse as it was.
"""

from __future__ import annotations

import uuid
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.storage.aws_inventory import Inventory
from gpufinops.warehouse import domains
from gpufinops.warehouse.storage_schema import STORAGE_TABLES

_LABELS = (
    "team",
    "region",
    "volume_type",
    "bucket",
    "prefix",
    "run",
    "checkpoint",
    "storage_class",
    "volume_id",
    "snapshot_id",
    "last_instance_type",
)
DOMAINS: dict[str, domains.Domain] = {
    **{c: domains.amount(unit="GiB") for c in ("size_gib",)},
    **{
        c: domains.amount()
        for c in ("iops", "throughput_mibps", "read_ops", "write_ops", "read_bytes", "write_bytes", "get_requests")
    },
    **{c: domains.count(2**62) for c in ("objects", "bytes")},
    **{c: domains.label(4096 if c in ("prefix", "checkpoint", "run") else domains.MAX_LABEL) for c in _LABELS},
}


class StorageInventoryError(ValueError):
    """An inventory row with a value outside its column's domain."""


def check(table: str, rows: list[dict]) -> None:
    for n, row in enumerate(rows, 1):
        for column, value in row.items():
            domain = DOMAINS.get(column)
            problem = domain.reason(value, row) if domain else None
            if problem:
                shown = str(value)[:40].encode("unicode_escape").decode()
                key = row.get("volume_id") or row.get("snapshot_id") or f"s3://{row.get('bucket')}/{row.get('prefix')}"
                raise StorageInventoryError(f"{table} row {n} ({key}): column {column} value {shown!r} {problem}")


def _arrow(table: str, rows: list[dict], run_id: str) -> pa.Table:
    schema = STORAGE_TABLES[table]
    return pa.Table.from_pylist([{**r, "ingest_run_id": run_id} for r in rows], schema=schema)


def tables(inv: Inventory) -> dict[str, list[dict]]:
    return {
        "storage_volumes": inv.volumes,
        "storage_snapshots": inv.snapshots,
        "storage_objects": inv.objects,
        "storage_volume_ops_hourly": inv.volume_ops,
        "storage_prefix_reads_daily": inv.prefix_reads,
    }


def load(con: duckdb.DuckDBPyConnection, source: str, inv: Inventory, run_id: str | None = None) -> str:
    """Replace ``source``'s inventory with ``inv``; measured hours and days outside the new rows are kept
    (the metrics keep their history), everything else is the latest listing. Returns the run id."""
    run_id = run_id or uuid.uuid4().hex
    by_table = tables(inv)
    for table, rows in by_table.items():
        check(table, rows)
    con.execute("BEGIN TRANSACTION")
    try:
        for table, rows in by_table.items():
            arrow = _arrow(table, rows, run_id)  # noqa: F841  # read by the INSERT below
            if table == "storage_volume_ops_hourly":
                con.execute(
                    f"DELETE FROM {table} WHERE source = ? AND (volume_id, hour) IN (SELECT volume_id, hour FROM arrow)",
                    [source],
                )
            elif table == "storage_prefix_reads_daily":
                con.execute(
                    f"DELETE FROM {table} WHERE source = ? AND (bucket, prefix, day) IN "
                    f"(SELECT bucket, prefix, day FROM arrow)",
                    [source],
                )
            else:
                con.execute(f"DELETE FROM {table} WHERE source = ?", [source])
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM arrow")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return run_id


def previous_volumes(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, dict[str, Any]]:
    """The last inventory's volumes of ``source`` by id (what the next one carries forward)."""
    cur = con.execute("SELECT * FROM storage_volumes WHERE source = ?", [source])
    names = [d[0] for d in cur.description]
    return {row[names.index("volume_id")]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}
