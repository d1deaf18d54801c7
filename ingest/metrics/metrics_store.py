"""GPU metric samples beside the warehouse, the hourly rollup and its attribution to billing.

Shared by the utilisation ingestors (``dcgm_exporter``, ``prometheus``, ``nvidia_smi_csv``):

* **The sample store.** Minute samples live as Parquet beside the database, partitioned by day:
  ``<warehouse dir>/samples/<source>/day=YYYY-MM-DD/<run id>.parquet`` (written under a temporary
  name, then renamed, so a kill never leaves half a file). A run adds one file per day it touched
  (one sample per GPU and time in it); a day holding many files is compacted into one. The hours
  spanned by files added since the last rollup are rolled up again (a day whose files were
  replaced, whole), so a crash between writing samples and loading them heals itself.
* **The hourly rollup** (``hourly_sql``): a sample seen twice (a re-scrape, overlapping files)
  counts once (files whose time ranges overlap are de-duplicated), order does not matter (whole
  hours are recomputed from every file of their day), and an hour without samples has no row: a
  gap is unknown, never zero.
* **Attribution** (``ingest.metrics.metrics_attribution.attributed_sql``): each GPU-hour is matched to a billed ``ResourceId`` in
  this order: (1) an explicit resource label (``resource_label``, default ``instance_id``) whose
  value is a billed ResourceId; (2) the host: a billed ResourceId equal to it, else the
  configured ``resource_map``; (3) the Kubernetes node's provider id (``aws:///zone/i-…`` →
  ``i-…``; ``gce://project/zone/name`` → the Compute Engine resource path) when billed. The team
  is the configured ``namespace_teams`` entry for the hour's namespace, else the billed resource's
  latest ``x_Team``. Hours that match nothing keep ``resource_id`` NULL and are counted by
  ``warehouse.queries.unattributed_gpu_hours``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import IngestContext, IngestError
from gpufinops.ingest.metrics.rollup_sql import MEAN as MEAN  # the rollup's SQL, importable from here too
from gpufinops.ingest.metrics.rollup_sql import attributed_days_sql as attributed_days_sql
from gpufinops.ingest.metrics.rollup_sql import attributed_tables_sql as attributed_tables_sql
from gpufinops.ingest.metrics.rollup_sql import hour_number_sql as hour_number_sql
from gpufinops.ingest.metrics.rollup_sql import hour_sql as hour_sql
from gpufinops.ingest.metrics.rollup_sql import hourly_sql as hourly_sql
from gpufinops.ingest.metrics.rollup_sql import hourly_table as hourly_table
from gpufinops.ingest.metrics.rollup_sql import merge_tables as merge_tables
from gpufinops.ingest.metrics.rollup_sql import rollup_sql as rollup_sql
from gpufinops.warehouse.column_types import UTC_TS, sql_type

log = logging.getLogger(__name__)

# One row per GPU (or MIG slice) per sample time. Metric columns are NULL when not exported.
SAMPLE_SCHEMA = pa.schema(
    [
        ("ts", UTC_TS),
        ("gpu_uuid", pa.string()),
        ("mig_instance", pa.string()),
        ("gpu_index", pa.string()),
        ("name", pa.string()),
        ("host", pa.string()),
        ("resource_hint", pa.string()),
        ("provider_id", pa.string()),
        ("namespace", pa.string()),
        ("pod", pa.string()),
        ("container", pa.string()),
        ("util", pa.float64()),
        ("gr_active", pa.float64()),
        ("sm_active", pa.float64()),
        ("tensor_active", pa.float64()),
        ("fp16_active", pa.float64()),
        ("fp32_active", pa.float64()),
        ("dram_active", pa.float64()),
        # DCGM profiling fields (ratios 0-1; PCIe / NVLink in bytes per second)
        ("sm_occupancy", pa.float64()),
        ("fp64_active", pa.float64()),
        ("pcie_tx_bps", pa.float64()),
        ("pcie_rx_bps", pa.float64()),
        ("nvlink_tx_bps", pa.float64()),
        ("nvlink_rx_bps", pa.float64()),
        ("mem_used_mib", pa.float64()),
        ("mem_free_mib", pa.float64()),
        ("mem_reserved_mib", pa.float64()),
        ("mem_total_mib", pa.float64()),
        ("power_w", pa.float64()),
        # dcgm-exporter's `vgpu` label (--kubernetes-virtual-gpus): the GPU is shared by time-slicing or MPS
        ("vgpu", pa.string()),
    ]
)
WORKLOAD_COLUMNS = ("namespace", "pod", "container")
# gpu_metrics_hourly as the hourly metrics sources load it: unique per (source, hour, GPU, MIG slice),
# replaced one UTC hour at a time; HOUR_FORMAT writes an hour as HOUR_SLICE_SQL renders it.
GPU_HOURLY_KEY = ("source", "hour", "gpu_uuid", "mig_instance")
HOUR_FORMAT = "%Y-%m-%dT%H"
HOUR_SLICE_SQL = f"strftime(\"hour\" AT TIME ZONE 'UTC', '{HOUR_FORMAT}')"
COMPACT_AFTER_FILES = 32
# Parquet key-value metadata of a sample file in which one GPU (or slice) has several rows at one time
# (one per workload sharing it): the rollup must then group per time (see ``needs_dedup``).
SHARED_KEY = b"gpufinops.shared"


# ---- the store -----------------------------------------------------------------------------------


def samples_dir(ctx: IngestContext) -> Path:
    """``<warehouse dir>/samples/<source>``, created."""
    row = ctx.con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()[0]
    if not row or not row[0]:
        raise IngestError(f"{ctx.source}: the warehouse is not a file, so raw samples have nowhere to go")
    folder = Path(row[0]).resolve().parent / "samples" / ctx.source
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _atomic_write(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if _shared(table):
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), SHARED_KEY: b"1"})
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def _shared(samples: pa.Table) -> bool:
    """Whether a GPU (or slice) has more than one row at one time: workloads sharing it (time-slicing)."""
    if samples.num_rows == 0 or not any(samples.column(c).null_count < samples.num_rows for c in WORKLOAD_COLUMNS):
        return False  # no workload labels: one row per GPU and time by construction
    keys = (
        samples.select(["ts", "gpu_uuid", "mig_instance"])
        .group_by(["ts", "gpu_uuid", "mig_instance"], use_threads=False)
        .aggregate([])
    )
    return keys.num_rows < samples.num_rows


def write_samples(folder: Path, samples: pa.Table, run_id: str) -> list[str]:
    """Append ``samples`` (SAMPLE_SCHEMA) to the day partitions; returns the days written."""
    if samples.num_rows == 0:
        return []
    samples = samples.select(SAMPLE_SCHEMA.names).cast(SAMPLE_SCHEMA)
    day_numbers = pc.divide(samples.column("ts").cast(pa.int64()), 86_400_000_000)  # us since the epoch, UTC
    samples = samples.append_column("_day", day_numbers).sort_by([("_day", "ascending"), ("ts", "ascending")])
    runs = pc.run_end_encode(samples.column("_day").combine_chunks())
    days, start = [], 0
    for day_number, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist()):
        day = (datetime(1970, 1, 1) + timedelta(days=day_number)).strftime("%Y-%m-%d")
        day_dir = folder / f"day={day}"
        day_dir.mkdir(exist_ok=True)
        _atomic_write(samples.slice(start, end - start).drop_columns(["_day"]), day_dir / f"{run_id}.parquet")
        days.append(day)
        start = end
    return days


def day_files(folder: Path, day: str) -> list[str]:
    return sorted(str(p) for p in (folder / f"day={day}").glob("*.parquet"))


def partitions(folder: Path) -> dict[str, list]:
    """day -> fingerprint (file names and sizes) of every day partition in the store."""
    out = {}
    for day_dir in sorted(folder.glob("day=*")):
        files = sorted(day_dir.glob("*.parquet"))
        if files:
            out[day_dir.name[4:]] = [[f.name, f.stat().st_size] for f in files]
    return out


def merge_sql(relation: str) -> str:
    """One sample per (time, GPU, slice, workload) from ``relation``: a time seen twice keeps each field's
    largest value; workloads sharing a GPU at one time (time-slicing, MPS) keep a row each."""
    keys = ("ts", "gpu_uuid", "mig_instance") + WORKLOAD_COLUMNS
    fields = ", ".join(f"max({name}) AS {name}" if name not in keys else name for name in SAMPLE_SCHEMA.names)
    return f"SELECT {fields} FROM {relation} GROUP BY {', '.join(keys)} ORDER BY ts"


def compact(folder: Path, days: Iterable[str], run_id: str) -> None:
    """Merge each of ``days`` holding many files into one file, one sample per time and GPU."""
    for day in days:
        files = day_files(folder, day)
        if len(files) <= COMPACT_AFTER_FILES:
            continue
        con = duckdb.connect()
        try:
            merged = con.sql(merge_sql(f"read_parquet({_list(files)}, hive_partitioning = false)")).to_arrow_table()
        finally:
            con.close()
        _atomic_write(merged.cast(SAMPLE_SCHEMA), folder / f"day={day}" / f"compact-{run_id}.parquet")
        for path in files:  # the merged file is in place first: a kill here leaves duplicates, not gaps
            os.unlink(path)
        log.info("compacted %d sample files of %s into one", len(files), day)


def _list(files: list[str]) -> str:
    return "[" + ", ".join(sql_literal(f) for f in files) + "]"


def _time_range(path: str) -> tuple[Any, Any] | None:
    """(min ts, max ts) of a sample file from its Parquet statistics; None when they are missing."""
    meta = pq.read_metadata(path)
    column = meta.schema.names.index("ts")
    lows, highs = [], []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else None


def needs_dedup(files: list[str]) -> bool:
    """Whether the rollup of a day's files must group samples per time: files that may hold the same
    times, or a file where workloads share a GPU (several rows per GPU and time)."""
    return may_overlap(files) or any(_shared_file(f) for f in files)


def _shared_file(path: str) -> bool:
    return (pq.read_metadata(path).metadata or {}).get(SHARED_KEY) == b"1"


def dedup_hours(files: list[str], hours: list[str]) -> set[str]:
    """The hours of ``hours`` (one day's, 'YYYY-MM-DDTHH') whose samples the rollup must group per time.

    A sample can be stored twice only at a time two files both hold, so only the hours where two files'
    time ranges intersect need the grouping, and the hours a file of shared GPUs spans (several rows per
    GPU and time); every other hour's samples are unique (each file is unique in itself). A re-scrape of
    one minute beside a day's file thus groups that minute's hour, not the day. A file without time
    statistics makes every hour need it, as ``needs_dedup`` says of the whole day."""
    if not files or not needs_dedup(files):
        return set()
    spans = [_time_range(f) for f in files]
    if len(files) > 1 and any(span is None for span in spans):
        return set(hours)
    found: set[str] = set()
    for i, (path, span) in enumerate(zip(files, spans)):
        if _shared_file(path):
            if span is None:
                return set(hours)
            found.update(_hour_range(*(_utc(t) for t in span)))
        for other in spans[i + 1 :]:
            assert span is not None and other is not None  # (two or more files: every span is known)
            start, end = max(span[0], other[0]), min(span[1], other[1])
            if start <= end:
                found.update(_hour_range(_utc(start), _utc(end)))
    return found & set(hours)


def rollup_parts(folder: Path, day: str, hours: list[str]) -> list[tuple[list[str], bool]]:
    """One day's planned hours as (hours, deduplicate) parts: the hours whose samples are unique rolled
    up without the per-time grouping (one pass), the others (``dedup_hours``) with it."""
    grouped = dedup_hours(day_files(folder, day), hours)
    parts = [(sorted(set(hours) - grouped), False), (sorted(grouped), True)]
    return [(part, deduplicate) for part, deduplicate in parts if part]


# The samples one rollup statement groups at most: about a day of a 10,000-GPU fleet, what one statement
# held when the rollup went a day at a time (the p95 keeps every value of every GPU-hour in memory).
BATCH_SAMPLES = 16_000_000


def _samples_in(files: list[str]) -> int:
    return sum(pq.read_metadata(f).num_rows for f in files)


def rollup_statements(folder: Path, plan: dict[str, list[str]]) -> list[tuple[dict[str, list[str]], bool]]:
    """The plan (day -> hours) as the rollup's statements, (day -> hours, deduplicate): the hours whose
    samples are unique of consecutive days together, up to BATCH_SAMPLES a statement (one scan of
    several days' files, in parallel over all their row groups), and each day's hours that group
    samples per time (``rollup_parts``) on their own."""
    statements: list[tuple[dict[str, list[str]], bool]] = []
    batch: dict[str, list[str]] = {}
    size = 0
    for day, hours in plan.items():
        for part, deduplicate in rollup_parts(folder, day, hours):
            if deduplicate:
                statements.append(({day: part}, True))
                continue
            samples = _samples_in(day_files(folder, day))
            if batch and size + samples > BATCH_SAMPLES:
                statements.append((batch, False))
                batch, size = {}, 0
            batch[day] = part
            size += samples
    if batch:
        statements.append((batch, False))
    return statements


def may_overlap(files: list[str]) -> bool:
    """Whether two of a day's files may hold the same sample times (each file is unique in itself)."""
    if len(files) < 2:
        return False
    found = [_time_range(f) for f in files]
    ranges = sorted(r for r in found if r is not None)
    if len(ranges) < len(found):
        return True
    return any(later[0] <= earlier[1] for earlier, later in zip(ranges, ranges[1:]))


def _hour_range(start: datetime, end: datetime) -> list[str]:
    hours, hour = [], start.replace(minute=0, second=0, microsecond=0)
    while hour <= end:
        hours.append(hour.strftime(HOUR_FORMAT))
        hour += timedelta(hours=1)
    return hours


def _whole_day(day: str) -> list[str]:
    return [f"{day}T{h:02d}" for h in range(24)]


def plan_rollup(folder: Path, previous: dict[str, list]) -> tuple[dict[str, list], dict[str, list[str]]]:
    """(the store's partitions, day -> hours to roll up again) since the partitions in ``previous``.

    A day whose files were only added rolls up the hours its new files span (from their Parquet
    statistics); a day seen for the first time, or whose files were replaced or removed (a
    compaction), rolls up whole; a day gone from the store has its hours deleted.
    """
    stored = partitions(folder)
    plan: dict[str, list[str]] = {}
    for day, files in stored.items():
        before = {name: size for name, size in previous.get(day) or []}
        now = {name: size for name, size in files}
        if before == now:
            continue
        if not before or any(now.get(name) != size for name, size in before.items()):
            plan[day] = _whole_day(day)
            continue
        hours: set[str] = set()
        for name in sorted(set(now) - set(before)):
            span = _time_range(str(folder / f"day={day}" / name))
            if span is None:
                hours = set(_whole_day(day))
                break
            hours.update(h for h in _hour_range(*(_utc(t) for t in span)) if h.startswith(day))
        plan[day] = sorted(hours)
    for day in set(previous) - set(stored):
        plan[day] = _whole_day(day)
    return stored, {day: hours for day, hours in sorted(plan.items()) if hours}


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _runs(hours: list[str]) -> list[tuple[str, str]]:
    """Sorted hours ('YYYY-MM-DDTHH') as [start, end) runs of consecutive hours."""
    runs: list[list[datetime]] = []
    for text in sorted(hours):
        hour = datetime.strptime(text, HOUR_FORMAT).replace(tzinfo=UTC)
        if runs and runs[-1][1] == hour:
            runs[-1][1] = hour + timedelta(hours=1)
        else:
            runs.append([hour, hour + timedelta(hours=1)])
    return [(a.isoformat(), b.isoformat()) for a, b in runs]


def store_relation(folder: Path, plan: dict[str, list[str]]) -> tuple[str, list[list[str]]]:
    """(the samples of the planned hours as a SQL relation, the files of each planned day)."""
    per_day = [day_files(folder, day) for day in plan]
    files = [f for day in per_day for f in day]
    if not files:
        nothing = ", ".join(f"CAST(NULL AS {sql_type(f)}) AS {f.name}" for f in SAMPLE_SCHEMA)
        return f"(SELECT {nothing} WHERE false)", per_day
    relation = f"read_parquet({_list(files)}, union_by_name = true, hive_partitioning = false)"
    if all(len(hours) == 24 for hours in plan.values()):
        return relation, per_day  # whole days: every sample of their files
    ranges = " OR ".join(
        f"(ts >= TIMESTAMPTZ '{a}' AND ts < TIMESTAMPTZ '{b}')"
        for a, b in _runs([h for hours in plan.values() for h in hours])
    )
    return f"(SELECT * FROM {relation} WHERE {ranges})", per_day


# ---- rollup --------------------------------------------------------------------------------------
