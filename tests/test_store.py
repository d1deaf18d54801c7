"""Stored recommendations: decisions survive re-runs; a dismissed finding reopens only when its
evidence changes; an older warehouse upgrades in place."""

from __future__ import annotations

from decimal import Decimal

import duckdb

from gpufinops.models.recommendation import Recommendation
from gpufinops.warehouse import column_types, db, recommendation_store, schema
from tests.feed_fleet import Subject, _rec


def rec(savings: str = "100.00", proposed_count: int = 4) -> Recommendation:
    """vision's train workload on i-1: a finding to keep ``proposed_count`` of its 8 GPUs."""
    proposed = {"gpu_count": proposed_count, "monthly_cost_usd": 50.0}
    return _rec("gpu_count", Subject("vision", "aws", "i-1", "train"), {"gpu_count": 8}, proposed, savings, {})


def status_of(con) -> tuple[str, str | None]:
    return con.execute("SELECT status, model_version FROM recommendations WHERE id = ?", [rec().id]).fetchall()[0]


def test_dismissed_stays_dismissed_until_the_evidence_changes(warehouse):
    with db.writer(warehouse) as con:
        recommendation_store.store_recommendations(con, [rec()], ["gpu_count"], {"gpu_count": "gpu_count/1"})
        assert status_of(con) == ("open", "gpu_count/1")
        con.execute("UPDATE recommendations SET status = 'dismissed'")
        recommendation_store.store_recommendations(con, [rec("112.40")], ["gpu_count"])  # small drift: still dismissed
        assert status_of(con)[0] == "dismissed"
        assert con.execute("SELECT monthly_savings_usd FROM recommendations").fetchall() == [(Decimal("112.40"),)]
        recommendation_store.store_recommendations(
            con, [rec("112.40", proposed_count=2)], ["gpu_count"]
        )  # new proposal
        assert status_of(con)[0] == "open"
        con.execute("UPDATE recommendations SET status = 'dismissed'")
        recommendation_store.store_recommendations(
            con, [rec("260.00", proposed_count=2)], ["gpu_count"]
        )  # savings doubled
        assert status_of(con)[0] == "open"


def test_accepted_stays_accepted_and_open_findings_no_longer_made_disappear(warehouse):
    with db.writer(warehouse) as con:
        recommendation_store.store_recommendations(con, [rec()], ["gpu_count"])
        con.execute("UPDATE recommendations SET status = 'accepted'")
        recommendation_store.store_recommendations(con, [rec("900.00", proposed_count=1)], ["gpu_count"])
        assert status_of(con)[0] == "accepted"
        con.execute("UPDATE recommendations SET status = 'open'")
        recommendation_store.store_recommendations(con, [], ["gpu_count"])
        assert con.execute("SELECT count(*) FROM recommendations").fetchall() == [(0,)]


def test_a_version_3_warehouse_upgrades_in_place(warehouse):
    warehouse.parent.mkdir(parents=True)
    con = duckdb.connect(str(warehouse))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    old_recs = schema.TABLES["recommendations"].schema
    for i, migrate in enumerate(schema.MIGRATIONS[:3], start=1):
        for statement in migrate():
            if statement.startswith("CREATE TABLE IF NOT EXISTS recommendations"):
                # the table as version 3 shipped it, without the v4 columns
                cols = [f for f in old_recs if f.name not in ("model_version", "evidence_hash")]
                statement = (
                    "CREATE TABLE recommendations ("
                    + ", ".join(f'"{f.name}" {column_types.sql_type(f)}' for f in cols)
                    + ")"
                )
            con.execute(statement)
        con.execute("INSERT INTO schema_version VALUES (?, now())", [i])
    con.execute("INSERT INTO recommendations (id, kind, status) VALUES ('old', 'idle_gpu', 'dismissed')")
    con.close()
    db.prepare(warehouse)  # a process's start upgrades it (a writer alone refuses an old warehouse)
    with db.writer(warehouse) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(schema.SCHEMA_VERSION,)]
        assert con.execute("SELECT id, status, evidence_hash FROM recommendations").fetchall() == [
            ("old", "dismissed", None)
        ]
        for table in ("price_catalog", "price_history", "report_deliveries", "webhook_deliveries", "job_runs"):
            con.execute(f"SELECT count(*) FROM {table}").fetchall()


def test_a_decision_is_recorded_with_who_and_why_and_scoped(warehouse):
    import pytest

    rid = rec().id
    with db.writer(warehouse) as con:
        recommendation_store.store_recommendations(con, [rec()], ["gpu_count"])
        with pytest.raises(recommendation_store.UnknownRecommendation):  # outside the caller's teams: as if absent
            recommendation_store.record_decision(con, rid, "accept", "ok", "lead@x", teams=["nlp"])
        with pytest.raises(recommendation_store.UnknownRecommendation):
            recommendation_store.record_decision(con, "nope", "accept", "ok", "lead@x")
        with pytest.raises(ValueError):
            recommendation_store.record_decision(con, rid, "maybe", "", "lead@x")
        assert (
            recommendation_store.record_decision(con, rid, "dismiss", "model retiring", "lead@x", teams=["vision"])
            == "dismissed"
        )
        assert status_of(con)[0] == "dismissed"
        assert con.execute("SELECT recommendation_id, decision, reason, actor FROM decisions").fetchall() == [
            (rid, "dismiss", "model retiring", "lead@x")
        ]
