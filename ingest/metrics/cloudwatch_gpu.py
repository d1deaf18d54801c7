"""``cloudwatch_gpu``: the CloudWatch agent's NVIDIA GPU metrics (``nvidia_smi_*`` in ``CWAgent``) → hourly rollups.

The CloudWatch agent's ``nvidia_gpu`` section publishes one series per GPU and metric in the ``CWAgent``
namespace (``nvidia_smi_utilization_gpu`` %, ``nvidia_smi_memory_used`` / ``_memory_total`` MiB,
``nvidia_smi_power_draw`` W, …) with the dimensions ``index`` (the GPU's index), ``name`` (its model) and
``host``, plus what the agent's config appends (``InstanceId`` with ``append_dimensions``, ``arch``, …).
This is what AWS Compute Optimizer reads for GPU instances.

Each run lists the series (``ListMetrics``, paginated) and asks ``GetMetricData`` for hourly statistics,
pushed down: utilisation ``Average``, ``Maximum``, ``p95`` (an extended statistic) and ``SampleCount``,
memory ``Maximum``, power ``Average``, 500 queries a call, following ``NextToken``. Incremental by time like
``prometheus``: ``[cursor − lookback_hours, last complete hour)``, the first run ``backfill_days`` back,
``--since``/``--until`` override both; each hour is a slice replaced whole; a run whose hours come back
identical to what is stored is skipped. A GPU is ``<InstanceId or host>:<index>`` (the agent does not
publish the GPU's UUID); its ``InstanceId`` is the resource hint attribution matches to the bill.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from gpufinops.ingest.aws import aws_common
from gpufinops.ingest.core import paging, registry, spec_facts
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import ResourceMapOptions, option
from gpufinops.ingest.metrics import doctor, hourly_source, metrics_attribution, metrics_store
from gpufinops.warehouse import domains
from gpufinops.warehouse.gpu_models import normalize_gpu_model
from gpufinops.warehouse.metrics_schema import GPU_METRICS_HOURLY

log = logging.getLogger(__name__)

NAMESPACE = "CWAgent"
PERIOD_S = 3600
QUERIES_PER_CALL = 500  # GetMetricData's limit
# metric -> [(statistic, gpu_metrics_hourly column)]
STATISTICS = {
    "nvidia_smi_utilization_gpu": [
        ("Average", "util_mean"),
        ("Maximum", "util_max"),
        ("p95", "util_p95"),
        ("SampleCount", "samples"),
    ],
    "nvidia_smi_memory_used": [("Maximum", "mem_used_max_mib")],
    "nvidia_smi_memory_total": [("Maximum", "mem_total_mib")],
    "nvidia_smi_power_draw": [("Average", "power_mean_w")],
}
COMPARED = (
    "hour",
    "gpu_uuid",
    "gpu_model",
    "host",
    "resource_hint",
    "util_mean",
    "util_p95",
    "util_max",
    "mem_used_max_mib",
    "mem_total_mib",
    "power_mean_w",
    "samples",
)


def _hour(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True, kw_only=True)
class CloudWatchGpuOptions(ResourceMapOptions, aws_common.AwsClientOptions):
    region: str = option(doc="the AWS region whose CloudWatch holds the agent's metrics")
    namespace: str = option(NAMESPACE, "the CloudWatch namespace the agent publishes to")
    instance_ids: list[str] | None = option(
        None, "only these EC2 instances (default: every GPU series in the namespace)"
    )
    lookback_hours: float = option(3.0, "complete hours re-read before the cursor on every run (late datapoints)")
    backfill_days: float = option(7.0, "how far back the first run (or --full-refresh) reads")

    def window_lookback(self, declared: timedelta) -> timedelta:
        return timedelta(hours=self.lookback_hours)


def _call(source: str, what: str, fn, **kwargs) -> dict:
    try:
        return fn(**kwargs)
    except Exception as exc:
        if aws_common.is_client_error(exc):
            raise aws_common.describe_error(source, what, exc) from None
        raise


def list_gpus(cw: Any, source: str, namespace: str, instance_ids: set[str] | None) -> dict[tuple, dict[str, list]]:
    """GPU (its dimensions, sorted) -> metric name -> the series' Dimensions, from ListMetrics."""
    gpus: dict[tuple, dict[str, list]] = {}
    for metric in STATISTICS:
        token, pages = None, paging.Pages(source, f"ListMetrics of {namespace}/{metric}")
        while True:
            kwargs = {"Namespace": namespace, "MetricName": metric, **({"NextToken": token} if token else {})}
            page = _call(source, f"ListMetrics of {namespace}/{metric}", cw.list_metrics, **kwargs)
            for series in page.get("Metrics", []):
                dims = tuple(sorted((d["Name"], d["Value"]) for d in series.get("Dimensions", [])))
                named = dict(dims)
                if "index" not in named or (instance_ids and named.get("InstanceId") not in instance_ids):
                    continue  # not one GPU's series (an aggregate), or an instance not asked for
                # queried with the dimensions as listed (CloudWatch ignores their order; moto does not)
                gpus.setdefault(dims, {})[metric] = [
                    {"Name": d["Name"], "Value": d["Value"]} for d in series["Dimensions"]
                ]
            token = pages.follow(page.get("NextToken"))
            if not token:
                break
    return gpus


