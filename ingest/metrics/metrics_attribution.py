"""A GPU-hour's hints for attribution to billing, and the source's attribution rules.

Shared by the utilisation ingestors. ``attributed_sql`` turns hourly rows into ``gpu_metrics_hourly``
rows carrying the hints (resource label, host, Kubernetes providerID, workload labels) that
``derived.attribution`` resolves to a billed ``ResourceId`` and team inside the load's transaction,
whichever of the bill and the metrics arrived first. ``rules_batches`` replaces the source's
``resource_map`` / ``namespace_teams`` rules in ``attribution_rules`` when they changed.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.derived import attribution
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, IngestContext
from gpufinops.warehouse.gpu_models import normalize_gpu_model
from gpufinops.warehouse.metrics_schema import PROFILING_COLUMNS


def _values(name: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    """A CTE of literal rows (typed VARCHAR); an empty relation when there are none."""
    if not rows:
        nulls = ", ".join(f"CAST(NULL AS VARCHAR) AS {c}" for c in columns)
        return f"{name} AS (SELECT {nulls} WHERE false)"
    body = ", ".join(
        "(" + ", ".join(sql_literal(str(v)) if v is not None else "NULL" for v in row) + ")" for row in rows
    )
    return f"{name}({', '.join(columns)}) AS (VALUES {body})"


def gpu_model_rows(con: duckdb.DuckDBPyConnection, hourly: str) -> list[tuple[str, str | None]]:
    """(name as reported, canonical model) for every GPU name in an hourly relation."""
    names = con.execute(
        f"SELECT name, max(mem_total_mib) FROM {hourly} WHERE name IS NOT NULL GROUP BY name"
    ).fetchall()
    return [(name, normalize_gpu_model(name, memory)) for name, memory in names]


DAY_US = 86_400_000_000


def day_number_sql(ts: str) -> str:
    """SQL: the UTC day of a timestamp as whole days since the epoch (floored, so before 1970 too)."""
    return f"(epoch_us({ts}) // {DAY_US} - CAST(epoch_us({ts}) % {DAY_US} < 0 AS BIGINT))"


def gpu_model_day_rows(con: duckdb.DuckDBPyConnection, hourly: str) -> list[tuple[int, str, str | None]]:
    """(UTC day number, name as reported, canonical model) for every GPU name of each day of an hourly
    relation: each day's models from that day's memory, as a relation of one day gives them."""
    names = con.execute(
        f"SELECT {day_number_sql('hour')} AS day_n, name, max(mem_total_mib) FROM {hourly} "
        f"WHERE name IS NOT NULL GROUP BY 1, 2"
    ).fetchall()
    return [(day, name, normalize_gpu_model(name, memory)) for day, name, memory in names]


def workload_labels(labels: dict[str, str]) -> tuple[str | None, str | None, str | None]:
    """(namespace, pod, container) of the workload a GPU series belongs to.

    When Prometheus scraped the exporter without ``honor_labels``, the scrape target's own labels
    (the exporter pod's ``namespace``/``pod``/``container``) won and the exporter's moved to
    ``exported_*``: those are the workload's. A series without ``exported_*`` that came through such
    a scrape (it has a ``job`` label) and whose plain labels name the exporter itself (its pod named
    after the job, or its container the job's or service's name, as the GPU operator's ServiceMonitor
    makes them) belongs to no workload: the GPU was not allocated.
    """
    names = ("namespace", "pod", "container")
    if any(labels.get(f"exported_{name}") for name in names):
        return tuple(labels.get(f"exported_{name}") or None for name in names)  # type: ignore[return-value]
    job, pod, container = labels.get("job"), labels.get("pod") or "", labels.get("container")
    if job and ((pod and pod.startswith(job)) or container in (job, labels.get("service"))):
        return None, None, None
    return tuple(labels.get(name) or None for name in names)  # type: ignore[return-value]


def provider_id_resource(provider_id: str | None) -> str | None:
    """A Kubernetes node providerID as the ResourceId its cloud bills under (None when unknown).
    The SQL twin that attribution runs is ``derived.attribution.provider_resource_sql``."""
    if not provider_id:
        return None
    if provider_id.startswith("aws://"):
        return provider_id.rstrip("/").rsplit("/", 1)[-1] or None
    if provider_id.startswith("gce://"):
        parts = provider_id[len("gce://") :].strip("/").split("/")
        if len(parts) == 3:
            return f"//compute.googleapis.com/projects/{parts[0]}/zones/{parts[1]}/instances/{parts[2]}"
    if provider_id.startswith("azure://"):  # the ARM id, compared lower-cased
        return provider_id[len("azure://") :].lower().rstrip("/") or None
    return provider_id


def attributed_sql(
    hourly_ctes: str,
    *,
    source: str,
    run_id: str,
    models: list[tuple[str, str | None]],
    day_models: list[tuple[int, str, str | None]] | None = None,
) -> str:
    """gpu_metrics_hourly rows from ``hourly_ctes`` (a WITH body defining ``hourly``) with their hints.

    ``resource_id`` and ``team`` are left NULL here: the runner resolves them from the hints inside
    the load's transaction (``derived.attribution``), as every later cost load does again, so the
    answer never depends on whether the bill or the metrics arrived first. ``day_models`` (UTC day
    number, name, model; ``gpu_model_day_rows``), when given, names each day's GPU models instead of
    ``models``: the rows of several days rolled up together keep each day's.
    """
    if day_models is None:
        models_cte, join = _values("models", ("name", "gpu_model"), models), "md.name = a.name"
    else:
        models_cte = _values("models", ("day_n", "name", "gpu_model"), day_models)
        join = f"md.name = a.name AND CAST(md.day_n AS BIGINT) = {day_number_sql('a.hour')}"
    return f"""
WITH {hourly_ctes.strip()},
{models_cte}
SELECT a.hour, a.gpu_uuid, md.gpu_model, a.mig_instance, a.host, CAST(NULL AS VARCHAR) AS resource_id,
       CAST(NULL AS VARCHAR) AS team,
       a.util_mean, a.util_p95, a.util_max, a.mem_used_max_mib, a.mem_total_mib,
       a.sm_active_mean, a.tensor_active_mean, a.power_mean_w, CAST(a.samples AS INTEGER) AS samples,
       {sql_literal(source)} AS source, {sql_literal(run_id)} AS ingest_run_id,
       a.resource_hint, a.provider_id, a.namespace, a.pod, a.container,
       {", ".join(_profiling(name, kind) for name, kind in PROFILING_COLUMNS)}
FROM hourly a LEFT JOIN models md ON {join}"""


def _profiling(name: str, kind: object) -> str:
    """A profiling column of the hourly rows (NULL where the source's rollup has none: not measured)."""
    return f"CAST(a.{name} AS {'INTEGER' if str(kind) == 'int32' else 'DOUBLE'}) AS {name}"


def rules_batches(
    ctx: IngestContext, resource_map: dict[str, str] | None = None, namespace_teams: dict[str, str] | None = None
) -> list[Batch]:
    """The source's attribution rules as a batch replacing its ``attribution_rules``; none when unchanged."""
    rules = attribution.rules_table(ctx.source, resource_map=resource_map, namespace_teams=namespace_teams)
    if not attribution.rules_changed(ctx.con, ctx.source, rules):
        return []
    return [rules_batch(ctx.source, rules)]


def rules_batch(source: str, rules: pa.Table) -> Batch:
    return Batch(table="attribution_rules", data=rules, slices=[source], slice_expr='"source"', source_column="source")
