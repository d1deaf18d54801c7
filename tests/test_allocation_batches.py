"""The allocation's and carbon rows' batches: any batch size gives the same rows, and the bill is read once.

``allocation.recompute`` allocates resource-days in batches (memory stays bounded by a batch), only the
resource-days a workload ran on and the bill has a GPU line in, and ``carbon.recompute`` writes the carbon
rows that follow in batches too (derived/batching.py); the bill's GPU lines of the whole scope are read
from ``cost_line_items`` once (derived/gpu_lines.py) for every batch of both, because a bill is not
ordered by time and each scan of it reads every row group.
"""

from __future__ import annotations

import math
import random
from decimal import Decimal

import pytest

from gpufinops.derived import allocation, carbon
from gpufinops.warehouse import db
from tests.allocation_fleet import Fleet, GpuHour, Line, Work, hourly_lines
from tests.test_allocation import random_fleet

TABLES = ("gpu_allocation_hourly", "carbon_hourly")


class Counting:
    """A connection that counts the statements reading the bill and the allocation statements it runs (the
    rest passes through)."""

    def __init__(self, con) -> None:
        self.con, self.bill_reads, self.allocations = con, 0, 0

    def execute(self, sql, *args, **kwargs):
        text = str(sql).lstrip()
        if "cost_line_items" in text and not text.upper().startswith("DELETE"):
            self.bill_reads += 1
        self.allocations += text.startswith("INSERT INTO gpu_allocation_hourly")
        return self.con.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.con, name)


def fleet_of_days(rng: random.Random, days: int = 4) -> Fleet:
    """Random shared nodes over several days (a random_fleet a day, each shifted by a day: its up to 30
    hours overlap the next day's first ones), beside a VM no workload ever ran on (billed and measured:
    carbon rows, no allocation rows)."""
    fleet = Fleet()
    for day in range(days):
        part = random_fleet(rng)
        fleet.lines += [Line(**{**vars(x), "hour": x.hour + 24 * day}) for x in part.lines]
        fleet.gpu_hours += [GpuHour(**{**vars(x), "hour": x.hour + 24 * day}) for x in part.gpu_hours]
        fleet.work += [Work(**{**vars(x), "hour": x.hour + 24 * day}) for x in part.work]
    for hour, cost in enumerate(hourly_lines(Decimal("48"), 24 * days)):
        fleet.lines.append(Line("i-vm", hour, cost, team="web"))
        fleet.gpu_hours.append(GpuHour("i-vm", hour, "GPU-vm", host="vm"))
    return fleet


def snapshot(con, spread: bool) -> dict[str, list[tuple]]:
    """Both tables' rows, each split into its exact part and its approximate part (sorted by the exact one).
    Exact: every key and, but under ``spread``, the money. Approximate: the DOUBLEs (energy, emissions,
    shares), whose sums' order follows the batch's scan, and under ``spread`` the cost, whose fraction comes
    from DOUBLE sums over its resource-day (it may move by 1e-14 USD between batch sizes; each resource-hour
    still sums exactly, as test_allocation checks)."""
    out = {}
    for t in TABLES:
        columns = con.execute(f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '{t}'")
        loose = {
            name for name, kind in columns.fetchall() if kind == "DOUBLE" or (spread and kind.startswith("DECIMAL"))
        }
        names = [d[0] for d in con.execute(f"SELECT * FROM {t} LIMIT 0").description]
        exact = [n for n in names if n not in loose]
        rows = con.execute(f"SELECT {', '.join(exact + sorted(loose))} FROM {t} ORDER BY ALL").fetchall()
        out[t] = [(r[: len(exact)], r[len(exact) :]) for r in rows]
    return out


def same(a: dict[str, list[tuple]], b: dict[str, list[tuple]]) -> bool:
    def close(x, y) -> bool:
        if x is None or y is None:
            return x is y
        return math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=1e-12)

    return all(
        len(a[t]) == len(b[t])
        and all(ka == kb and all(map(close, va, vb)) for (ka, va), (kb, vb) in zip(a[t], b[t], strict=True))
        for t in TABLES
    )


@pytest.mark.parametrize("spread", [False, True])
def test_any_batch_size_gives_the_same_rows_and_reads_the_bill_once(warehouse, monkeypatch, spread):
    settings = allocation.AllocationSettings(unallocated="spread" if spread else "show")
    rng = random.Random(7)
    with db.writer(warehouse) as con:
        for _ in range(3):
            for table in ("cost_line_items", "gpu_metrics_hourly", "gpu_workloads_hourly"):
                con.execute(f"DELETE FROM {table}")
            fleet_of_days(rng).insert(con)
            results = {}
            for size in (1, 3, allocation.BATCH_RESOURCE_DAYS):
                monkeypatch.setattr(allocation, "BATCH_RESOURCE_DAYS", size)
                monkeypatch.setattr(carbon, "BATCH_RESOURCE_DAYS", size)
                counting = Counting(con)
                allocation.reallocate_all(counting, settings)
                results[size] = snapshot(con, spread)
                # one read of the bill into the scope's GPU lines, however many batches (1: one per resource-day)
                assert counting.bill_reads == 1, size
            assert same(results[1], results[3]) and same(results[1], results[allocation.BATCH_RESOURCE_DAYS])
            rows = [exact for exact, _ in results[1]["gpu_allocation_hourly"]]
            assert rows and not any(r[1] == "i-vm" for r in rows)  # the VM no workload ran on: not allocated
            assert any(exact[1] == "i-vm" for exact, _ in results[1]["carbon_hourly"])  # but its carbon rows follow


def test_metrics_before_their_bill_allocate_nothing_until_it_arrives(warehouse):
    """Resource-days with workloads but no GPU line yet are not run through the allocation (it could write
    no row for them): the bill's load allocates them, so the work is done once whichever arrives first."""
    fleet = fleet_of_days(random.Random(3), days=2)
    bill, fleet.lines = fleet.lines, []
    with db.writer(warehouse) as con:
        fleet.insert(con)
        counting = Counting(con)
        allocation.reallocate_all(counting, allocation.AllocationSettings())
        assert counting.allocations == 0
        assert con.execute("SELECT count(*) FROM gpu_allocation_hourly").fetchall() == [(0,)]
        fleet.lines, fleet.gpu_hours, fleet.work = bill, [], []
        fleet.insert(con)
        counting = Counting(con)
        allocation.reallocate_all(counting, allocation.AllocationSettings())
        assert counting.allocations >= 1
        assert con.execute("SELECT count(*) FROM gpu_allocation_hourly").fetchall()[0][0] > 0
