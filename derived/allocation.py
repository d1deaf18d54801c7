"""Chargeback of shared GPUs: ``gpu_allocation_hourly``, kept in step with bills and metrics.

A GPU-hour's cost is divided among what ran on it (Kubernetes pods and namespaces, MIG slices,
time-sliced or MPS workloads, processes) with the unallocated remainder shown (docs/sources/shared-gpus.md
GPUs*; the SQL and its conventions are in :mod:`derived.allocation_sql`).

Like attribution (:mod:`derived.attribution`), the table is a pure function of the warehouse:
every load that can change it recomputes the (resource, UTC day)s it touches inside its own
transaction, after attribution has resolved the GPU-hours:

* a cost load: the resource-days of the GPU usage lines it deletes and inserts (captured around the
  slice replace, so a restated bill also clears what the old lines paid for);
* a metrics load: the resource-days of the GPU-hours its slices held before and hold after;
* a change of a source's ``namespace_teams`` rules: every resource-day of that source's GPU-hours;
* a change of the ``[allocation]`` settings: everything.

Any allocation row of a touched day whose GPU-hour now belongs to another resource (or is gone)
also has its resource-day recomputed. So the table is the same whatever order bills, restatements
and metrics arrive in (tests/test_allocation_order.py).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

import duckdb

from gpufinops.derived import attribution, batching, carbon, gpu_lines
from gpufinops.derived.allocation_sql import US_PER_DAY, US_PER_HOUR, compute_sql
from gpufinops.derived.attribution import HOUR_SLICE
from gpufinops.derived.spec import Change
from gpufinops.derived.spec import Touched as Load
from gpufinops.kernel.options import Settings, option
from gpufinops.warehouse.queries.fragments import GPU_USAGE

log = logging.getLogger(__name__)

SCOPE = "_gpufinops_allocation_scope"  # the resource-hours a load touched
DAYS, HOURS = "_gpufinops_allocation_days", "_gpufinops_allocation_hours"  # what is recomputed: whole days, hours
CARBON_DAYS = "_gpufinops_carbon_days"  # the resource-days whose carbon rows follow (warehouse/carbon.recompute)
KEPT, WORKED = "_gpufinops_allocation_kept", "_gpufinops_allocation_worked"  # (the planning's steps)
BATCH_TABLES = "_gpufinops_allocation"  # the batches' temp tables are named after it (derived/batching.py)
BATCH_RESOURCE_DAYS = 2000  # resource-days allocated per statement (a 1,000-node fleet: two days)
UNALLOCATED_CHOICES = ("show", "spread")
MIG_WEIGHTS = ("compute", "memory", "max")


def _mig_weight(value: Any, key: str) -> str:
    if value not in MIG_WEIGHTS:
        raise ValueError(f"{key}: must be one of {', '.join(MIG_WEIGHTS)}, not {value!r}")
    return value


def _mps_hosts(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(h, str) and h and "'" not in h for h in value):
        raise ValueError(f'{key}: must be a list of host name patterns (globs, e.g. "gpu-mps-*")')
    return tuple(value)


@dataclass(frozen=True)
class AllocationSettings(Settings):
    """The ``[allocation]`` config section (``kernel.options``: each key declared once)."""

    unallocated: Literal["show", "spread"] = option(
        "show", "show: the resource's team carries its idle share; spread: Koku's rule"
    )
    mig_weight: str = option(
        "compute", "a MIG slice's weight: compute slices, memory slices, or max", check=_mig_weight
    )
    mps_hosts: tuple[str, ...] = option((), "glob patterns of hosts whose GPU sharing is MPS", check=_mps_hosts)

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> AllocationSettings:
        """Validated settings; a ValueError names the key and the allowed values."""
        return cls.parse(section, "allocation")

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("mig_weight", self.mig_weight),
            ("mps_hosts", json.dumps(list(self.mps_hosts))),
            ("unallocated", self.unallocated),
        ]

    def is_mps_host(self, host: str) -> bool:
        return any(fnmatch.fnmatchcase(host, pattern) for pattern in self.mps_hosts)


def stored_settings(con: duckdb.DuckDBPyConnection) -> AllocationSettings | None:
    rows = dict(con.execute("SELECT key, value FROM allocation_settings").fetchall())
    if not rows:
        return None
    return AllocationSettings(
        rows.get("unallocated", "show"),
        rows.get("mig_weight", "compute"),
        tuple(json.loads(rows.get("mps_hosts", "[]"))),
    )


def sync_settings(
    con: duckdb.DuckDBPyConnection, settings: AllocationSettings | None
) -> tuple[AllocationSettings, bool]:
    """(the settings to allocate with, whether they changed). ``None``: keep what the warehouse holds
    (a load started without the config allocates as the last configured run did)."""
    stored = stored_settings(con)
    if settings is None:
        return stored or AllocationSettings(), False
    if stored == settings:
        return settings, False
    con.execute("DELETE FROM allocation_settings")
    con.executemany("INSERT INTO allocation_settings VALUES (?, ?)", settings.rows())
    return settings, stored is not None or _has_rows(con)


def _has_rows(con: duckdb.DuckDBPyConnection) -> bool:
    return con.execute("SELECT count(*) FROM (SELECT 1 FROM gpu_allocation_hourly LIMIT 1)").fetchall()[0][0] > 0


# ---- the scope of a load -------------------------------------------------------------------------


def _start(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {SCOPE} (resource_id VARCHAR, hour_n BIGINT)")


def capture(con: duckdb.DuckDBPyConnection, table: str, where: str, params: list) -> None:
    """Remember the resource-hours the rows of ``table`` matching ``where`` bear on (called by the
    runner before a slice is deleted, and after cost rows are inserted)."""
    if table == "cost_line_items":
        _start(con)
        con.execute(
            f'INSERT INTO {SCOPE} SELECT DISTINCT c."ResourceId", epoch_us(c."ChargePeriodStart") // {US_PER_HOUR} '
            f'FROM cost_line_items c WHERE c."ResourceId" IS NOT NULL AND c."ChargeCategory" = \'Usage\' '
            f"AND {GPU_USAGE} AND {where}",
            params,
        )
    elif table in ("gpu_metrics_hourly", "gpu_workloads_hourly"):
        _start(con)
        con.execute(
            f"INSERT INTO {SCOPE} SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_HOUR} "
            f"FROM gpu_metrics_hourly WHERE resource_id IS NOT NULL AND {where}{_hours_bound(where, params)}",
            params,
        )


def _hours_bound(where: str, params: list) -> str:
    """`` AND hour`` within the hours an hourly slice names (``source = ? AND (HOUR_SLICE) IN (?, …)``), so
    that the scan reads only their row groups instead of formatting every row's hour; else nothing."""
    hours = attribution.slice_hours(params[1:]) if HOUR_SLICE in where and len(params) >= 2 else []
    return f" AND {attribution.hours_range_sql(hours)}" if hours else ""


