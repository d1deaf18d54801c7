"""Arguments that contradict each other or name what is not there: a usage error (exit 2) before a
command runs, never "0 rows" or "$0" that reads like an answer.

- ``--from`` after ``--to`` (every command with a date window);
- ``--team`` naming a team the warehouse has never seen (no cost line, shared-GPU share,
  recommendation nor alert carries it).
"""

from __future__ import annotations

import argparse
from typing import Any

import duckdb

TEAM_SOURCES = (
    "SELECT DISTINCT team FROM cost_daily",
    "SELECT DISTINCT team FROM gpu_allocation_hourly",
    "SELECT DISTINCT team FROM recommendations",
    "SELECT DISTINCT unnest(teams) FROM alerts",
)


def known_teams(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Every team the warehouse knows (a table an older warehouse lacks adds none)."""
    teams: set[str] = set()
    for sql in TEAM_SOURCES:
        try:
            teams.update(r[0] for r in con.execute(sql).fetchall() if r[0])
        except duckdb.Error:
            continue
    return teams


def problem(cfg: Any, args: argparse.Namespace) -> str | None:
    """Why these arguments cannot be answered, or None."""
    start, end = getattr(args, "from_date", None), getattr(args, "to_date", None)
    if start is not None and end is not None and end < start:
        return f"--to {end:%Y-%m-%d} is before --from {start:%Y-%m-%d}: swap them"
    team = getattr(args, "team", None)
    if not team or not cfg.warehouse_path.exists():
        return None
    from gpufinops.warehouse import db

    try:
        with db.reader(cfg.warehouse_path) as con:
            teams = known_teams(con)
    except (db.WarehouseError, duckdb.Error):  # the command itself reports what is wrong with the warehouse
        return None
    if not teams or team in teams:
        return None
    shown = sorted(teams)
    listed = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
    return f"--team {team}: no such team in the warehouse {cfg.warehouse_path} (teams: {listed})"
