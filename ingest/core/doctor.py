"""``gpufinops doctor``'s shared pieces for each source type's reachability check (docs/architecture.md, *Add a
source*): a source's spec carries its check (``IngestorMeta.doctor``), defined in the doctor module of the source's
own room (``ingest/<room>/doctor.py``), and ``gpufinops doctor`` iterates the registry.

A check is ``check(source, base_dir, timeout) -> (status, detail, fix)``: a cheap read of what the ingestor will
read, from the source's typed options (``source.parsed``); an exception becomes a failed check naming the call.
"""

from __future__ import annotations

import glob
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
Result = tuple[str, str, str | None]
GPU_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "nvidia_smi_utilization_gpu_ratio")


class ConfiguredSource(Protocol):
    """A configured source as a check reads it (``jobs.config.SourceConfig``): its name and typed options."""

    @property
    def name(self) -> str: ...

    @property
    def parsed(self) -> Any: ...


Check = Callable[[ConfiguredSource, Path, float], Result]


def options(source: ConfiguredSource) -> Any:
    """The source's typed options (its spec's ``Options``, parsed once by the config loader)."""
    return source.parsed


def _paths(pattern: str | list[str] | None, base_dir: Path) -> list[str]:
    patterns = [pattern] if isinstance(pattern, str) else list(pattern or [])
    found: list[str] = []
    for p in patterns:
        full = os.path.expanduser(p)
        full = full if os.path.isabs(full) else str(base_dir / full)
        found += [f for f in glob.glob(full, recursive=True) if os.path.isfile(f)]
    return sorted(set(found))


def files(source: ConfiguredSource, base_dir: Path, key: str = "path") -> Result:
    pattern = getattr(options(source), key)
    matched = _paths(pattern, base_dir)
    if not matched:
        return (
            FAIL,
            f"{key} {pattern!r} matches no file (relative to {base_dir})",
            f'point sources.{source.name}.{key} at the files (a glob like "logs/*.csv")',
        )
    return OK, f"{len(matched)} file(s) match {pattern!r}", None


def export_folder(source: ConfiguredSource, path: str, base_dir: Path, manifest: str, found: str, fill: str) -> Result:
    """The check of an export synced to a local folder: ``path`` (relative to the config's folder) is a
    directory, and how many ``manifest`` files stand anywhere below it (none yet: a warning, with ``fill``)."""
    root = Path(os.path.expanduser(path))
    root = root if root.is_absolute() else base_dir / root
    if not root.is_dir():
        return FAIL, f"path {root} is not a directory", f"point sources.{source.name}.path at the synced export"
    manifests = list(root.rglob(manifest))
    if not manifests:
        return WARN, f"{root}: no {manifest} yet", fill
    return OK, f"{root}: {len(manifests)} {found}", None


def path_files(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    """The check of a source that reads local files only: its ``path`` matches some."""
    return files(source, base_dir)


def _get(url: str) -> tuple[urllib.request.Request, str]:
    """The GET ingest makes (``user:password@`` becomes Basic auth) and the URL without its credentials."""
    from gpufinops.ingest.metrics import scrape

    request = scrape._request(url)
    request.add_header("User-Agent", "gpufinops-doctor")
    return request, scrape.display_url(url)


def http_get(url: str, timeout: float, expect: tuple[str, ...] | None = GPU_METRICS) -> Result:
    request, url = _get(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(4_000_000).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return FAIL, f"GET {url}: HTTP {exc.code}", "check the URL and path (a DCGM exporter serves /metrics)"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return FAIL, f"GET {url}: {reason}", "check the host, port and firewall from this machine"
    if expect and not any(name in body for name in expect):
        return WARN, f"GET {url}: answers, but no {' / '.join(expect)} metric", "is this a DCGM or nvidia_smi exporter?"
    return OK, f"GET {url}: answers{' with GPU metrics' if expect else ''}", None


def series_count(base: str, query: str, timeout: float) -> tuple[int, None] | tuple[None, Result]:
    """What Prometheus at `base` answers to an instant `count(...)` query: (the count, None), with 0 for an
    empty result; or (None, the FAIL naming the URL, with its userinfo masked) when it does not answer."""
    url = _get(base)[1]
    target = _get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': query})}")[0]
    try:
        with urllib.request.urlopen(target, timeout=timeout) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return None, (FAIL, f"Prometheus {url}: HTTP {exc.code} on /api/v1/query", "check the URL (the server's root)")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, (FAIL, f"Prometheus {url}: {getattr(exc, 'reason', exc)}", "check the host, port and firewall")
    result = answer.get("data", {}).get("result", [])
    return (int(float(result[0]["value"][1])) if result else 0), None
