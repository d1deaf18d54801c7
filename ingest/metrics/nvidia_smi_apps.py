"""Per-process GPU memory from ``nvidia-smi --query-compute-apps=… --format=csv -l N`` logs.

Part of the ``nvidia_smi_csv`` source: a log among the files its ``path`` glob matches whose header
names ``pid`` and ``used_gpu_memory`` (or ``used_memory``) is a compute-apps log. It is read with the
``--query-gpu`` log's quirk handling (units in headers and values, ``[N/A]``-style markers as NULL,
the header repeated or changed when nvidia-smi restarts, a partly written last line skipped,
timestamps read as UTC, the host from the ``host`` column or the file's name) into a Parquet file of
samples at ``<warehouse dir>/samples/<source>/compute-apps/<sha1 of the log's path>.parquet``.

Those samples roll up into ``gpu_processes_hourly``: one row per hour, host, GPU, pid and process
name with the largest and mean used memory (MiB) and the number of samples the process was seen in
(a sample logged twice counts once; the mean leaves out ``[N/A]`` readings). Rows are attributed to
a billed resource and team exactly as the host's GPU rows are (``derived.attribution``).
A log holding only its header (no process was running) is valid and adds no rows. The same samples
give each process's presence per GPU-hour (``gpu_workloads_hourly``, :mod:`ingest.metrics.workloads`), the
time-slicing input of the shared-GPU chargeback.
"""

from __future__ import annotations

import logging

import duckdb

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.metrics import metrics_store, workloads
from gpufinops.ingest.metrics.nvidia_smi_format import (
    TIMESTAMP_FORMAT,
    LogKind,
    Segment,
    base_names,
    data_rows,
    header_fields,
    header_line,
    number_sql,
    roles_found,
    typed_sql,
    value_sql,
)

log = logging.getLogger(__name__)

KIND = "compute-apps"  # the log's kind in the source's state, and its samples' sub-folder
TABLE = "gpu_processes_hourly"
MEMORY_COLUMNS = ("used_gpu_memory", "used_memory")
# Role -> accepted header names (without their " [unit]"), first present wins.
COLUMNS = {
    "ts": ("timestamp",),
    "uuid": ("gpu_uuid",),
    "bus_id": ("gpu_bus_id",),
    "pid": ("pid",),
    "process": ("process_name",),
    "mem": MEMORY_COLUMNS,
    "host": ("host", "hostname"),
}


def is_apps_header(fields: list[str]) -> bool:
    bases = base_names(fields)
    return "pid" in bases and any(name in bases for name in MEMORY_COLUMNS)


def is_apps_log(path: str) -> bool:
    """Whether the log at ``path`` is a ``--query-compute-apps`` log, by its header."""
    header = header_line(path)
    return header is not None and is_apps_header(header_fields(header))


def column_map(source: str, path: str, fields: list[str], host_column: str | None) -> dict[str, int]:
    cols = roles_found(source, path, base_names(fields), COLUMNS, host_column)
    missing = [names[0] for role, names in COLUMNS.items() if role in ("ts", "pid", "mem") and role not in cols]
    if missing:
        raise IngestError(
            f"{source}: file {path} has no {' or '.join(missing)} column (nvidia-smi "
            f"--query-compute-apps must include timestamp, gpu_uuid, pid and used_gpu_memory)"
        )
    if "uuid" not in cols and "bus_id" not in cols:
        raise IngestError(f"{source}: file {path} has no gpu_uuid column (nor gpu_bus_id) to identify the GPU")
    return cols


def segment_select(
    csv_path: str, fields: list[str], cols: dict[str, int], host: str, line_offset: int | None = None
) -> str:
    def text(role: str) -> str:
        return value_sql(cols[role]) if role in cols else "CAST(NULL AS VARCHAR)"

    tolerant = line_offset is not None  # see nvidia_smi_format.segment_select
    host_expr = f"COALESCE({text('host')}, {sql_literal(host)})"
    ts, ts_raw = typed_sql("ts", cols, "ts", tolerant)
    pid, pid_raw = typed_sql("pid", cols, "integer", tolerant)
    mem, mem_raw = typed_sql("mem", cols, "number", tolerant)
    items = [
        f"{ts} AS ts",
        f"COALESCE({text('uuid')}, {host_expr} || ':' || {text('bus_id')}) AS gpu_uuid",
        f"{host_expr} AS host",
        f"CAST({pid} AS INTEGER) AS pid",
        f"{text('process')} AS process_name",
        f"CAST({mem} AS DOUBLE) AS mem_used_mib",
    ]
    if tolerant:
        items += [
            f"{ts_raw} AS __unparsed_ts",
            f"{pid_raw} AS __unparsed_pid",
            f"{mem_raw} AS __unparsed_mem_used_mib",
            "__line",
        ]
    return f"SELECT {', '.join(items)} FROM {data_rows(csv_path, fields, cols['pid'], line_offset)}"