def _queries(gpus: dict[tuple, dict[str, list]], namespace: str) -> tuple[list[dict], dict[str, tuple]]:
    queries, meaning = [], {}
    for g, (dims, metrics) in enumerate(sorted(gpus.items())):
        for metric, dimensions in sorted(metrics.items()):
            for s, (stat, column) in enumerate(STATISTICS[metric]):
                query_id = f"g{g}_{metric.removeprefix('nvidia_smi_')}_{s}"
                queries.append(
                    {
                        "Id": query_id,
                        "ReturnData": True,
                        "MetricStat": {
                            "Metric": {"Namespace": namespace, "MetricName": metric, "Dimensions": dimensions},
                            "Period": PERIOD_S,
                            "Stat": stat,
                        },
                    }
                )
                meaning[query_id] = (dims, column, f"{metric} {stat}")
    return queries, meaning


def fetch_hourly(
    cw: Any, source: str, gpus: dict[tuple, dict[str, list]], namespace: str, start: datetime, end: datetime
) -> dict[tuple, dict[str, float]]:
    """(GPU dimensions, hour) -> column -> value, for every hour CloudWatch has a datapoint in."""
    queries, meaning = _queries(gpus, namespace)
    values: dict[tuple, dict[str, float]] = {}
    for i in range(0, len(queries), QUERIES_PER_CALL):
        token, pages = (
            None,
            paging.Pages(source, f"GetMetricData of {namespace} (queries {i + 1}–{i + QUERIES_PER_CALL})"),
        )
        while True:
            kwargs = {
                "MetricDataQueries": queries[i : i + QUERIES_PER_CALL],
                "StartTime": start,
                "EndTime": end,
                "ScanBy": "TimestampAscending",
                **({"NextToken": token} if token else {}),
            }
            page = _call(source, "GetMetricData", cw.get_metric_data, **kwargs)
            for result in page.get("MetricDataResults", []):
                dims, column, statistic = meaning[result["Id"]]
                if result.get("StatusCode") not in (None, "Complete", "PartialData"):
                    raise IngestError(f"{source}: GetMetricData answered {result.get('StatusCode')} for {result['Id']}")
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", [])):
                    hour = _hour(stamp)
                    if start <= hour < end:
                        values.setdefault((dims, hour), {})[column] = _checked(
                            source, statistic, dims, hour, column, value
                        )
            token = pages.follow(page.get("NextToken"))
            if not token:
                break
    return values


