"""``nvidia_smi_csv``: ``nvidia-smi --query-gpu=… --format=csv -l N`` logs, local paths and globs.

Each new or changed log is parsed by DuckDB (every field as text, then trimmed, unit-stripped and
cast) into a Parquet file of normalised samples beside the warehouse, at
``<warehouse dir>/samples/<source>/<sha1 of the log's path>.parquet`` (written under a temporary
name and renamed, so a kill never leaves half a file). The hourly rollup then reads the samples of
every log that holds one of the touched days, so an hour split across rotated logs rolls up whole,
and replaces those day slices of ``gpu_metrics_hourly``.

Quirks handled: ``, `` separators; units in headers (``memory.used [MiB]``) and values
(``433.78 W``); ``[N/A]``, ``N/A``, ``[Not Supported]`` and any other ``[…]`` marker are NULL, never
zero; the header repeated when nvidia-smi restarts and appends (a changed header splits the log);
a partly written last line is skipped. nvidia-smi writes timestamps in the host's local time
without a zone, which a log does not record: they are read as UTC. With MIG enabled, ``--query-gpu``
reports the parent GPU (utilisation ``[N/A]``): rows have ``mig_instance`` NULL.

The host is the log's ``host`` (or ``hostname``, or the configured ``host_column``) value, else the
file's name without its ``.csv``/``.log``/``.txt`` extension, rotation number and compression suffix.
A GPU without a ``uuid`` column is identified as ``<host>:<index>``.

A ``--query-compute-apps`` log among the matched files (told apart by its header: ``pid`` and
``used_gpu_memory``) is read by ``ingest.metrics.nvidia_smi_apps`` into ``gpu_processes_hourly``, in the
same run and transaction, its day slices replaced the same way.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.ingest.core import registry, spec_facts, validate
from gpufinops.ingest.core.files import changed_files, expand_paths, fingerprint, sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, ResourceMapOptions, option
from gpufinops.ingest.metrics import doctor, metrics_attribution, metrics_store
from gpufinops.ingest.metrics import nvidia_smi_apps as apps
from gpufinops.ingest.metrics.nvidia_smi_format import (
    GPU_MARKER,
    NUMERIC,
    TIMESTAMP_FORMAT,
    LogKind,
    Segment,
    column_map,
    number_sql,
    parse_log,
    relation_sql,
    segment_select,
    value_sql,
)

log = logging.getLogger(__name__)


def _diagnose(con: duckdb.DuckDBPyConnection, source: str, path: str, parts: list[Segment]) -> str | None:
    """After a failed parse, the line, column and first value that is neither a number/time nor N/A."""
    for csv_path, fields, cols, offset in parts:
        relation = relation_sql(csv_path, fields, cols, offset)
        checks = {
            "ts": f"{value_sql(cols['ts'])} IS NOT NULL AND try_strptime({value_sql(cols['ts'])}, {TIMESTAMP_FORMAT}) IS NULL"
        }
        checks |= {
            role: f"{value_sql(cols[role])} IS NOT NULL AND TRY_CAST({number_sql(cols[role])} AS DOUBLE) IS NULL"
            for role in NUMERIC
            if role in cols
        }
        for role, bad in checks.items():
            found = con.execute(
                f"SELECT __line, trim(c{cols[role]}) FROM {relation} WHERE {bad} ORDER BY __line LIMIT 1"
            ).fetchall()
            if found:
                line, value = found[0]
                kind = "a time (YYYY/MM/DD HH:MM:SS.mmm)" if role == "ts" else "a number or an N/A marker"
                return (
                    f"{source}: file {path}: line {line}: column {fields[cols[role]]!r} has value {value!r}, "
                    f"which is not {kind}"
                )
    return None


QUERY_GPU = LogKind(
    tmp_prefix="nvsmi-",
    marker=lambda path: GPU_MARKER,
    column_map=column_map,
    segment_select=segment_select,
    roles={"ts": "ts", **NUMERIC},
    diagnose=_diagnose,
    empty="holds a header but no samples yet",
    empty_level=logging.WARNING,
)


# nvidia-smi reads no DCGM profiling field: NULL (not measured) in every hour it rolls up
_NO_PROFILING = ", ".join(
    f"CAST(NULL AS DOUBLE) AS {c}"
    for c in ("fp16_active", "fp32_active", "dram_active", "sm_occupancy", "fp64_active")
    + ("pcie_tx_bps", "pcie_rx_bps", "nvlink_tx_bps", "nvlink_rx_bps")
)


def rollup_sql(
    con: duckdb.DuckDBPyConnection, sample_files: list[str], days: list[str], source: str, run_id: str
) -> str:
    """Hourly rows of gpu_metrics_hourly for ``days`` from the sample files (attributed by the load)."""
    if not sample_files:
        return "SELECT * FROM gpu_metrics_hourly WHERE false"
    parquet = f"read_parquet([{', '.join(sql_literal(f) for f in sample_files)}])"
    day_list = ", ".join(sql_literal(d) for d in days)
    none = "CAST(NULL AS VARCHAR)"
    samples = (
        f"(SELECT ts, gpu_uuid, {none} AS mig_instance, name, host, {none} AS resource_hint, "
        f"{none} AS provider_id, {none} AS namespace, {none} AS pod, {none} AS container, util, "
        f"CAST(NULL AS DOUBLE) AS gr_active, "
        f"CAST(NULL AS DOUBLE) AS sm_active, CAST(NULL AS DOUBLE) AS tensor_active, {_NO_PROFILING}, mem_used_mib, "
        f"CAST(NULL AS DOUBLE) AS mem_free_mib, CAST(NULL AS DOUBLE) AS mem_reserved_mib, mem_total_mib, "
        f"power_w FROM {parquet} WHERE CAST(date_trunc('day', ts) AS VARCHAR) IN ({day_list}))"
    )
    return metrics_store.rollup_sql(con, samples, source=source, run_id=run_id)


GPU = "query-gpu"  # the kind of a --query-gpu log in the source's state


def _kind(entry: dict[str, Any]) -> str:
    return entry.get("kind", GPU)  # state saved before compute-apps logs were read has no kind


def _sample_path(folder: Path, path: str, kind: str = GPU) -> Path:
    name = f"{hashlib.sha1(path.encode()).hexdigest()}.parquet"
    return folder / name if kind == GPU else folder / kind / name


@dataclass(frozen=True, kw_only=True)
class NvidiaSmiCsvOptions(ResourceMapOptions, OnInvalidOptions):
    path: str | list[str] = option(doc="a glob or a list of globs of nvidia-smi CSV logs")
    host_column: str | None = option(None, "the column naming the host (default: host or hostname, else the file name)")


class NvidiaSmiCsv:
    meta = registry.IngestorMeta(
        **spec_facts.LOCAL_FILES,
        name="nvidia_smi_csv",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        slice_expr="CAST(date_trunc('day', \"hour\") AS VARCHAR)",
        source_column="source",
        default_schedule="*/15 * * * *",
        options=NvidiaSmiCsvOptions,
        description="`nvidia-smi --query-gpu … --format=csv` logs (units in headers and values, `[N/A]`), rolled up "
        "hourly per GPU; `--query-compute-apps` logs among them, hourly per process (`gpu_processes_hourly`)",
        time_range=False,
        freshness=registry.Freshness(kind="metrics", lag_hours=1.0),
        doctor=doctor.nvidia_smi_csv,
        init=("nvidia_smi_path",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        previous: dict[str, Any] = ctx.state.get("files", {})
        files = expand_paths(ctx.source, ctx.options.path, ctx.base_dir)
        if not files:
            raise IngestError(f"{ctx.source}: no file matches path {ctx.options.path!r}")
        changed, removed = changed_files(files, previous)
        folder = metrics_store.samples_dir(ctx)  # a log whose samples file went missing is read again
        changed += [
            p
            for p in files
            if p in previous and p not in changed and not _sample_path(folder, p, _kind(previous[p])).exists()
        ]
        resource_map = dict(ctx.options.resource_map)
        rules = metrics_attribution.rules_batches(ctx, resource_map)
        if not changed and not removed:
            return FetchResult.unchanged(ctx.state, "no new or changed files", rules)
        host_column = ctx.options.host_column
        entries = {path: previous[path] for path in files if path in previous}
        affected: dict[str, set[str]] = {GPU: set(), apps.KIND: set()}  # log kind -> days to roll up again
        mode = validate.on_invalid(ctx)
        rejected: list[str] = []
        for path in changed:
            fp = fingerprint(path)  # before reading: a log growing meanwhile is read again next run
            old = previous.get(path, {})
            affected[_kind(old)] |= set(old.get("days", []))
            kind = apps.KIND if apps.is_apps_log(path) else GPU
            reads = apps.COMPUTE_APPS if kind == apps.KIND else QUERY_GPU
            parsed, rejects = parse_log(
                ctx.con, ctx.source, path, _sample_path(folder, path, kind), host_column, reads, mode, ctx.run_id
            )
            rejected += [rejects] if rejects else []
            if kind != _kind(old):
                _sample_path(folder, path, _kind(old)).unlink(missing_ok=True)
            entries[path] = {"fp": fp, "kind": kind, **parsed}
            affected[kind] |= set(parsed["days"])
        for path in removed:
            affected[_kind(previous[path])] |= set(previous[path].get("days", []))
            _sample_path(folder, path, _kind(previous[path])).unlink(missing_ok=True)
        watermark = max((e["last"] for e in entries.values() if e.get("last")), default=None)
        state = {"files": entries, "watermark": watermark}
        rollups = {GPU: ("gpu_metrics_hourly", rollup_sql), apps.KIND: (apps.TABLE, apps.rollup_sql)}
        batches = list(rules)
        for kind, (table, rollup) in rollups.items():
            if not affected[kind]:
                continue
            days = sorted(affected[kind])
            sample_files = [
                str(_sample_path(folder, p, kind))
                for p, e in sorted(entries.items())
                if _kind(e) == kind and affected[kind] & set(e["days"])
            ]
            sql = rollup(ctx.con, sample_files, days, ctx.source, ctx.run_id)
            where = f"the hourly rollup of {len(sample_files)} log(s)' samples"
            batches.append(Batch(table=table, data=sql, slices=days, context=where))
            if kind == apps.KIND:  # the processes' presence per GPU-hour, for the shared-GPU chargeback
                batches.append(
                    Batch(
                        table="gpu_workloads_hourly",
                        slices=days,
                        context=where,
                        data=apps.workloads_sql(sample_files, days, ctx.source, ctx.run_id),
                    )
                )
        if mode == validate.SKIP_ROWS and changed:  # each log read replaces its previous rejects
            data = " UNION ALL ".join(f"({r})" for r in rejected) if rejected else None
            batches.append(validate.rejects_batch(data, changed))
        return FetchResult(batches, state, watermark=watermark)


INGESTORS = [NvidiaSmiCsv]
