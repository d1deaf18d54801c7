"""Recommendations, withheld findings, on-prem verdicts and decisions (dashboard, API, webhook)."""

from __future__ import annotations

import duckdb
import polars as pl

from gpufinops.warehouse import recommendation_read
from gpufinops.warehouse.queries.fragments import filters, frame

# Every query below that hands recommendations to a surface reads the one read model's view
# (warehouse/recommendation_read.py: the stored row with its latest decision), never the bare table; the
# plain list of stored recommendations is that module's ``frame`` (``queries.recommendations``).
RECOMMENDATION_VIEW = recommendation_read.VIEW


def withheld_findings(
    con: duckdb.DuckDBPyConnection, *, kind: str | None = None, team: str | list[str] | None = None
) -> pl.DataFrame:
    """What the last model run withheld: per resource and kind, the reason, the missing fact and the
    source that would provide it. A finding with no team (fleet-wide, or not yet attributed) is
    shown to a viewer of every team only, like a recommendation without one."""
    where_team, params = filters(team, None, None, team_col="team")
    kind_clause = "kind = ?" if kind else "TRUE"
    return frame(
        con,
        f"""
        SELECT kind, team, provider, resource_id, reason, detail, missing, source_hint, model_version, created_at
        FROM withheld_findings WHERE {kind_clause} AND {where_team}
        ORDER BY reason, kind, resource_id""",
        ([kind] if kind else []) + params,
    )


def onprem_comparison(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """The last model run's on-prem verdict per node group and workload (keep, shrink, burst) with its
    figures: facts, not recommendations. A group's cluster-wide row (no team) is for every-team viewers."""
    where_team, params = filters(team, None, None, team_col="team")
    return frame(
        con,
        f"""
        SELECT resource_id AS node_group, team, workload, pattern, action, monthly_savings_usd,
               CAST(json_extract(evidence, '$.util_mean_pct') AS DOUBLE) AS util_mean_pct,
               CAST(json_extract(evidence, '$.break_even_utilisation_pct') AS DOUBLE) AS break_even_utilisation_pct,
               CAST(json_extract(evidence, '$.onprem_cost_per_used_gpu_hour_usd') AS DOUBLE) AS onprem_usd_per_used_gpu_hour,
               CAST(json_extract(evidence, '$.cloud_cost_per_used_gpu_hour_usd') AS DOUBLE) AS cloud_usd_per_used_gpu_hour,
               json_extract_string(evidence, '$.cheapest_cloud_option') AS cheapest_cloud_option,
               CAST(json_extract(evidence, '$.gpu_hours') AS BIGINT) AS gpu_hours, created_at
        FROM onprem_comparison WHERE {where_team}
        ORDER BY node_group, team NULLS FIRST, workload""",
        params,
    )


def withheld_counts(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """How many findings the last model run withheld, per reason (largest first)."""
    where_team, params = filters(team, None, None, team_col="team")
    return frame(
        con,
        f"""
        SELECT reason, count(*) AS findings, string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kinds
        FROM withheld_findings WHERE {where_team} GROUP BY reason ORDER BY findings DESC, reason""",
        params,
    )


def savings_by_status(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """Every recommendation's status, plan role and monthly savings (open = identified, accepted,
    applied = realised): totals over them are ``models.plans.total`` (primary and step objects of open
    and accepted findings; ``statuses=`` picks another status's figure)."""
    where, params = filters(team, None, None, team_col="team")
    return frame(
        con,
        f"""
        SELECT status, plan, plan_id, kind, monthly_savings_usd
        FROM recommendations WHERE {where} ORDER BY status, plan_id, plan""",
        params,
    )


def dashboard_recommendation(
    con: duckdb.DuckDBPyConnection, recommendation_id: str, *, team: str | list[str] | None = None
) -> pl.DataFrame:
    """One recommendation, or none when it does not exist or lies outside the caller's teams."""
    where, params = filters(team, None, None, team_col="team")
    return frame(con, f"SELECT * FROM {RECOMMENDATION_VIEW} WHERE id = ? AND {where}", [recommendation_id] + params)


def decisions_log(
    con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None, recommendation_id: str | None = None
) -> pl.DataFrame:
    """Who decided what on which recommendation, newest first (scoped by the recommendation's team)."""
    where, params = filters(team, None, None, team_col="r.team")
    if recommendation_id is not None:
        where += " AND d.recommendation_id = ?"
        params.append(recommendation_id)
    return frame(
        con,
        f"""
        SELECT d.decided_at, d.recommendation_id, r.kind, r.team, d.decision, d.reason, d.actor
        FROM decisions d JOIN recommendations r ON r.id = d.recommendation_id
        WHERE {where} ORDER BY d.decided_at DESC""",
        params,
    )


def recommendation_by_id(con: duckdb.DuckDBPyConnection, recommendation_id: str) -> pl.DataFrame:
    """One stored recommendation (zero rows when there is none); the caller applies its scope."""
    return frame(con, f"SELECT * FROM {RECOMMENDATION_VIEW} WHERE id = ?", [recommendation_id])


def undelivered_recommendations(
    con: duckdb.DuckDBPyConnection, url: str, *, team: str | list[str] | None = None, kinds: list[str] | None = None
) -> pl.DataFrame:
    """Recommendations a webhook at ``url`` has not yet received (no delivered batch holds their id);
    dismissed ones are never pushed. Oldest first, so batches follow the order findings appeared."""
    where_team, team_params = filters(team, None, None, team_col="r.team")
    kind_clause, kind_params = ("TRUE", [])
    if kinds:
        kind_clause, kind_params = "r.kind IN (SELECT unnest(?::VARCHAR[]))", [list(kinds)]
    return frame(
        con,
        f"""
        WITH delivered AS (
            SELECT DISTINCT unnest(from_json(d.recommendation_ids, '["VARCHAR"]')) AS id
            FROM webhook_deliveries d WHERE d.url = ? AND d.status = 'delivered')
        SELECT r.* FROM {RECOMMENDATION_VIEW} r
        WHERE r.status <> 'dismissed' AND r.id NOT IN (SELECT id FROM delivered)
          AND {kind_clause} AND {where_team}
        ORDER BY r.created_at, r.id""",
        [url] + kind_params + team_params,
    )
