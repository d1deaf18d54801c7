"""Concurrent users of the decision endpoint over real HTTP on loopback: 50 parallel decisions on one
recommendation and on many, while another process holds the warehouse's write lock for a while (a job
loading). No answer is a 500; every 200 is recorded exactly once, every 503 carries Retry-After and
recorded nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import duckdb
import httpx
import pytest

from gpufinops.warehouse import recommendation_store
from tests.conftest import query
from tests.feed_fleet import realistic_recommendations
from tests.test_api import FINANCE, TOKENS, Served, hold_write_lock, make_config

PARALLEL = 50


def _decide_all(url: str, ids: list[str]) -> list[tuple[str, int, str | None]]:
    """One POST per id, all at once; (reason, status code, Retry-After) per request."""
    start = threading.Barrier(len(ids))

    def one(i: int) -> tuple[str, int, str | None]:
        reason = f"load-{i}"
        with httpx.Client(timeout=120) as client:
            start.wait(timeout=60)
            r = client.post(
                f"{url}/v1/recommendations/{ids[i]}/decision",
                headers=FINANCE,
                json={"decision": "accept" if i % 2 else "dismiss", "reason": reason},
            )
        return reason, r.status_code, r.headers.get("retry-after")

    with ThreadPoolExecutor(max_workers=len(ids)) as pool:
        return list(pool.map(one, range(len(ids))))


def _check(warehouse, answers: list[tuple[str, int, str | None]]) -> None:
    codes = sorted({code for _, code, _ in answers})
    assert set(codes) <= {200, 503}, codes
    assert all(after for _, code, after in answers if code == 503)
    recorded = [r for (r,) in query(warehouse, "SELECT reason FROM decisions WHERE reason LIKE 'load-%'")]
    assert sorted(recorded) == sorted(reason for reason, code, _ in answers if code == 200)  # each once, 503s none


@pytest.mark.parametrize("spread", ["one", "many"])
def test_parallel_decisions_while_a_job_writes_get_no_500(tmp_path, feed_warehouse, spread):
    from gpufinops.interfaces.api import create_app

    recs = [r.id for r in realistic_recommendations()]
    ids = [recs[0]] * PARALLEL if spread == "one" else [recs[i % len(recs)] for i in range(PARALLEL)]
    cfg = make_config(tmp_path, feed_warehouse)
    with Served(create_app(cfg, environ=TOKENS, read_retry_s=30, write_retry_s=30)) as served:
        holder = hold_write_lock(feed_warehouse, 1.0)  # the requests arrive while the job holds the warehouse
        try:
            answers = _decide_all(served.url, ids)
        finally:
            holder.wait(timeout=30)
    _check(feed_warehouse, answers)
    assert all(code == 200 for _, code, _ in answers)  # nothing waited past the 30 s window


def test_a_job_holding_the_warehouse_too_long_is_503_with_retry_after(tmp_path, feed_warehouse):
    from gpufinops.interfaces.api import create_app

    rec = realistic_recommendations()[0].id
    cfg = make_config(tmp_path, feed_warehouse)
    with Served(create_app(cfg, environ=TOKENS, read_retry_s=0.3, write_retry_s=0.3)) as served:
        holder = hold_write_lock(feed_warehouse, 20)
        try:
            answers = _decide_all(served.url, [rec] * 10)
        finally:
            holder.kill()
            holder.wait()
    assert {code for _, code, _ in answers} == {503}
    _check(feed_warehouse, answers)


def test_a_write_conflict_is_retried_and_recorded_once(feed_warehouse):
    """Two connections of one process updating the same row: DuckDB rolls the later one back
    (`Conflict on update`); record_decision retries it whole."""
    rec = realistic_recommendations()[0].id
    con = duckdb.connect(str(feed_warehouse))
    other = con.cursor()
    try:
        other.execute("BEGIN TRANSACTION")
        other.execute("UPDATE recommendations SET status = 'accepted' WHERE id = ?", [rec])
        with pytest.raises(recommendation_store.WriteConflict, match="in conflict with other writers after 2 attempts"):
            recommendation_store.record_decision(con, rec, "dismiss", "blocked", "a", attempts=2)
        releaser = threading.Timer(0.05, lambda: other.execute("COMMIT"))
        releaser.start()
        assert recommendation_store.record_decision(con, rec, "dismiss", "after", "b", attempts=50) == "dismissed"
        releaser.join()
        rows = con.execute("SELECT reason FROM decisions WHERE recommendation_id = ?", [rec]).fetchall()
        assert rows == [("after",)]
        with pytest.raises(ValueError, match="attempts must be at least 1"):
            recommendation_store.record_decision(con, rec, "accept", "", "c", attempts=0)
    finally:
        other.close()
        con.close()
