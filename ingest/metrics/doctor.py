"""``gpufinops doctor``'s checks of the GPU and serving metrics source types (``ingest.core.doctor``: each spec carries its
check)."""

from __future__ import annotations

from pathlib import Path

from gpufinops.ingest.aws.doctor import aws_client
from gpufinops.ingest.core.doctor import (
    FAIL,
    GPU_METRICS,
    OK,
    WARN,
    ConfiguredSource,
    Result,
    _get,
    _paths,
    files,
    http_get,
    options,
    series_count,
)


def cloudwatch_gpu(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    cloudwatch = aws_client("cloudwatch", source, timeout, opts.region)
    listing = cloudwatch.list_metrics(Namespace=opts.namespace)
    series = len(listing.get("Metrics", []))
    more = "+" if listing.get("NextToken") else ""
    if not series:
        return (
            WARN,
            f"CloudWatch {opts.namespace} in {opts.region}: no metrics",
            "check the namespace and region, and that the CloudWatch agent publishes nvidia_smi_* metrics",
        )
    return OK, f"CloudWatch ListMetrics answers in {opts.region}: {series}{more} {opts.namespace} series", None


def dcgm_exporter(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    targets = options(source).targets or []
    targets = [targets] if isinstance(targets, str) else targets
    results = []
    for target in targets:
        if target.startswith(("http://", "https://")):
            results.append(http_get(target, timeout))
        else:
            path = target[len("file://") :] if target.startswith("file://") else target
            matched = _paths(path, base_dir)
            results.append(
                (OK, f"{len(matched)} file(s) match {path!r}", None)
                if matched
                else (FAIL, f"{path!r} matches no file", f"fix sources.{source.name}.targets")
            )
    failed = [r for r in results if r[0] == FAIL]
    worst = failed or [r for r in results if r[0] == WARN]
    if worst:
        return (
            worst[0][0],
            f"{len(results) - len(failed)} of {len(results)} target(s) answer; {worst[0][1]}",
            worst[0][2],
        )
    return OK, f"{len(results)} target(s) answer with GPU metrics", None


def prometheus(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    base = str(opts.url).rstrip("/")
    url = _get(base)[1]
    selector = opts.selector
    for metric in GPU_METRICS:  # series seen in the last day (an instant query sees only the last 5 minutes)
        series = f"{metric}{{{selector}}}" if selector else metric
        count, failed = series_count(base, f"count(last_over_time({series}[1d]))", timeout)
        if failed:
            return failed
        if count:
            return OK, f"Prometheus {url}: {count:,} {metric} series in the last day", None
    return (
        WARN,
        f"Prometheus {url} answers, but has no {' / '.join(GPU_METRICS)} series in the last day"
        + (f" matching {selector}" if selector else ""),
        "scrape the DCGM exporters from it (or fix the selector)",
    )


def nvidia_smi_csv(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)


# --- serving metrics: a server's /metrics answers with one of the serving counters (or its files match); a
# Prometheus server holds serving counter series from the last day

COUNTERS = ("vllm:", "tgi_request", "nv_inference_request_success", "nv_llm_", "sglang:")


def serving_exporter(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    targets = options(source).targets or []
    results = []
    for target in [targets] if isinstance(targets, str) else targets:
        if target.startswith(("http://", "https://")):
            results.append(http_get(target, timeout, expect=COUNTERS))
            continue
        path = target[len("file://") :] if target.startswith("file://") else target
        found = _paths(path, base_dir)
        results.append(
            (OK, f"{len(found)} file(s) match {path!r}", None)
            if found
            else (FAIL, f"{path!r} matches no file", f"fix sources.{source.name}.targets")
        )
    worst = [r for r in results if r[0] == FAIL] or [r for r in results if r[0] == WARN]
    if worst:
        return worst[0]
    return OK, f"{len(results)} target(s) answer with serving counters", None


def prometheus_serving(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.metrics.serving_counters import SAMPLE_NAMES

    opts = options(source)
    base = str(opts.url).rstrip("/")
    url = _get(base)[1]
    selector = opts.selector
    matchers = f'__name__=~"{"|".join(SAMPLE_NAMES)}"' + (f",{selector}" if selector else "")
    count, failed = series_count(base, f"count(last_over_time({{{matchers}}}[1d]))", timeout)
    if failed:
        return failed
    if count:
        return OK, f"Prometheus {url}: {count:,} serving counter series in the last day", None
    return (
        WARN,
        f"Prometheus {url} answers, but has no serving counter series in the last day",
        "scrape the inference servers' /metrics from it (or fix the selector)",
    )
