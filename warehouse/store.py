"""Writes that are not ingest loads: recommendations a model run produced."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import duckdb


def store_recommendations(con: duckdb.DuckDBPyConnection, recs: Iterable[Any], kinds: Iterable[str]) -> int:
    """Replace the open recommendations of ``kinds`` with this run's, in one transaction.

    A finding someone already decided on keeps its status (the id is stable across runs); an open
    finding the models no longer make disappears.
    """
    rows = [{**r.to_dict(), "monthly_savings_usd": r.monthly_savings_usd} for r in recs]  # Decimal kept exact
    kinds = list(kinds)
    con.execute("BEGIN TRANSACTION")
    try:
        decided = dict(con.execute(
            "SELECT id, status FROM recommendations WHERE status <> 'open'").fetchall())
        con.execute("DELETE FROM recommendations WHERE kind IN (SELECT unnest(?::VARCHAR[])) AND status = 'open'",
                    [kinds])
        for row in rows:
            status = decided.get(row["id"], "open")
            if status != "open":
                con.execute("UPDATE recommendations SET monthly_savings_usd = ?, confidence = ?, evidence = ?, "
                            "current = ?, proposed = ?, risk = ? WHERE id = ?",
                            [row["monthly_savings_usd"], row["confidence"], json.dumps(row["evidence"]),
                             json.dumps(row["current"]), json.dumps(row["proposed"]), row["risk"], row["id"]])
                continue
            con.execute("INSERT INTO recommendations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                row["id"], row["kind"], row["team"], row["provider"], row["resource_id"], row["workload"],
                json.dumps(row["current"]), json.dumps(row["proposed"]), row["monthly_savings_usd"],
                row["confidence"], row["risk"], json.dumps(row["evidence"]), row["created_at"], "open"])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)