def _capture_metrics(con: duckdb.DuckDBPyConnection, touched: attribution.Touched) -> None:
    """The resource-hours of the GPU-hours a load's metric slices hold now (attribution resolved)."""
    for table, source, slice_expr, slices in touched.metric_slices:
        if table != "gpu_metrics_hourly":
            continue
        placeholders = ", ".join("?" for _ in slices)
        where = f"source = ? AND ({slice_expr}) IN ({placeholders})" if slices else "source = ?"
        capture(con, table, where, [source, *slices])
    if touched.rule_sources:
        capture(con, "gpu_metrics_hourly", "list_contains(?::VARCHAR[], source)", [sorted(touched.rule_sources)])


def _span(con: duckdb.DuckDBPyConnection, table: str, key: str, per: int) -> tuple[int, int] | None:
    """The whole UTC days (epoch microseconds, end exclusive) the ``key`` numbers (days or hours) of
    ``table`` fall in; None when the table is empty. Bounding a scan by them lets zone maps skip the rest."""
    first, last = con.execute(f"SELECT min({key}), max({key}) FROM {table}").fetchall()[0]
    if first is None:
        return None
    return int(first) * per // US_PER_DAY * US_PER_DAY, (int(last) * per // US_PER_DAY + 1) * US_PER_DAY


