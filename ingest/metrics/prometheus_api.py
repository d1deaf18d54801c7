"""A Prometheus server's HTTP API: the client, and the hourly GPU figures pushed down to it.

One ``/api/v1/query_range`` per figure with an hourly step (``avg_over_time``,
``quantile_over_time(0.95, …)``, ``max_over_time``, ``min_over_time``, ``count_over_time`` over exactly
one hour: each evaluation at ``hour end − 1 ms`` covers the samples in ``[hour, hour + 1 h)``), in both
dialects: DCGM exporter (``DCGM_FI_*``) and nvidia_gpu_exporter (``nvidia_smi_*``). The ``prometheus``
ingestor (``prometheus.py``) combines the partials; ``serving_prometheus`` uses the client.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from gpufinops.ingest.core.bounds import Bounds
from gpufinops.ingest.core.registry import IngestError
from gpufinops.ingest.core.validate_metrics import bad_figure
from gpufinops.ingest.metrics import metrics_attribution
from gpufinops.ingest.metrics.scrape import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, display_url, fetch_text

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
    # the profiling fields the busy-waste kinds read (the minute-level shape is the sample store's alone)
    "gr_p95": "quantile_over_time(0.95, DCGM_FI_PROF_GR_ENGINE_ACTIVE{m}[{r}])",
    "occupancy_mean": "avg_over_time(DCGM_FI_PROF_SM_OCCUPANCY{m}[{r}])",
    "fp16_mean": "avg_over_time(DCGM_FI_PROF_PIPE_FP16_ACTIVE{m}[{r}])",
    "fp32_mean": "avg_over_time(DCGM_FI_PROF_PIPE_FP32_ACTIVE{m}[{r}])",
    "fp64_mean": "avg_over_time(DCGM_FI_PROF_PIPE_FP64_ACTIVE{m}[{r}])",
    "dram_mean": "avg_over_time(DCGM_FI_PROF_DRAM_ACTIVE{m}[{r}])",
    "dram_p95": "quantile_over_time(0.95, DCGM_FI_PROF_DRAM_ACTIVE{m}[{r}])",
    "pcie_tx_mean": "avg_over_time(DCGM_FI_PROF_PCIE_TX_BYTES{m}[{r}])",
    "pcie_rx_mean": "avg_over_time(DCGM_FI_PROF_PCIE_RX_BYTES{m}[{r}])",
    "nvlink_tx_mean": "avg_over_time(DCGM_FI_PROF_NVLINK_TX_BYTES{m}[{r}])",
    "nvlink_rx_mean": "avg_over_time(DCGM_FI_PROF_NVLINK_RX_BYTES{m}[{r}])",
}
PROFILING_FIGURES = (
    "gr_p95",
    "occupancy_mean",
    "fp16_mean",
    "fp32_mean",
    "fp64_mean",
    "dram_mean",
    "dram_p95",
    "pcie_tx_mean",
    "pcie_rx_mean",
    "nvlink_tx_mean",
    "nvlink_rx_mean",
)
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
FIGURES = (
    "util_mean",
    "util_p95",
    "util_max",
    "samples",
    "mem_used_max",
    "mem_free_min",
    "mem_reserved_max",
    "mem_total_max",
    "sm_mean",
    "gr_mean",
    "tensor_mean",
    "power_mean",
    *PROFILING_FIGURES,
)
# What a GPU's series says of it, carried into its partial rows: its model's name, the machine and the cloud
# resource it runs on, and the Kubernetes workload that holds it (the sample store's labels, in its order).
SERIES_LABELS = ("name", "host", "resource_hint", "provider_id", "namespace", "pod", "container")
PARTIAL_SCHEMA = pa.schema(
    [
        ("hour", pa.timestamp("s", tz="UTC")),
        ("gpu_uuid", pa.string()),
        ("mig_instance", pa.string()),
        *[(label, pa.string()) for label in SERIES_LABELS],
        ("vgpu", pa.string()),
    ]
    + [(f, pa.float64()) for f in FIGURES]
)


class SeriesOptions(Protocol):
    """What the queries read of a source's options (``PrometheusOptions``)."""

    @property
    def selector(self) -> str | None: ...

    @property
    def resource_label(self) -> str: ...

    @property
    def provider_id_label(self) -> str: ...


def _asked(params: dict[str, Any] | None) -> str:
    """The query a request asked, as an error names it (a long one keeps its start and end)."""
    query = str((params or {}).get("query") or "")
    if not query:
        return ""
    return f" of {query if len(query) <= 80 else query[:50] + '…' + query[-20:]!r}"