def _checked(source: str, statistic: str, dims: tuple, hour: datetime, column: str, value: Any) -> float:
    """``value`` as a float when it lies in its column's declared domain, else one sentence naming the series."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    why = domains.reason("gpu_metrics_hourly", column, number)
    if why is None:
        return number
    series = ", ".join(f"{k} {v}" for k, v in dims)
    raise IngestError(
        f"{source}: GetMetricData {statistic} of series ({series}) at {hour:%Y-%m-%d %H:%M} UTC: "
        f"value {str(value)[:40]!r} {why}"
    )


def hourly_table(values: dict[tuple, dict[str, float]], source: str, run_id: str) -> pa.Table:
    """gpu_metrics_hourly rows (resource_id / team left to attribution) from the hourly statistics."""
    rows = []
    for (dims, hour), figures in sorted(values.items()):
        if not figures.get("samples"):
            continue  # no utilisation datapoint in the hour: unknown, not idle
        named = dict(dims)
        machine = named.get("InstanceId") or named.get("host")
        rows.append(
            {
                "hour": hour,
                "gpu_uuid": f"{machine}:{named['index']}",
                "gpu_model": normalize_gpu_model(named.get("name"), figures.get("mem_total_mib")),
                "host": named.get("host") or named.get("InstanceId"),
                "resource_hint": named.get("InstanceId"),
                "samples": int(figures["samples"]),
                "source": source,
                "ingest_run_id": run_id,
                **{k: v for k, v in figures.items() if k != "samples"},
            }
        )
    columns = {f.name: [r.get(f.name) for r in rows] for f in GPU_METRICS_HOURLY}
    return pa.table(columns, schema=GPU_METRICS_HOURLY)


class CloudWatchGpu:
    meta = registry.IngestorMeta(
        **spec_facts.AWS_API,
        **hourly_source.QUERIED_BY_THE_HOUR,
        name="cloudwatch_gpu",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        default_schedule="17 * * * *",
        options=CloudWatchGpuOptions,
        description="the CloudWatch agent's NVIDIA GPU metrics (`nvidia_smi_*` in `CWAgent`) through "
        "`ListMetrics` + `GetMetricData`, hourly statistics pushed down",
        freshness=registry.Freshness(kind="metrics", lag_hours=2.0),
        doctor=doctor.cloudwatch_gpu,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: CloudWatchGpuOptions = ctx.options
        resource_map = dict(options.resource_map)
        instance_ids, namespace = options.instance_ids, options.namespace
        start, end = ctx.window.whole_hours(datetime.now(UTC), timedelta(days=options.backfill_days))
        state = {"cursor": end.isoformat()}
        rules = metrics_attribution.rules_batches(ctx, resource_map)
        if end <= start:
            return hourly_source.no_complete_hour(ctx, state, rules)
        cw = aws_common.client("cloudwatch", ctx.source, options)
        gpus = list_gpus(cw, ctx.source, namespace, set(instance_ids) if instance_ids else None)
        values = fetch_hourly(cw, ctx.source, gpus, namespace, start, end) if gpus else {}
        new = hourly_table(values, ctx.source, ctx.run_id)
        log.info("%s: %d GPU series, %d GPU-hours from %s to %s", ctx.source, len(gpus), new.num_rows, start, end)
        hours = [
            (start + timedelta(hours=h)).strftime(metrics_store.HOUR_FORMAT)
            for h in range(int((end - start) / timedelta(hours=1)))
        ]
        if not ctx.window.full_refresh and hourly_source.hours_unchanged(
            ctx.con, ctx.source, new, (start, end), "gpu_metrics_hourly", COMPARED
        ):
            return FetchResult(rules, state, watermark=end.isoformat(), skipped_reason="no new or changed hours")
        return FetchResult(
            rules
            + [Batch(table="gpu_metrics_hourly", data=new, slices=hours, context=f"GetMetricData of {namespace}")],
            state,
            watermark=end.isoformat(),
        )


INGESTORS = [CloudWatchGpu]
