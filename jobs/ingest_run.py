"""The ingest job: run the configured sources in config order, then refresh what the dashboard stores.

The command line (``gpufinops ingest``, interfaces/ingest_cmd.py), the daemon (jobs/serve.py), the demo
and the evaluation all run sources through :func:`run_configured`."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from gpufinops.derived import registry as derived
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import RunResult, run_source
from gpufinops.jobs import progress
from gpufinops.jobs.config import Config, ConfigError

log = logging.getLogger("gpufinops.ingest")


def run_configured(
    cfg: Config,
    names: list[str] | None = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    full_refresh: bool = False,
    step: progress.Steps | None = None,
    seconds: dict[str, float] | None = None,
    store_results: bool = True,
) -> list[RunResult]:
    """Run the named sources (default: every enabled one) in config order; ``step`` shows each one
    running, ``seconds`` collects how long each took. Then the dashboard's stored results are stored for the
    data held now, where a load changed it or they are stale (``store_results=False``: the caller stores them
    after its own last write, as the demo does)."""
    unknown = [n for n in names or [] if n not in cfg.sources]
    if unknown:
        raise ConfigError(
            f"sources.{unknown[0]}: no such source in the config (configured: {', '.join(cfg.sources) or 'none'})"
        )
    chosen = names or [n for n, s in cfg.sources.items() if s.enabled]
    registry = default_registry()
    configure_derived(derived_sections(cfg), cfg.warehouse_path, memory_limit=cfg.memory_limit)
    results = []
    for name in chosen:
        source = cfg.sources[name]
        if step is not None:
            step.start(f"ingest {name} ({source.type})")
        started = time.monotonic()
        results.append(
            run_source(
                registry,
                cfg.warehouse_path,
                name,
                source.type,
                source.parsed,
                team_tag_keys=cfg.team_tag_keys,
                since=since,
                until=until,
                full_refresh=full_refresh,
                base_dir=str(cfg.base_dir),
                memory_limit=cfg.memory_limit,
                secrets=cfg.secrets(),
            )
        )
        if seconds is not None:
            seconds[name] = time.monotonic() - started
        if step is not None:
            step.done()
    if store_results and (any(r.status == "succeeded" for r in results) or page_results_stale(cfg)):
        store_page_results(cfg)
    return results


def configure_derived(sections: dict[str, Any], path: Path, *, memory_limit: str | None = None) -> list[str]:
    """Store each derived table's config section (``sections``: section name -> its settings) and re-apply the
    tables whose settings changed, whether or not a source has news; returns their names. A table that did not
    declare a changed section is not touched."""
    reapplied = []
    for spec in derived.configured():
        if spec.configure is not None and spec.section in sections:
            if spec.configure(path, sections[spec.section], memory_limit=memory_limit):
                reapplied.append(spec.name)
    return reapplied


def derived_sections(cfg: Config) -> dict[str, Any]:
    """The config sections the derived tables declared, each as the loader parsed it."""
    return {s.section: getattr(cfg, s.section) for s in derived.specs() if s.section and hasattr(cfg, s.section)}


def page_results_stale(cfg: Config) -> bool:
    """The stored page results are missing or were computed on other data than the warehouse holds now (a load
    after them, a refresh that failed): an ingest whose sources had nothing new stores them again."""
    from gpufinops.warehouse import db, stored_results

    if not cfg.warehouse_path.exists():
        return False
    try:
        with db.reader(cfg.warehouse_path) as con:
            version, _at, _seconds, count = stored_results.computed(con)
            return not count or version != stored_results.data_version(con)
    except Exception as exc:  # a busy or unreadable warehouse: the next ingest tries again
        log.warning("could not tell whether the dashboard's stored results are current: %s", exc)
        return False


def store_page_results(cfg: Config) -> None:
    """What the dashboard's pages read that is dear to compute (the forecast and anomaly fits, the heaviest
    page queries), computed now on the data just loaded and stored in the warehouse
    (``dashboard.precomputed``). A failure here fails no load: the pages then compute it themselves."""
    from gpufinops.dashboard import precomputed

    try:
        precomputed.refresh(cfg.warehouse_path, memory_limit=cfg.memory_limit)
    except Exception as exc:  # the loads are committed; the pages compute what is missing (and say nothing else)
        log.warning("the dashboard's stored results were not refreshed (the pages compute them): %s", exc)
