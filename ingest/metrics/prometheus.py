"""``prometheus``: GPU metrics from a Prometheus server's HTTP API, rolled up hourly by Prometheus.

The hourly aggregation is pushed down: one ``/api/v1/query_range`` per figure with an hourly step
(``avg_over_time``, ``quantile_over_time(0.95, …)``, ``max_over_time``, ``min_over_time``,
``count_over_time`` over exactly one hour: each evaluation at ``hour end − 1 ms`` covers the samples
in ``[hour, hour + 1 h)``), so a large fleet comes home as hourly points, not minutes. Two
dialects are read, both when present: DCGM exporter (``DCGM_FI_*``, with MIG, Kubernetes and
resource labels as for ``dcgm_exporter``) and nvidia_gpu_exporter (``nvidia_smi_*``: utilisation
ratio × 100, memory bytes → MiB, the GPU name from ``nvidia_smi_gpu_info``).

Incremental by time: a run covers ``[cursor − lookback_hours, last complete hour)``; the first run
(or ``--full-refresh``) starts ``backfill_days`` back; ``--since``/``--until`` override both. Each
hour of the window is a slice replaced whole. A run whose hours come back identical to what is
stored is recorded as skipped. Series of one GPU-hour (a pod change splits them) are combined
weighted by their sample counts; their p95 is the largest of theirs.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa

from gpufinops.ingest.core import validate
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError, IngestorMeta
from gpufinops.ingest.core.spec import ExporterOptions, option
from gpufinops.ingest.core.validate_metrics import bad_figure, rejects_table
from gpufinops.ingest.metrics import metrics_attribution, metrics_store, workloads
from gpufinops.ingest.metrics.scrape import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, display_url, fetch_text
from gpufinops.warehouse.metrics_schema import GPU_METRICS_HOURLY, GPU_WORKLOADS_HOURLY

log = logging.getLogger(__name__)

HOUR_S = 3600
CHUNK_HOURS = 24 * 7
# figure -> (PromQL template, {m} = the metric selector, {r} = the range) per dialect
DCGM_QUERIES = {
    "util_mean": "avg_over_time(DCGM_FI_DEV_GPU_UTIL{m}[{r}])",
    "util_p95": "quantile_over_time(0.95, DCGM_FI_DEV_GPU_UTIL{m}[{r}])",
    "util_max": "max_over_time(DCGM_FI_DEV_GPU_UTIL{m}[{r}])",
    "samples": "count_over_time(DCGM_FI_DEV_GPU_UTIL{m}[{r}])",
    "mem_used_max": "max_over_time(DCGM_FI_DEV_FB_USED{m}[{r}])",
    "mem_free_min": "min_over_time(DCGM_FI_DEV_FB_FREE{m}[{r}])",
    "mem_reserved_max": "max_over_time(DCGM_FI_DEV_FB_RESERVED{m}[{r}])",
    "sm_mean": "avg_over_time(DCGM_FI_PROF_SM_ACTIVE{m}[{r}])",
    "gr_mean": "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{m}[{r}])",
    "tensor_mean": "avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{m}[{r}])",
    "power_mean": "avg_over_time(DCGM_FI_DEV_POWER_USAGE{m}[{r}])",
}
SMI_QUERIES = {
    "util_mean": "100 * avg_over_time(nvidia_smi_utilization_gpu_ratio{m}[{r}])",
    "util_p95": "100 * quantile_over_time(0.95, nvidia_smi_utilization_gpu_ratio{m}[{r}])",
    "util_max": "100 * max_over_time(nvidia_smi_utilization_gpu_ratio{m}[{r}])",
    "samples": "count_over_time(nvidia_smi_utilization_gpu_ratio{m}[{r}])",
    "mem_used_max": "max_over_time(nvidia_smi_memory_used_bytes{m}[{r}]) / 1048576",
    "mem_total_max": "max_over_time(nvidia_smi_memory_total_bytes{m}[{r}]) / 1048576",
    "power_mean": "avg_over_time(nvidia_smi_power_draw_watts{m}[{r}])",
    "info": "max_over_time(nvidia_smi_gpu_info{m}[{r}])",
}
FIGURES = ("util_mean", "util_p95", "util_max", "samples", "mem_used_max", "mem_free_min", "mem_reserved_max",
           "mem_total_max", "sm_mean", "gr_mean", "tensor_mean", "power_mean")
PARTIAL_SCHEMA = pa.schema([("hour", pa.timestamp("s", tz="UTC")), ("gpu_uuid", pa.string()),
                            ("mig_instance", pa.string()), ("name", pa.string()), ("host", pa.string()),
                            ("resource_hint", pa.string()), ("provider_id", pa.string()), ("namespace", pa.string()),
                            ("pod", pa.string()), ("container", pa.string()), ("vgpu", pa.string())]
                           + [(f, pa.float64()) for f in FIGURES])
# What the source says (the attribution derived from it is re-resolved by every load: not compared).
COMPARED = ("hour", "gpu_uuid", "gpu_model", "mig_instance", "host", "resource_hint", "provider_id", "namespace",
            "pod", "container", "util_mean", "util_p95",
            "util_max", "mem_used_max_mib", "mem_total_mib", "sm_active_mean", "tensor_active_mean",
            "power_mean_w", "samples")
WORKLOADS_COMPARED = tuple(c for c in GPU_WORKLOADS_HOURLY.names if c not in ("source", "ingest_run_id"))


class PrometheusClient:
    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES) -> None:
        self.address = url.rstrip("/")   # may hold user:password@ (sent as HTTP Basic auth)
        self.url = display_url(self.address)  # what messages name
        self.timeout_s, self.retries = timeout_s, retries

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            body = json.loads(fetch_text(f"{self.address}{path}{query}", timeout_s=self.timeout_s, retries=self.retries))
        except urllib.error.HTTPError as exc:  # Prometheus explains a bad query in the body
            try:
                body = json.loads(exc.read().decode())
            except ValueError:
                raise IngestError(f"Prometheus at {self.url} answered {exc.code} to {path}") from None
        except (OSError, ValueError) as exc:
            raise IngestError(f"Prometheus at {self.url} is unreachable or answered badly: "
                              f"{getattr(exc, 'reason', None) or exc}") from None
        if body.get("status") != "success":
            raise IngestError(f"Prometheus at {self.url} refused {path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def range_inclusive(self) -> bool:
        """Prometheus 2 range selectors include their start; 3 and later exclude it."""
        version = str(self.get("/api/v1/status/buildinfo").get("version", "2"))
        return int(version.split(".")[0]) < 3

    def query_range(self, query: str, start_s: float, end_s: float, step_s: int) -> list[dict]:
        data = self.get("/api/v1/query_range", {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}",
                                                "step": str(step_s)})
        return data["result"]


def _series_key(labels: dict[str, str], dialect: str, options: PrometheusOptions) -> tuple:
    host = labels.get("Hostname") or labels.get("instance", "").rsplit(":", 1)[0] or None
    if dialect == "dcgm":
        mig = f"{labels['GPU_I_PROFILE']}/{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else None
        uuid = labels.get("UUID") or (f"{host}:{labels['gpu']}" if labels.get("gpu") else None)
        return (uuid, mig, labels.get("modelName"), host, labels.get(options.resource_label),
                labels.get(options.provider_id_label), *metrics_attribution.workload_labels(labels),
                labels.get("vgpu") or None)
    return (labels.get("uuid"), None, None, host, labels.get(options.resource_label),
            labels.get(options.provider_id_label), None, None, None, None)


def fetch_partials(client: PrometheusClient, start: datetime, end: datetime, options: PrometheusOptions,
                   rejects: list[dict] | None = None) -> pa.Table:
    """One row per series and hour in [start, end): the pushed-down hourly figures. A figure that is
    not finite or out of range (``NaN``, ``+Inf``, utilisation over 100) fails the run naming the
    query, series and hour, or with ``rejects`` (skip_rows) drops that series-hour and records it."""
    selector = "{" + options.selector + "}" if options.selector else ""
    window = "1h" if not client.range_inclusive() else f"{HOUR_S * 1000 - 1}ms"
    rows: dict[tuple, dict[str, Any]] = {}
    names: dict[str, str] = {}
    first, last = int(start.timestamp()) // HOUR_S, int(end.timestamp()) // HOUR_S
    for chunk in range(first, last, CHUNK_HOURS):
        chunk_end = min(chunk + CHUNK_HOURS, last)
        # evaluated at each hour's end - 1 ms: the range covers [hour, hour + 1 h)
        eval_start, eval_end = (chunk + 1) * HOUR_S - 0.001, chunk_end * HOUR_S - 0.001
        for dialect, queries in (("dcgm", DCGM_QUERIES), ("nvidia_smi", SMI_QUERIES)):
            for figure, template in queries.items():
                query = template.format(m=selector, r=window)
                for series in client.query_range(query, eval_start, eval_end, HOUR_S):
                    labels = series["metric"]
                    if figure == "info":
                        if labels.get("uuid") and labels.get("name"):
                            names[labels["uuid"]] = labels["name"]
                        continue
                    key = _series_key(labels, dialect, options)
                    if key[0] is None:
                        continue
                    for stamp, value in series["values"]:
                        hour = round(float(stamp) + 0.001) - HOUR_S
                        row = rows.setdefault((hour, *key), {})
                        row[figure] = _figure(client, query, figure, key, hour, value, row, rejects)
    data: dict[str, list] = {name: [] for name in PARTIAL_SCHEMA.names}
    for (hour, uuid, mig, name, host, hint, provider, namespace, pod, container, vgpu), figures in rows.items():
        if figures.get("_rejected"):
            continue
        for column, value in zip(PARTIAL_SCHEMA.names[:11], (hour, uuid, mig, name or names.get(uuid), host, hint,
                                                             provider, namespace, pod, container, vgpu)):
            data[column].append(value)
        for figure in FIGURES:
            data[figure].append(figures.get(figure))
    return pa.table(data, schema=PARTIAL_SCHEMA)


def _figure(client: PrometheusClient, query: str, figure: str, key: tuple, hour: int, value: Any,
            row: dict[str, Any], rejects: list[dict] | None) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    why = bad_figure(figure, number)
    if why is None:
        return number
    when = datetime.fromtimestamp(hour, UTC).isoformat()
    if rejects is None:
        raise IngestError(f"Prometheus at {client.url} answered {value!r} for {query} (GPU {key[0]}, hour {when}), "
                          f"which {why}")
    rejects.append({"file": f"{client.url} {query}", "row": None, "column": figure, "value": str(value),
                    "reason": f"{why} (GPU {key[0]}, hour {when})"})
    row["_rejected"] = True
    return None


HOURLY_FROM_PARTIALS = """
hourly AS (
  SELECT CAST(hour AS TIMESTAMPTZ) AS hour, gpu_uuid, mig_instance, max(name) AS name, max(host) AS host,
         max(resource_hint) AS resource_hint, max(provider_id) AS provider_id,
         arg_max(namespace, coalesce(samples, 0)) AS namespace, arg_max(pod, coalesce(samples, 0)) AS pod,
         arg_max(container, coalesce(samples, 0)) AS container,
         round(sum(util_mean * samples) / nullif(sum(samples) FILTER (WHERE util_mean IS NOT NULL), 0), 9) AS util_mean,
         max(util_p95) AS util_p95, max(util_max) AS util_max, max(mem_used_max) AS mem_used_max_mib,
         max(coalesce(mem_total_max, mem_used_max + mem_free_min + coalesce(mem_reserved_max, 0))) AS mem_total_mib,
         round(sum(coalesce(sm_mean, gr_mean) * samples) / nullif(sum(samples) FILTER (WHERE coalesce(sm_mean, gr_mean) IS NOT NULL), 0), 9) AS sm_active_mean,
         round(sum(tensor_mean * samples) / nullif(sum(samples) FILTER (WHERE tensor_mean IS NOT NULL), 0), 9) AS tensor_active_mean,
         round(sum(power_mean * samples) / nullif(sum(samples) FILTER (WHERE power_mean IS NOT NULL), 0), 9) AS power_mean_w,
         CAST(sum(samples) AS INTEGER) AS samples
  FROM _prometheus_partials GROUP BY 1, 2, 3
)"""


def _hour(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True, kw_only=True)
class PrometheusOptions(ExporterOptions):
    url: str = option(doc="the Prometheus server's base URL (user:password@ in it is sent as Basic auth, never shown)",
                      secret=True)
    selector: str | None = option(None, "PromQL label matchers every series must carry, e.g. cluster=\"prod\"")
    lookback_hours: float = option(3.0, "complete hours re-read before the cursor on every run (late samples)")
    backfill_days: float = option(7.0, "how far back the first run (or --full-refresh) reads")

    def window_lookback(self, declared: timedelta) -> timedelta:
        return timedelta(hours=self.lookback_hours)


class Prometheus:
    meta = IngestorMeta(
        name="prometheus",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        slice_expr=metrics_store.HOUR_SLICE_SQL,
        source_column="source",
        cursor="hour (last complete hour loaded)",
        lookback=timedelta(hours=3),
        default_schedule="7 * * * *",
        options=PrometheusOptions,
        time_range=True,
        window_cursor="cursor",
        description="a Prometheus server's `/api/v1/query_range`, hourly aggregation pushed down; DCGM "
                    "(`DCGM_FI_*`) and nvidia_gpu_exporter (`nvidia_smi_*`) metrics",
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: PrometheusOptions = ctx.options
        resource_map, namespace_teams = dict(options.resource_map), dict(options.namespace_teams)
        start, end = ctx.window.whole_hours(datetime.now(UTC), timedelta(days=options.backfill_days))
        state = {"cursor": end.isoformat()}
        if end <= start:
            return FetchResult([], {**ctx.state, **state}, watermark=ctx.state.get("cursor"),
                               skipped_reason="no complete hour since the last run")
        client = PrometheusClient(options.url, options.timeout_s, options.retries)
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        rejects: list[dict] = []
        partials = fetch_partials(client, start, end, options, rejects if skip_rows else None)
        log.info("%s: %d series-hours from %s to %s", ctx.source, partials.num_rows, start, end)
        con = ctx.con
        con.register("_prometheus_partials", partials)
        sql = metrics_attribution.attributed_sql(HOURLY_FROM_PARTIALS, source=ctx.source, run_id=ctx.run_id,
                                           models=metrics_attribution.gpu_model_rows(con, "(SELECT name, coalesce(mem_total_max, mem_used_max + mem_free_min + coalesce(mem_reserved_max, 0)) AS mem_total_mib FROM _prometheus_partials)"))
        new = con.sql(sql).to_arrow_table()
        running = con.sql(workloads.partials_sql("_prometheus_partials", source=ctx.source, run_id=ctx.run_id)
                          ).to_arrow_table().cast(GPU_WORKLOADS_HOURLY)
        con.unregister("_prometheus_partials")
        hours = [(start + timedelta(hours=h)).strftime(metrics_store.HOUR_FORMAT) for h in range(int((end - start) / timedelta(hours=1)))]
        watermark = end.isoformat()
        rules = metrics_attribution.rules_batches(ctx, resource_map, namespace_teams)
        refused = [validate.rejects_batch(rejects_table(ctx, rejects), [r["file"] for r in rejects])] if rejects else []
        if not ctx.window.full_refresh and not refused and self._unchanged(con, ctx.source, new, start, end) \
                and self._unchanged(con, ctx.source, running, start, end, "gpu_workloads_hourly", WORKLOADS_COMPARED):
            return FetchResult(rules, state, watermark=watermark, skipped_reason="no new or changed hours")
        where = f"query_range of {display_url(options.url)}"
        return FetchResult(rules + [Batch(table="gpu_metrics_hourly", data=new.cast(GPU_METRICS_HOURLY), slices=hours,
                                          context=where),
                                    Batch(table="gpu_workloads_hourly", data=running, slices=hours, context=where)]
                           + refused, state, watermark=watermark)

    @staticmethod
    def _unchanged(con: duckdb.DuckDBPyConnection, source: str, new: pa.Table, start: datetime, end: datetime,
                   table: str = "gpu_metrics_hourly", compared: tuple[str, ...] = COMPARED) -> bool:
        cols = ", ".join(f'"{c}"' for c in compared)
        con.register("_prometheus_new", new)
        try:
            stored = f"SELECT {cols} FROM {table} WHERE source = ? AND hour >= ? AND hour < ?"
            diff = con.execute(f"SELECT count(*) FROM ((SELECT {cols} FROM _prometheus_new EXCEPT ALL {stored}) "
                               f"UNION ALL ({stored} EXCEPT ALL SELECT {cols} FROM _prometheus_new))",
                               [source, start, end, source, start, end]).fetchall()[0][0]
        finally:
            con.unregister("_prometheus_new")
        return diff == 0


INGESTORS = [Prometheus]
