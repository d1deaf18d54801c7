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


def target_results(source: ConfiguredSource, base_dir: Path, timeout: float, expect: tuple[str, ...]) -> list[Result]:
    """One result per scraped target of the source (its ``targets`` option): a URL answers with one of the
    ``expect`` series, a ``file://`` URL or a path/glob matches a file."""
    targets = options(source).targets or []
    results = []
    for target in [targets] if isinstance(targets, str) else targets:
        if target.startswith(("http://", "https://")):
            results.append(http_get(target, timeout, expect=expect))
            continue
        path = target[len("file://") :] if target.startswith("file://") else target
        found = _paths(path, base_dir)
        results.append(
            (OK, f"{len(found)} file(s) match {path!r}", None)
            if found
            else (FAIL, f"{path!r} matches no file", f"fix sources.{source.name}.targets")
        )
    return results


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
    results = target_results(source, base_dir, timeout, GPU_METRICS)
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
    selector = options(source).selector
    wanted = {metric: f"{metric}{{{selector}}}" if selector else metric for metric in GPU_METRICS}
    missing = f"{' / '.join(GPU_METRICS)} series in the last day" + (f" matching {selector}" if selector else "")
    return last_day_series(source, timeout, wanted, missing, "scrape the DCGM exporters from it (or fix the selector)")


def last_day_series(source: ConfiguredSource, timeout: float, wanted: dict[str, str], missing: str, fix: str) -> Result:
    """OK with the count of the first ``wanted`` series (what it is called: its selector) that the source's
    Prometheus saw in the last day (an instant query sees only the last 5 minutes); WARN naming what is
    ``missing`` and how to ``fix`` it when it saw none; the FAIL of a server that does not answer."""
    base = str(options(source).url).rstrip("/")
    url = _get(base)[1]
    for name, series in wanted.items():
        count, failed = series_count(base, f"count(last_over_time({series}[1d]))", timeout)
        if failed:
            return failed
        if count:
            return OK, f"Prometheus {url}: {count:,} {name} series in the last day", None
    return WARN, f"Prometheus {url} answers, but has no {missing}", fix


def nvidia_smi_csv(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)


# --- serving metrics: a server's /metrics answers with one of the serving counters (or its files match); a
# Prometheus server holds serving counter series from the last day

COUNTERS = ("vllm:", "tgi_request", "nv_inference_request_success", "nv_llm_", "sglang:")


def serving_exporter(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    results = target_results(source, base_dir, timeout, COUNTERS)
    worst = [r for r in results if r[0] == FAIL] or [r for r in results if r[0] == WARN]
    if worst:
        return worst[0]
    return OK, f"{len(results)} target(s) answer with serving counters", None


def prometheus_serving(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.metrics.serving_counters import SAMPLE_NAMES

    selector = options(source).selector
    matchers = f'__name__=~"{"|".join(SAMPLE_NAMES)}"' + (f",{selector}" if selector else "")
    return last_day_series(
        source,
        timeout,
        {"serving counter": f"{{{matchers}}}"},
        "serving counter series in the last day",
        "scrape the inference servers' /metrics from it (or fix the selector)",
    )
