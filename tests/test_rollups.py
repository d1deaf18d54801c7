"""The cost_daily rollup moves with cost_line_items: every load, restatement and failed load."""

from __future__ import annotations

import shutil

from tests.conftest import FOCUS_SAMPLE, query
from tests.test_focus_files import load

PER_DAY = """SELECT make_timestamptz((epoch_us("ChargePeriodStart") // 86400000000) * 86400000000), "x_Source",
                    "ProviderName", "x_Team", "ServiceName", "x_GpuModel", sum("BilledCost"), sum("EffectiveCost"), count(*)
             FROM cost_line_items GROUP BY ALL ORDER BY ALL"""
ROLLUP = """SELECT day, source, provider, team, service, gpu_model, billed_cost, effective_cost, line_items
            FROM cost_daily ORDER BY ALL"""


def test_the_daily_rollup_equals_the_line_items_after_loads_restatements_and_failures(
    focus_registry, warehouse, tmp_path
):
    first, second = tmp_path / "a" / "focus.csv", tmp_path / "b" / "focus.csv"
    for path in (first, second):
        path.parent.mkdir()
        shutil.copy(FOCUS_SAMPLE, path)
    assert load(focus_registry, warehouse, first, source="a").status == "succeeded"
    assert load(focus_registry, warehouse, second, source="b").status == "succeeded"
    rollup = query(warehouse, ROLLUP)
    assert rollup == query(warehouse, PER_DAY) and len(rollup) > 10
    gpu = (
        query(
            warehouse,
            """SELECT sum("EffectiveCost") FILTER (WHERE "x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL)
                              FROM cost_line_items""",
        )[0][0]
        or 0
    )
    assert query(warehouse, "SELECT sum(gpu_cost) FROM cost_daily")[0][0] == gpu

    # a restatement of source b (half its rows) moves b's days and leaves a's alone
    lines = second.read_text().splitlines(keepends=True)
    second.write_text("".join(lines[: len(lines) // 2]))
    assert load(focus_registry, warehouse, second, source="b").status == "succeeded"
    assert query(warehouse, ROLLUP) == query(warehouse, PER_DAY)
    assert query(warehouse, "SELECT count(*) FROM cost_daily WHERE source = 'a'") == [
        (sum(1 for r in rollup if r[1] == "a"),)
    ]

    # a failed load changes neither
    before = query(warehouse, ROLLUP)
    second.write_text(lines[0] + "not,a,focus,row\n")
    assert load(focus_registry, warehouse, second, source="b").status == "failed"
    assert query(warehouse, ROLLUP) == before == query(warehouse, PER_DAY)
