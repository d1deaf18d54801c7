"""``gpufinops doctor``'s checks of the Azure source types (``ingest.core.doctor``: each spec carries its check)."""

from __future__ import annotations

from pathlib import Path

from gpufinops.ingest.core.doctor import FAIL, OK, ConfiguredSource, Result, export_folder, options


def azure_cost_export(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    opts = options(source)
    if opts.path:
        fill = "copy the export's folders there (azcopy sync)"
        return export_folder(source, opts.path, base_dir, "manifest.json", "export run manifest(s)", fill)
    from gpufinops.ingest.azure.azure_export_store import BlobStore

    store = BlobStore.connect(source.name, opts)
    pages = store.container.list_blobs(name_starts_with=store.prefix, results_per_page=1).by_page()
    first: list[object] = list(next(iter(pages), []))
    return OK, f"{store.url}: listing answers ({len(first)} object(s) on the first page)", None


def azure_prices(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    import dataclasses

    from gpufinops.ingest.core import transport

    opts = options(source)
    url = f"{opts.endpoint}?$filter=serviceName%20eq%20%27Virtual%20Machines%27&$top=1"
    bounds = dataclasses.replace(
        opts.bounds(), timeout_s=timeout, connect_timeout_s=min(timeout, opts.connect_timeout_s)
    )
    try:
        answer = transport.request(
            source.name, f"GET {opts.endpoint}", "GET", url, bounds, {"Accept": "application/json"}
        )
    except OSError as exc:  # refused, unresolvable, TLS: the endpoint and why, as the other providers' checks say
        reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
        return FAIL, f"{opts.endpoint} can not be reached: {reason}", "check endpoint (or the proxy in front of it)"
    if answer.status != 200:
        return FAIL, f"{opts.endpoint} answered HTTP {answer.status}", "check endpoint (or the proxy in front of it)"
    return OK, f"{opts.endpoint} answers (HTTP {answer.status})", None
