"""The allocation a load leaves is the allocation of the whole warehouse, however little it recomputes.

A load recomputes the resource-hours it changed, and whole resource-days only where the day's
allocation can change as a whole (the day gains its first workload or loses its last, or
``unallocated = "spread"`` divides the day's idle cost by the day's use). Each step below changes the
warehouse as a metrics load would (its slice captured before and after, as the runner does), lets
:func:`allocation.apply` recompute, and compares every row with a recomputation of everything.
"""

from __future__ import annotations

import pytest

from gpufinops.derived import allocation, attribution
from gpufinops.ingest.metrics.metrics_store import HOUR_SLICE_SQL
from gpufinops.warehouse import db

NODES, GPUS, HOURS, PODS = 3, 2, 48, 3
START = "TIMESTAMPTZ '2026-10-01 00:00:00+00'"
ALL_ROWS = "SELECT * FROM gpu_allocation_hourly ORDER BY ALL"


def _fill(con) -> None:
    hour = f"{START} + to_hours(h)"
    con.execute(f"""INSERT INTO cost_line_items ("ResourceId", "x_Team", "ChargePeriodStart", "ChargePeriodEnd",
          "ChargeCategory", "ProviderName", "ServiceName", "x_GpuCount", "x_GpuModel", "EffectiveCost", "BilledCost")
        SELECT printf('i-%d', n), 'owner', {hour}, {hour} + INTERVAL 1 HOUR, 'Usage', 'AWS', 'EC2', {GPUS + 1}, 'H100',
               CAST(10.01 AS DECIMAL(38, 15)), CAST(10.01 AS DECIMAL(38, 15))
        FROM range({NODES}) a(n), range({HOURS}) b(h)""")
    con.execute(f"""INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, samples, source)
        SELECT {hour}, printf('GPU-%d-%d', n, g), 'H100', printf('node-%d', n), printf('i-%d', n), 60, 'dcgm'
        FROM range({NODES}) a(n), range({GPUS}) c(g), range({HOURS}) b(h)""")
    shared = "(n + g) % 3 = 1"  # some GPUs time-sliced by three pods at once, the others run them in turn
    con.execute(f"""INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, host, namespace, pod, samples, occupied_samples,
          sharing, sm_active_mean, source)
        SELECT {hour}, printf('GPU-%d-%d', n, g), printf('node-%d', n), printf('ns-%d', (n + p) % 4),
               printf('pod-%d-%d-%d', n, g, p), CASE WHEN {shared} THEN 60 ELSE 7 + 5 * p END,
               CASE WHEN {shared} THEN 60 ELSE 51 END, CASE WHEN {shared} THEN 'timeslice' END, 0.1 * (p + 1), 'dcgm'
        FROM range({NODES}) a(n), range({GPUS}) c(g), range({HOURS}) b(h), range({PODS}) d(p)""")


def _step(con, hours: list[int], change: str, settings: allocation.AllocationSettings) -> int:
    """Change the warehouse as a metrics load of ``hours`` would; the rows the allocation wrote."""
    values = [f"2026-10-{1 + h // 24:02d}T{h % 24:02d}" for h in hours]
    where = f"source = ? AND ({HOUR_SLICE_SQL}) IN ({', '.join('?' for _ in values)})"
    allocation.capture(con, "gpu_metrics_hourly", where, ["dcgm", *values])
    con.execute(change)
    touched = attribution.Touched(metric_slices=[("gpu_metrics_hourly", "dcgm", HOUR_SLICE_SQL, values)])
    written = allocation.apply(con, touched, settings)
    incremental = con.execute(ALL_ROWS).fetchall()
    allocation.reallocate_all(con, settings)
    assert incremental == con.execute(ALL_ROWS).fetchall()
    return written


def _at(h: int) -> str:
    return f"{START} + to_hours({h})"


@pytest.mark.parametrize("spread", [False, True])
def test_every_load_leaves_the_allocation_of_the_whole_warehouse(warehouse, spread):
    settings = allocation.AllocationSettings(unallocated="spread" if spread else "show")
    with db.writer(warehouse) as con:
        _fill(con)
        allocation.reallocate_all(con, settings)
        one_hour = con.execute(f"SELECT count(*) FROM gpu_allocation_hourly WHERE hour = {_at(47)}").fetchall()[0][0]
        # a pod leaves a GPU in the last hour: only that hour is recomputed (the whole day under spread)
        written = _step(
            con, [47], f"DELETE FROM gpu_workloads_hourly WHERE hour = {_at(47)} AND pod = 'pod-0-0-0'", settings
        )
        assert written == (
            con.execute(f"SELECT count(*) FROM gpu_allocation_hourly WHERE hour >= {_at(24)}").fetchall()[0][0]
            if spread
            else one_hour - 1
        )
        _step(
            con, [5, 47], f"UPDATE gpu_workloads_hourly SET samples = 3 WHERE hour IN ({_at(5)}, {_at(47)})", settings
        )
        # node 1 loses its workloads on day one but in hour 3, then in hour 3 too: the day is not allocated
        _step(
            con,
            [h for h in range(24) if h != 3],
            f"DELETE FROM gpu_workloads_hourly WHERE host = 'node-1' AND hour < {_at(24)} AND hour <> {_at(3)}",
            settings,
        )
        _step(con, [3], f"DELETE FROM gpu_workloads_hourly WHERE host = 'node-1' AND hour = {_at(3)}", settings)
        assert not con.execute(
            f"SELECT count(*) FROM gpu_allocation_hourly WHERE resource_id = 'i-1' AND hour < {_at(24)}"
        ).fetchall()[0][0]
        # a workload comes back in hour 10: every billed hour of the day is allocated again
        _step(
            con,
            [10],
            f"""INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, host, namespace, pod, samples,
            occupied_samples, source) VALUES ({_at(10)}, 'GPU-1-0', 'node-1', 'ns-back', 'pod-back', 30, 30, 'dcgm')""",
            settings,
        )
        assert (
            con.execute(
                f"SELECT count(DISTINCT hour) FROM gpu_allocation_hourly WHERE resource_id = 'i-1' AND hour < {_at(24)}"
            ).fetchall()[0][0]
            == 24
        )
        # a GPU-hour moves to another node
        _step(
            con,
            [30],
            f"UPDATE gpu_metrics_hourly SET resource_id = 'i-2' WHERE hour = {_at(30)} AND gpu_uuid = 'GPU-0-1'",
            settings,
        )
        # every resource-hour still sums to its bill exactly
        assert (
            con.execute(
                "SELECT count(*) FROM (SELECT resource_id, hour, sum(cost_usd) AS c "
                "FROM gpu_allocation_hourly GROUP BY ALL) WHERE c <> 10.01"
            ).fetchall()[0][0]
            == 0
        )


def test_the_hourly_slice_is_the_metrics_sources_own():
    assert allocation.HOUR_SLICE == HOUR_SLICE_SQL
    where = f"source = ? AND ({HOUR_SLICE_SQL}) IN (?, ?)"
    bound = allocation._hours_bound(where, ["dcgm", "2026-10-02T23", "2026-10-02T05"])
    assert "make_timestamptz(1790917200000000)" in bound and "make_timestamptz(1790985600000000)" in bound
    assert allocation._hours_bound(where, ["dcgm", "2026-10-02", "x"]) == ""  # not hours: no bound, a plain scan
    assert allocation._hours_bound("source = ?", ["dcgm"]) == ""