def _diagnose(con: duckdb.DuckDBPyConnection, source: str, path: str, parts: list[Segment]) -> str | None:
    """After a failed parse, the column and first value that is not a time, pid or memory figure."""
    for csv_path, fields, cols, _ in parts:
        relation = data_rows(csv_path, fields, cols["pid"])
        checks = {
            "ts": (
                f"try_strptime({value_sql(cols['ts'])}, {TIMESTAMP_FORMAT}) IS NULL",
                "a time (YYYY/MM/DD HH:MM:SS.mmm)",
            ),
            "pid": (f"TRY_CAST({value_sql(cols['pid'])} AS INTEGER) IS NULL", "a process id or an N/A marker"),
            "mem": (f"TRY_CAST({number_sql(cols['mem'])} AS DOUBLE) IS NULL", "a number or an N/A marker"),
        }
        for role, (bad, kind) in checks.items():
            value = con.execute(
                f"SELECT any_value(trim(c{cols[role]})) FROM {relation} "
                f"WHERE {value_sql(cols[role])} IS NOT NULL AND {bad}"
            ).fetchall()[0][0]
            if value is not None:
                return f"{source}: file {path}: column {fields[cols[role]]!r} has value {value!r}, which is not {kind}"
    return None


def _marker(path: str) -> bytes:
    """The memory column a compute-apps log's header names (and no data line): it finds repeated headers."""
    header = header_line(path) or b""
    return next(name.encode() for name in MEMORY_COLUMNS if name.encode() in header)


COMPUTE_APPS = LogKind(
    tmp_prefix="nvsmi-apps-",
    marker=_marker,
    column_map=column_map,
    segment_select=segment_select,
    roles={"ts": "ts", "mem": "mem_used_mib", "pid": "pid"},
    diagnose=_diagnose,
    empty="lists no GPU processes (idle)",
    empty_level=logging.INFO,
)


def rollup_sql(
    con: duckdb.DuckDBPyConnection, sample_files: list[str], days: list[str], source: str, run_id: str
) -> str:
    """Hourly rows of gpu_processes_hourly for ``days`` from the sample files; the load attributes them
    to a billed resource and team from their host, exactly as the host's GPU rows are."""
    if not sample_files:
        return f"SELECT * FROM {TABLE} WHERE false"
    parquet = f"read_parquet([{', '.join(sql_literal(f) for f in sample_files)}])"
    day_list = ", ".join(sql_literal(d) for d in days)
    return f"""
WITH per_ts AS (
  SELECT ts, host, gpu_uuid, pid, process_name, max(mem_used_mib) AS mem_used_mib FROM {parquet}
  WHERE gpu_uuid IS NOT NULL AND CAST(date_trunc('day', ts) AS VARCHAR) IN ({day_list})
  GROUP BY ts, host, gpu_uuid, pid, process_name
)
SELECT date_trunc('hour', ts) AS hour, gpu_uuid, host, pid, process_name, max(mem_used_mib) AS mem_used_max_mib,
       {metrics_store.MEAN.format("avg(mem_used_mib)")} AS mem_used_mean_mib, CAST(count(*) AS INTEGER) AS samples,
       CAST(NULL AS VARCHAR) AS resource_id, CAST(NULL AS VARCHAR) AS team,
       {sql_literal(source)} AS source, {sql_literal(run_id)} AS ingest_run_id
FROM per_ts GROUP BY 1, 2, 3, 4, 5"""


def workloads_sql(sample_files: list[str], days: list[str], source: str, run_id: str) -> str:
    """gpu_workloads_hourly rows for ``days``: each process's presence on its GPU per hour, several
    processes at one time sharing it by time-slicing (or MPS when its control server is among them)."""
    if not sample_files:
        return "SELECT * FROM gpu_workloads_hourly WHERE false"
    parquet = f"read_parquet([{', '.join(sql_literal(f) for f in sample_files)}])"
    day_list = ", ".join(sql_literal(d) for d in days)
    samples = f"(SELECT * FROM {parquet} WHERE CAST(date_trunc('day', ts) AS VARCHAR) IN ({day_list}))"
    return workloads.apps_sql(samples, source=source, run_id=run_id)