def _between(column: str, span: tuple[int, int]) -> str:
    return f"{column} >= make_timestamptz({span[0]}) AND {column} < make_timestamptz({span[1]})"


def _capture_moved(con: duckdb.DuckDBPyConnection) -> None:
    """Allocation rows of the scope's days whose GPU-hour no longer belongs to their resource."""
    span = _span(con, SCOPE, "hour_n", US_PER_HOUR)
    if span is None:
        return
    con.execute(f"""
        INSERT INTO {SCOPE}
        SELECT DISTINCT a.resource_id, epoch_us(a.hour) // {US_PER_HOUR} FROM gpu_allocation_hourly a
        WHERE a.gpu_uuid IS NOT NULL AND {_between("a.hour", span)}
          AND epoch_us(a.hour) // {US_PER_DAY} IN (SELECT DISTINCT hour_n // 24 FROM {SCOPE})
          AND NOT EXISTS (SELECT 1 FROM gpu_metrics_hourly m
                          WHERE m.hour = a.hour AND m.gpu_uuid = a.gpu_uuid AND m.resource_id = a.resource_id
                            AND {_between("m.hour", span)})""")


def _everything(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {DAYS} AS
        SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_DAY} AS day_n FROM gpu_metrics_hourly
        WHERE resource_id IS NOT NULL
        UNION SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_DAY} FROM gpu_allocation_hourly""")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {HOURS} (resource_id VARCHAR, hour_n BIGINT)")


def _worked_sql(among: str, key: str, per: int, span: tuple[int, int]) -> str:
    """SELECT of the (resource_id, day_n) pairs of ``among`` (its ``key``: day or hour numbers, ``per``
    microseconds each) on which a workload ran: the rule that makes a resource-day allocated (the
    allocation's ``days``); ``span`` bounds the scans."""
    hour_of = f"epoch_us(m.hour) // {US_PER_HOUR}"
    return f"""
        SELECT DISTINCT m.resource_id, epoch_us(m.hour) // {US_PER_DAY} AS day_n FROM gpu_metrics_hourly m
        SEMI JOIN gpu_workloads_hourly w ON w.source = m.source AND epoch_us(w.hour) // {US_PER_HOUR} = {hour_of}
             AND w.gpu_uuid = m.gpu_uuid AND w.mig_instance IS NOT DISTINCT FROM m.mig_instance AND w.samples > 0
             AND {_between("w.hour", span)}
        SEMI JOIN {among} k ON k.resource_id = m.resource_id AND k.{key} = epoch_us(m.hour) // {per}
        WHERE m.gpu_uuid IS NOT NULL AND {_between("m.hour", span)}"""


def _plan(con: duckdb.DuckDBPyConnection, settings: AllocationSettings) -> None:
    """Split the scope's resource-hours into whole resource-days to recompute and single hours.

    A resource-hour's rows depend on its own bill, metrics and workloads, and on whether its
    resource-day is allocated at all (a workload ran on it that day); the spread rule divides a
    resource-day's idle cost by the whole day's use. So only the changed hours are recomputed of a
    resource-day that keeps rows outside them (it was allocated) and still has a workload (it still is),
    under ``unallocated = "show"``; every other touched resource-day is recomputed whole."""
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {HOURS} AS SELECT DISTINCT resource_id, hour_n FROM {SCOPE} "
        "WHERE resource_id IS NOT NULL"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {DAYS} AS SELECT DISTINCT resource_id, hour_n // 24 AS day_n FROM {HOURS}"
    )
    span = _span(con, HOURS, "hour_n", US_PER_HOUR)
    if settings.unallocated == "spread" or span is None:
        con.execute(f"DELETE FROM {HOURS}")
        return
    # the resource-days that keep allocation rows outside the changed hours, then those of them still worked on
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {KEPT} AS
        SELECT DISTINCT a.resource_id, epoch_us(a.hour) // {US_PER_DAY} AS day_n FROM gpu_allocation_hourly a
        SEMI JOIN {DAYS} d ON d.resource_id = a.resource_id AND d.day_n = epoch_us(a.hour) // {US_PER_DAY}
        ANTI JOIN {HOURS} h ON h.resource_id = a.resource_id AND h.hour_n = epoch_us(a.hour) // {US_PER_HOUR}
        WHERE {_between("a.hour", span)}""")

    # the changed hours first (a workload there settles it), the rest of the day only where none was
    changed = (
        f"(SELECT h.* FROM {HOURS} h SEMI JOIN {KEPT} k ON k.resource_id = h.resource_id AND k.day_n = h.hour_n // 24)"
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE {WORKED} AS {_worked_sql(changed, 'hour_n', US_PER_HOUR, span)}")
    rest = f"(SELECT * FROM {KEPT} EXCEPT SELECT * FROM {WORKED})"
    con.execute(f"INSERT INTO {WORKED} {_worked_sql(rest, 'day_n', US_PER_DAY, span)}")
    con.execute(
        f"DELETE FROM {HOURS} h WHERE NOT EXISTS (SELECT 1 FROM {WORKED} k "
        "WHERE k.resource_id = h.resource_id AND k.day_n = h.hour_n // 24)"
    )
    con.execute(
        f"DELETE FROM {DAYS} d WHERE EXISTS (SELECT 1 FROM {WORKED} k "
        "WHERE k.resource_id = d.resource_id AND k.day_n = d.day_n)"
    )


# ---- recompute -----------------------------------------------------------------------------------


def recompute(con: duckdb.DuckDBPyConnection, settings: AllocationSettings) -> int:
    """Replace the allocation of every resource-day in the days table and every resource-hour in the
    hours table (:func:`_plan`, :func:`_everything`); returns the rows written.

    Resource-days are independent (the spread rule works within one), so they are allocated in batches
    of ``BATCH_RESOURCE_DAYS`` in day order (the hours likewise, 24 to a resource-day): memory stays
    bounded by a batch, and each batch's scans are bounded by its days (the tables' zone maps skip the rest)."""
    for table, per, grain_n in ((DAYS, US_PER_DAY, "day_n"), (HOURS, US_PER_HOUR, "hour_n")):
        span = _span(con, table, grain_n, per)
        if span is not None:
            con.execute(
                f"DELETE FROM gpu_allocation_hourly a WHERE {_between('a.hour', span)} AND EXISTS ("
                f"SELECT 1 FROM {table} s WHERE s.resource_id = a.resource_id AND s.{grain_n} = epoch_us(a.hour) // {per})"
            )
    # The carbon rows follow a superset of the allocation's resource-days: the bill's GPU lines of those
    # are read once, for every batch of the allocation and for the carbon rows (derived/gpu_lines.py).
    _carbon_days(con)
    lines = gpu_lines.capture(con, CARBON_DAYS)
    # Row order means nothing to the allocation (its ids are internal, its ties break on content): keeping
    # insertion order made the statement four times slower (bench/bench_allocation.py).
    ordered = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("SET preserve_insertion_order = false")
    try:
        written = _insert_batches(con, settings, DAYS, "day", BATCH_RESOURCE_DAYS, lines)
        written += _insert_batches(con, settings, HOURS, "hour", BATCH_RESOURCE_DAYS * 24, lines)
    finally:  # (an aborted load's transaction refuses statements: the caller rolls it back and closes)
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET preserve_insertion_order = {'true' if ordered else 'false'}")
    carbon.recompute(con, CARBON_DAYS, lines=lines)
    gpu_lines.drop(con)
    for table in (DAYS, HOURS, KEPT, WORKED, CARBON_DAYS):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return written


def _carbon_days(con: duckdb.DuckDBPyConnection) -> None:
    """Energy and emissions (derived/carbon.py) follow every resource-day whose allocation was rebuilt or
    whose hours a load touched (a day without workloads has carbon rows too, from its metrics alone)."""
    days = [f"SELECT resource_id, day_n FROM {DAYS}", f"SELECT resource_id, hour_n // 24 FROM {HOURS}"]
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [SCOPE]).fetchall()[0][0]:
        days.append(f"SELECT resource_id, hour_n // 24 FROM {SCOPE}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {CARBON_DAYS} AS SELECT DISTINCT * FROM ({' UNION ALL '.join(days)})")


def _insert_batches(
    con: duckdb.DuckDBPyConnection, settings: AllocationSettings, table: str, grain: str, size: int, lines: str
) -> int:
    """Allocate the pairs of ``table`` (``grain``: whole resource-days, or single hours) ``size`` at a time.

    Only the pairs that can have rows are batched (the others' rows were deleted): a resource-day a workload
    ran on (most of a fleet is never shared), and a pair the bill has a GPU line in (metrics that arrive
    before their bill allocate nothing: the bill's load allocates them, so the work is done once in either
    order)."""
    key = f"{grain}_n"
    per = US_PER_DAY if grain == "day" else US_PER_HOUR
    source = table
    if grain == "day" and (span := _span(con, table, key, per)):
        source = f"({_worked_sql(table, key, US_PER_DAY, span)})"
    billed = (
        f'(SELECT * FROM {source} t SEMI JOIN {lines} c ON c."ResourceId" = t.resource_id '
        f'AND epoch_us(c."ChargePeriodStart") // {per} = t.{key})'
    )
    written = 0
    for part, days in batching.batches(con, billed, key, size, name=BATCH_TABLES):
        sql = compute_sql(
            part,
            lines=lines,
            mig_weight=settings.mig_weight,
            spread=settings.unallocated == "spread",
            mps_hosts=list(settings.mps_hosts),
            days=days,
            grain=grain,
        )
        written += int(con.execute(f"INSERT INTO gpu_allocation_hourly BY NAME {sql}").fetchall()[0][0])
    return written


def apply(
    con: duckdb.DuckDBPyConnection, touched: attribution.Touched, settings: AllocationSettings | None = None
) -> int:
    """Recompute what a load's changes touch; inside the load's transaction, after attribution."""
    settings, changed = sync_settings(con, settings)
    _start(con)
    if changed:
        log.info("allocation: [allocation] settings changed: reallocating every resource-day")
        _everything(con)
    else:
        _capture_metrics(con, touched)
        if not con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {SCOPE} LIMIT 1)").fetchall()[0][0]:
            con.execute(f"DROP TABLE IF EXISTS {SCOPE}")
            return 0
        _capture_moved(con)
        _plan(con, settings)
    written = recompute(con, settings)  # a failure aborts the load's transaction, which drops the scope too
    con.execute(f"DROP TABLE IF EXISTS {SCOPE}")
    if written:
        log.info("allocation: %d allocation rows written", written)
    return written


def configure(warehouse_path, settings: AllocationSettings | None, *, memory_limit: str | None = None) -> bool:
    """Store the configured settings; when they changed, reallocate everything in one transaction
    (run before a job's loads, so a changed ``[allocation]`` applies even when no source has new data)."""
    from gpufinops.warehouse import db

    if settings is None:  # no section: the loads allocate with the settings the warehouse holds
        return False

    with db.transaction(warehouse_path, memory_limit=memory_limit) as con:
        stored = stored_settings(con)
        changed = stored != settings and (stored is not None or _has_rows(con))
        if changed:
            reallocate_all(con, settings)
        elif stored != settings:
            sync_settings(con, settings)
    return changed


def reallocate_all(con: duckdb.DuckDBPyConnection, settings: AllocationSettings | None = None) -> int:
    """Recompute the whole table (a repair, or after changing the settings outside a load)."""
    settings, _ = sync_settings(con, settings)
    _start(con)
    _everything(con)
    written = recompute(con, settings)
    con.execute(f"DROP TABLE IF EXISTS {SCOPE}")
    return written


def capture_change(con: duckdb.DuckDBPyConnection, change: Change, touched: Load) -> None:
    """The registry's capture: the metrics' resource-hours are read after attribution resolved them (apply)."""
    if change.where is not None and (not change.inserted or change.table == "cost_line_items"):
        capture(con, change.table, change.where, change.params)  # what the rows pay for / measure


def apply_load(con: duckdb.DuckDBPyConnection, touched: Load) -> int:
    return apply(con, attribution.notes(touched))  # with the [allocation] settings the warehouse stores
