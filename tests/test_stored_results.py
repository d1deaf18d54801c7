"""The dashboard's stored results (dashboard/precomputed.py, warehouse/stored_results.py): the load job
fits the forecast and anomalies and runs the heaviest page queries once, the pages read them. What is
stored is exactly what a page would compute (one number: the outlook the report, the alerts and the API
quote), a new day or a restated bill makes it stale until the job recomputes it, an old warehouse has
none (the page computes), and `gpufinops ingest` stores them. Real DuckDB, real loads."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from polars.testing import assert_frame_equal

from gpufinops.dashboard import precomputed
from gpufinops.derived import rollups
from gpufinops.jobs import config, ingest_run
from gpufinops.models.outlook import month_outlook
from gpufinops.warehouse import db, queries, stored_results
from tests.alert_fleet import Resource, add_spend, spend_lines
from tests.conftest import FOCUS_SAMPLE

SEP = date(2026, 9, 1)
WEEKDAYS = [1.2, 1.2, 1.1, 1.1, 1.0, 0.7, 0.7]


def fleet(path, days: int = 50) -> None:
    """Two teams and a machine without a team, from Sep 1: 50 days end mid-October (a forecast to make),
    with a spike on one team's last day but one (an anomaly to find)."""
    with db.writer(path) as con:
        spend_lines(con, "vision", SEP, days, 900.0, weekday_factors=WEEKDAYS, source="aws-v")
        spend_lines(con, "research", SEP, days, 2000.0, weekday_factors=WEEKDAYS, source="aws-r")
        spend_lines(con, None, SEP, days, 30.0, resource=Resource("i-orphan", tags={}), source="aws-o")
        spend_lines(con, "vision", date(2026, 10, 19), 1, 9000.0, resource=Resource("i-runaway"), source="aws-spike")


SCOPES = (None, ["vision"], ["research"])


def assert_same_fits(stored, live) -> None:
    assert stored is not None
    assert stored.outlook == live.outlook
    assert_frame_equal(stored.forecast, live.forecast)
    assert_frame_equal(stored.anomalies, live.anomalies)


@pytest.mark.parametrize("days", precomputed.WINDOW_CHOICES)
def test_the_stored_fits_are_what_the_page_computes_and_the_outlook_every_surface_quotes(warehouse, days):
    fleet(warehouse)
    precomputed.refresh(warehouse)
    with db.reader(warehouse) as con:
        for teams in SCOPES:
            as_of = queries.latest_charge_day(con, team=teams)
            start = precomputed.spend_start(as_of, days)
            stored = precomputed.stored_fits(con, teams, as_of, start)
            assert_same_fits(stored, precomputed.compute_fits(con, teams, as_of, start))
            assert stored is not None and stored.outlook == month_outlook(con, teams)  # report, alerts, API
            assert not stored.outlook.complete and stored.outlook.lower_usd < stored.outlook.upper_usd
            assert not stored.forecast.is_empty()
        spike = precomputed.stored_fits(con, ["vision"], as_of, precomputed.spend_start(as_of, days))
        assert spike is not None and date(2026, 10, 19) in spike.anomalies["day"].to_list()


def test_a_lead_of_several_teams_is_computed_on_the_page(warehouse):
    fleet(warehouse)
    precomputed.refresh(warehouse)
    with db.reader(warehouse) as con:
        as_of = queries.latest_charge_day(con)
        assert precomputed.stored_fits(con, ["vision", "research"], as_of, as_of) is None


def test_a_new_day_or_a_restated_bill_makes_the_stored_results_stale_until_the_job_recomputes(warehouse):
    fleet(warehouse)
    precomputed.refresh(warehouse)
    with db.reader(warehouse) as con:
        as_of = queries.latest_charge_day(con)
        before = precomputed.stored_fits(con, None, as_of, precomputed.spend_start(as_of, 30))
    assert before is not None
    add_spend(warehouse, "vision", date(2026, 10, 21), 1, 900.0, source="aws-v2")  # a new day
    with db.reader(warehouse) as con:
        as_of = queries.latest_charge_day(con)
        assert precomputed.stored_fits(con, None, as_of, precomputed.spend_start(as_of, 30)) is None
        assert precomputed.stored_query(con, "gpu_count_disagreements", {}) is None
    precomputed.refresh(warehouse)
    with db.reader(warehouse) as con:
        after = precomputed.stored_fits(con, None, as_of, precomputed.spend_start(as_of, 30))
        assert_same_fits(after, precomputed.compute_fits(con, None, as_of, precomputed.spend_start(as_of, 30)))
    assert after is not None and after.outlook.first_unknown_day > before.outlook.first_unknown_day
    with db.writer(warehouse) as con:  # the provider restates a day of the bill: the ledger's rows stay as they were
        con.execute(
            """UPDATE cost_line_items SET "EffectiveCost" = "EffectiveCost" * 2
               WHERE "x_Source" = 'aws-r' AND "ChargePeriodStart" >= TIMESTAMPTZ '2026-10-10 00:00:00+00'"""
        )
        rollups.refresh_cost_daily(con, "aws-r")
    with db.reader(warehouse) as con:
        assert precomputed.stored_fits(con, None, as_of, precomputed.spend_start(as_of, 30)) is None


def test_an_old_warehouse_without_the_table_has_nothing_stored_and_the_page_computes(warehouse):
    fleet(warehouse)
    with db.writer(warehouse) as con:
        con.execute("DROP TABLE stored_results")
    with db.reader(warehouse) as con:
        as_of = queries.latest_charge_day(con)
        assert precomputed.stored_fits(con, None, as_of, as_of) is None
        assert precomputed.stored_query(con, "gpu_count_disagreements", {}) is None
        assert stored_results.computed(con) == (None, None, None, 0)


def test_every_stored_page_query_is_the_query_s_own_result(warehouse):
    fleet(warehouse)
    precomputed.refresh(warehouse)
    with db.reader(warehouse) as con:
        chosen = precomputed.default_queries(con)
        assert {name for name, _ in chosen} == precomputed.STORED_QUERIES
        for name, kwargs in chosen:
            stored = precomputed.stored_query(con, name, kwargs)
            assert stored is not None, name
            assert_frame_equal(stored, getattr(queries, name)(con, **kwargs))
        # other arguments (another window, a lead's team) are not stored: the page runs the query
        assert precomputed.stored_query(con, "fleet_utilisation", {"team": ["vision"], "start": None}) is None
        assert precomputed.stored_query(con, "recommendations", {"team": None}) is None


def test_a_query_key_is_the_same_instant_in_any_time_zone():
    utc = datetime(2026, 10, 1, tzinfo=UTC)
    assert precomputed.query_key({"start": utc}) == precomputed.query_key({"start": utc.astimezone()})


def test_gpufinops_ingest_stores_the_results_on_the_data_it_loaded(tmp_path):
    path = tmp_path / "gpufinops.toml"
    path.write_text(
        f'[warehouse]\npath = "wh.duckdb"\n\n[sources.focus]\ntype = "focus_files"\npath = "{FOCUS_SAMPLE}"\n'
    )
    cfg = config.load(path)
    assert all(r.ok for r in ingest_run.run_configured(cfg))
    with db.reader(cfg.warehouse_path) as con:
        version, _, seconds, count = stored_results.computed(con)
        assert version == stored_results.data_version(con) and count > 0 and seconds is not None
        as_of = queries.latest_charge_day(con)
        assert precomputed.stored_fits(con, None, as_of, precomputed.spend_start(as_of, 30)) is not None
