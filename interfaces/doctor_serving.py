"""``gpufinops doctor``'s checks of the serving-metrics sources (``serving_exporter``, ``prometheus_serving``).

A server's ``/metrics`` answers with one of the serving counters (or its files match); a Prometheus server
holds serving counter series from the last day. Same results as ``interfaces.doctor_sources``: (status, what, fix),
from the same typed options; each type's spec names its check here (``IngestorMeta.doctor``).
"""

from __future__ import annotations

from pathlib import Path

from gpufinops.ingest.core.doctor import (
    FAIL,
    OK,
    WARN,
    Result,
    _get,
    _paths,
    http_get,
    options,
    series_count,
)
from gpufinops.jobs.config import SourceConfig

COUNTERS = ("vllm:", "tgi_request", "nv_inference_request_success", "nv_llm_", "sglang:")


def serving_exporter(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
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


def prometheus_serving(source: SourceConfig, base_dir: Path, timeout: float) -> Result:
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
