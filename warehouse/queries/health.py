"""Health and freshness: the ingest and job ledgers, report deliveries, and the fingerprints caches key on."""

from __future__ import annotations

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import frame


def ingest_status(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each source's latest run, its last success and the data's freshness."""
    return frame(
        con,
        """
        WITH ranked AS (
            SELECT *, row_number() OVER (PARTITION BY source ORDER BY started_at DESC) AS rn
            FROM ingest_runs)
        SELECT r.source, r.source_type, r.status AS last_status, r.started_at AS last_started_at,
               r.finished_at AS last_finished_at, r.rows AS last_rows, r.error AS last_error,
               (SELECT max(finished_at) FROM ingest_runs s WHERE s.source = r.source AND s.status = 'succeeded')
                   AS last_success_at,
               (SELECT any_value(watermark ORDER BY started_at DESC) FROM ingest_runs s
                WHERE s.source = r.source AND s.watermark IS NOT NULL) AS watermark
        FROM ranked r WHERE rn = 1 ORDER BY source""",
    )


# The settings whose change recomputes a derived table before a job's loads (``allocation.configure``,
# ``carbon.configure``, ``serving_costs.configure``) without a ledger row of its own.
SETTINGS_TABLES = ("allocation_settings", "carbon_settings", "unit_cost_settings")


def dashboard_data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """A cheap fingerprint of what the dashboard shows (the ledgers, findings and decisions, the settings
    the derived tables were computed with; not the fact tables): when it is unchanged, a result computed
    from the warehouse is still current."""
    present = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    parts = [
        "SELECT max(coalesce(finished_at, started_at)) FROM ingest_runs",
        "SELECT count(*) FROM ingest_runs",
        "SELECT max(coalesce(finished_at, started_at)) FROM job_runs",
        "SELECT count(*) FROM recommendations",
        "SELECT max(created_at) FROM recommendations",
        "SELECT count(*) FROM decisions",
        "SELECT max(decided_at) FROM decisions",
    ] + [
        f"SELECT string_agg(key || '=' || value, ';' ORDER BY key) FROM {table}"
        for table in SETTINGS_TABLES
        if table in present  # a warehouse opened read-only before its upgrade lacks the newer ones
    ]
    # one row per part, not one row of scalar subqueries: DuckDB plans ten subqueries in one projection
    # (the ordered string_agg among them) in 50-80 ms, the same parts as a union in ~10 ms (every render)
    union = " UNION ALL ".join(f"SELECT {i} AS part, CAST(({sql}) AS VARCHAR) AS v" for i, sql in enumerate(parts))
    rows = con.execute(f"SELECT v FROM ({union}) ORDER BY part").fetchall()
    return tuple(str(row[0]) for row in rows)


def cost_data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """The fingerprint of what cost figures (spend, the forecast, anomalies) depend on: the ingest
    ledger only, so a decision or a model run does not make the dashboard refit the forecast."""
    rows = con.execute("SELECT max(coalesce(finished_at, started_at)), count(*) FROM ingest_runs").fetchall()
    return tuple(str(v) for v in rows[0])


def job_status(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each non-ingest job's latest run (recommend, report, feed push) and its last success."""
    return frame(
        con,
        """
        SELECT job, arg_max(status, started_at) AS last_status, max(started_at) AS last_started_at,
               arg_max(error, started_at) AS last_error,
               max(finished_at) FILTER (WHERE status = 'succeeded') AS last_success_at
        FROM job_runs GROUP BY job ORDER BY job""",
    )


def report_delivery_status(con: duckdb.DuckDBPyConnection, report: str, week: str) -> pl.DataFrame:
    """The delivery ledger of one report and week: one row per recipient."""
    return frame(
        con,
        """
        SELECT recipient, status, attempts, message_id, sent_at, error, updated_at
        FROM report_deliveries WHERE report = ? AND week = ? ORDER BY recipient""",
        [report, week],
    )