class PrometheusClient:
    def __init__(
        self,
        url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        bounds: Bounds | None = None,
    ) -> None:
        self.address = url.rstrip("/")  # may hold user:password@ (sent as HTTP Basic auth)
        self.url = display_url(self.address)  # what messages name
        self.timeout_s, self.retries, self.bounds = timeout_s, retries, bounds

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            body = json.loads(
                fetch_text(
                    f"{self.address}{path}{query}", timeout_s=self.timeout_s, retries=self.retries, bounds=self.bounds
                )
            )
        except urllib.error.HTTPError as exc:  # Prometheus explains a bad query in the body
            try:
                body = json.loads(exc.read().decode())
            except ValueError:
                raise IngestError(f"Prometheus at {self.url} answered {exc.code} to {path}") from None
        except (OSError, ValueError) as exc:
            raise IngestError(
                f"Prometheus at {self.url} is unreachable or answered badly: {getattr(exc, 'reason', None) or exc}"
            ) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body if not isinstance(body, dict) else f"{body.get('errorType')}: {body.get('error')}"
            raise IngestError(f"Prometheus at {self.url} refused {path}{_asked(params)}: {said}")
        data = body.get("data")
        if not isinstance(data, dict) or ("result" not in data and path.endswith(("/query", "/query_range"))):
            shown = json.dumps(data)[:60] if data is not None else "none"
            raise IngestError(
                f"Prometheus at {self.url}: GET {path}{_asked(params)} answered success without data ({shown})"
            )
        return data

    def range_inclusive(self) -> bool:
        """Prometheus 2 range selectors include their start; 3 and later exclude it."""
        version = str(self.get("/api/v1/status/buildinfo").get("version", "2"))
        return int(version.split(".")[0]) < 3

    def query_range(self, query: str, start_s: float, end_s: float, step_s: int) -> list[dict]:
        data = self.get(
            "/api/v1/query_range",
            {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": str(step_s)},
        )
        return data["result"]


def _series_key(labels: dict[str, str], dialect: str, options: SeriesOptions) -> tuple:
    host = labels.get("Hostname") or labels.get("instance", "").rsplit(":", 1)[0] or None
    if dialect == "dcgm":
        mig = f"{labels['GPU_I_PROFILE']}/{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else None
        uuid = labels.get("UUID") or (f"{host}:{labels['gpu']}" if labels.get("gpu") else None)
        return (
            uuid,
            mig,
            labels.get("modelName"),
            host,
            labels.get(options.resource_label),
            labels.get(options.provider_id_label),
            *metrics_attribution.workload_labels(labels),
            labels.get("vgpu") or None,
        )
    return (
        labels.get("uuid"),
        None,
        None,
        host,
        labels.get(options.resource_label),
        labels.get(options.provider_id_label),
        None,
        None,
        None,
        None,
    )


class _Partials:
    """The series-hours of one fetch, as they come back figure by figure; GPU names from ``info``."""

    def __init__(self, client: PrometheusClient, options: SeriesOptions, rejects: list[dict] | None) -> None:
        self.client, self.options, self.rejects = client, options, rejects
        self.rows: dict[tuple, dict[str, Any]] = {}
        self.names: dict[str, str] = {}

    def add(self, query: str, dialect: str, figure: str, series: dict) -> None:
        labels = series["metric"]
        if figure == "info":
            if labels.get("uuid") and labels.get("name"):
                self.names[labels["uuid"]] = labels["name"]
            return
        key = _series_key(labels, dialect, self.options)
        if key[0] is None:
            return
        for stamp, value in series["values"]:
            hour = round(float(stamp) + 0.001) - HOUR_S
            row = self.rows.setdefault((hour, *key), {})
            row[figure] = _checked_figure(self.client, query, figure, key, hour, value, row, self.rejects)

    def table(self) -> pa.Table:
        data: dict[str, list] = {name: [] for name in PARTIAL_SCHEMA.names}
        for key, figures in self.rows.items():
            if figures.get("_rejected"):
                continue
            hour, uuid, mig, name, *rest = key  # rest: host, hint, provider, namespace, pod, container, vgpu
            labels = (hour, uuid, mig, name or self.names.get(uuid), *rest)
            for column, value in zip(PARTIAL_SCHEMA.names[:11], labels):
                data[column].append(value)
            for figure in FIGURES:
                data[figure].append(figures.get(figure))
        return pa.table(data, schema=PARTIAL_SCHEMA)


def fetch_partials(
    client: PrometheusClient, start: datetime, end: datetime, options: SeriesOptions, rejects: list[dict] | None = None
) -> pa.Table:
    """One row per series and hour in [start, end): the pushed-down hourly figures. A figure that is
    not finite or out of range (``NaN``, ``+Inf``, utilisation over 100) fails the run naming the
    query, series and hour, or with ``rejects`` (skip_rows) drops that series-hour and records it."""
    selector = "{" + options.selector + "}" if options.selector else ""
    window = "1h" if not client.range_inclusive() else f"{HOUR_S * 1000 - 1}ms"
    partials = _Partials(client, options, rejects)
    first, last = int(start.timestamp()) // HOUR_S, int(end.timestamp()) // HOUR_S
    for chunk in range(first, last, CHUNK_HOURS):
        chunk_end = min(chunk + CHUNK_HOURS, last)
        # evaluated at each hour's end - 1 ms: the range covers [hour, hour + 1 h)
        eval_start, eval_end = (chunk + 1) * HOUR_S - 0.001, chunk_end * HOUR_S - 0.001
        for dialect, queries in (("dcgm", DCGM_QUERIES), ("nvidia_smi", SMI_QUERIES)):
            for figure, template in queries.items():
                query = template.format(m=selector, r=window)
                for series in client.query_range(query, eval_start, eval_end, HOUR_S):
                    partials.add(query, dialect, figure, series)
    return partials.table()


def _checked_figure(
    client: PrometheusClient,
    query: str,
    figure: str,
    key: tuple,
    hour: int,
    value: Any,
    row: dict[str, Any],
    rejects: list[dict] | None,
) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    why = bad_figure(figure, number)
    if why is None:
        return number
    when = datetime.fromtimestamp(hour, UTC).isoformat()
    if rejects is None:
        raise IngestError(
            f"Prometheus at {client.url} answered {value!r} for {query} (GPU {key[0]}, hour {when}), which {why}"
        )
    rejects.append(
        {
            "file": f"{client.url} {query}",
            "row": None,
            "column": figure,
            "value": str(value),
            "reason": f"{why} (GPU {key[0]}, hour {when})",
        }
    )
    row["_rejected"] = True
    return None
