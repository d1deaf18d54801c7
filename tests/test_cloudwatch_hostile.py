"""Hostile CloudWatch answers for ``cloudwatch_gpu``: impossible statistics and a listing that never ends.

moto's CloudWatch on loopback behind the front of tests/cloudwatch_loopback.py, which here edits the
real ``GetMetricData`` results before they are paged (NaN and Infinity travel as JSON's ``NaN`` /
``Infinity``, which botocore's parser reads as floats) or answers the same ``NextToken`` forever. Every
case must fail in one sentence naming the API call, the series and the value, leave the warehouse as
it was, and the next run (the service healthy again) must load.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tests.conftest import query
from tests.fuzz_harness import _empty_warehouse
from tests.test_cloudwatch_gpu import HOURS, START, agent, options, run  # noqa: F401 (agent: a fixture)

WINDOW = {"since": START, "until": START + timedelta(hours=HOURS)}
# (query id fragment: GPU 0's metric and statistic index, the value put there, what the sentence says)
CASES = {
    "utilisation -50 %": ("g0_utilization_gpu_0", -50.0, "is outside 0–100 %"),
    "utilisation 250 %": ("g0_utilization_gpu_1", 250.0, "is outside 0–100 %"),
    "utilisation NaN": ("g0_utilization_gpu_0", float("nan"), "is not a finite number"),
    "utilisation Infinity": ("g0_utilization_gpu_2", float("inf"), "is not a finite number"),
    "memory 1e308 MiB": ("g0_memory_used_0", 1e308, "is outside 0–1048576 MiB"),
    "sample count -5": ("g0_utilization_gpu_3", -5.0, "is outside 0–2147483647"),
    "power -Infinity": ("g0_power_draw_0", float("-inf"), "is not a finite number"),
}


def _state(warehouse) -> list:
    if not warehouse.exists():  # an empty, migrated warehouse
        warehouse.parent.mkdir(parents=True, exist_ok=True)
        _empty_warehouse(warehouse)
    return query(warehouse, "SELECT count(*) FROM gpu_metrics_hourly") + query(
        warehouse, "SELECT count(*) FROM ingest_state WHERE source = 'cw'"
    )


@pytest.mark.parametrize("case", list(CASES))
def test_an_impossible_statistic_is_refused_naming_the_series(agent, warehouse, case):  # noqa: F811
    front, _ = agent
    query_id, value, reason = CASES[case]

    def tamper(results: list[dict]) -> None:
        for result in results:
            if result["Id"] == query_id and result.get("Values"):
                result["Values"][1] = value

    front.tamper = tamper
    before = _state(warehouse)
    failed = run(warehouse, options(front), **WINDOW)
    assert failed.status == "failed"
    assert "\n" not in failed.error and len(failed.error) < 400, failed.error
    assert failed.error.startswith("cw: GetMetricData ") and reason in failed.error, failed.error
    assert "InstanceId i-0aaa1111bbbb2222c" in failed.error and "index 0" in failed.error, failed.error
    assert _state(warehouse) == before == [(0,), (0,)]
    front.tamper = None  # healthy again: the next run loads
    assert run(warehouse, options(front), **WINDOW).status == "succeeded"


def test_memory_used_above_the_gpus_total_is_refused_by_the_domain_check(agent, warehouse):  # noqa: F811
    """Each value alone is plausible; the row is not (used > total): the runner's check names the row."""
    front, _ = agent

    def tamper(results: list[dict]) -> None:
        for result in results:
            if result["Id"] == "g0_memory_used_0":
                result["Values"] = [50_000.0 for _ in result["Values"]]

    front.tamper = tamper
    assert _state(warehouse) == [(0,), (0,)]
    failed = run(warehouse, options(front), **WINDOW)
    assert failed.status == "failed" and "\n" not in failed.error
    assert failed.error.startswith("cw: GetMetricData of CWAgent: gpu_metrics_hourly row (")
    assert "column mem_used_max_mib value '50000.0' is more than mem_total_mib 40960" in failed.error, failed.error
    assert _state(warehouse) == [(0,), (0,)]


def test_a_next_token_answered_again_stops_the_listing(agent, warehouse):  # noqa: F811
    front, _ = agent
    front.loop_token = True
    assert _state(warehouse) == [(0,), (0,)]
    started = time.monotonic()
    failed = run(warehouse, options(front), **WINDOW)
    assert time.monotonic() - started < 30
    assert failed.status == "failed"
    assert (
        "GetMetricData of CWAgent" in failed.error
        and "answered a page token it answered 1 page(s) before" in failed.error
    )
    calls = [r for r in front.requests if r["operation"] == "GetMetricData"]
    assert len(calls) <= 3, len(calls)  # the first page, the token, the token again: stopped
    assert _state(warehouse) == [(0,), (0,)]
    front.loop_token = False
    assert run(warehouse, options(front), **WINDOW).status == "succeeded"
