"""`gpufinops ingest`: run configured sources, one line each; `ingest list`: what is configured."""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import RunResult, run_source
from gpufinops.jobs import progress, tables
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.warehouse import allocation, carbon, db, freshness, queries

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
) -> list[RunResult]:
    """Run the named sources (default: every enabled one) in config order; ``step`` shows each one
    running, ``seconds`` collects how long each took."""
    unknown = [n for n in names or [] if n not in cfg.sources]
    if unknown:
        raise ConfigError(
            f"sources.{unknown[0]}: no such source in the config (configured: {', '.join(cfg.sources) or 'none'})"
        )
    chosen = names or [n for n, s in cfg.sources.items() if s.enabled]
    registry = default_registry()
    if cfg.allocation is not None:  # a changed [allocation] reallocates now, whether or not a source has news
        allocation.configure(cfg.warehouse_path, cfg.allocation, memory_limit=cfg.memory_limit)
    carbon.configure(cfg.warehouse_path, cfg.carbon, memory_limit=cfg.memory_limit)  # likewise a changed [carbon]
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
                source.typed(),
                team_tag_keys=cfg.team_tag_keys,
                since=since,
                until=until,
                full_refresh=full_refresh,
                base_dir=str(cfg.base_dir),
                memory_limit=cfg.memory_limit,
                secrets=cfg.secrets(),
                allocation_settings=cfg.allocation,
            )
        )
        if seconds is not None:
            seconds[name] = time.monotonic() - started
        if step is not None:
            step.done()
    if any(r.status == "succeeded" for r in results):
        store_page_results(cfg)
    return results


def store_page_results(cfg: Config) -> None:
    """What the dashboard's pages read that is dear to compute (the forecast and anomaly fits, the heaviest
    page queries), computed now on the data just loaded and stored in the warehouse
    (``dashboard.precomputed``). A failure here fails no load: the pages then compute it themselves."""
    from gpufinops.dashboard import precomputed

    try:
        precomputed.refresh(cfg.warehouse_path, memory_limit=cfg.memory_limit)
    except Exception as exc:  # the loads are committed; the pages compute what is missing (and say nothing else)
        log.warning("the dashboard's stored results were not refreshed (the pages compute them): %s", exc)


def run(cfg: Config, names: list[str], **kwargs) -> int:
    if not cfg.sources:
        print("gpufinops: no sources configured (add [sources.<name>] tables to the config)", file=sys.stderr)
        return 2
    results, seconds = run_with_progress(cfg, names, **kwargs)
    tables.print_runs(results, seconds)
    for r in results:
        if r.rejected:  # quarantined rows (on_invalid = "skip_rows"): where they are
            print(f"{r.source}: {r.rows} rows  ({r.rejected} rejected, see ingest_rejects)")
        if r.error:
            print(f"gpufinops: {r.error}", file=sys.stderr)
    return 1 if any(not r.ok for r in results) else 0


def run_with_progress(
    cfg: Config, names: list[str] | None = None, **kwargs
) -> tuple[list[RunResult], dict[str, float]]:
    """``run_configured`` under a progress bar (on a terminal only); also how long each source took."""
    count = len(names or [n for n, s in cfg.sources.items() if s.enabled])
    seconds: dict[str, float] = {}
    with progress.steps(count, "ingest") as step:
        results = run_configured(cfg, names, step=step, seconds=seconds, **kwargs)
    return results, seconds


def list_sources(cfg: Config) -> int:
    status, fresh = {}, {}
    if cfg.warehouse_path.exists():
        with db.reader(cfg.warehouse_path) as con:
            status = {row["source"]: row for row in queries.ingest_status(con).iter_rows(named=True)}
            fresh = {row["source"]: row for row in freshness.source_freshness(con).iter_rows(named=True)}
    rows = []
    for name, source in cfg.sources.items():
        s, f = status.get(name, {}), fresh.get(name)
        data = "no run yet" if f is None else (("STALE: " if f["stale"] else "") + f["message"].split(" (expected")[0])
        rows.append(
            {
                "source": name,
                "type": source.type,
                "schedule": source.schedule,
                "last_run": s.get("last_started_at") or "never",
                "status": s.get("last_status"),
                "data": data,
                "watermark": s.get("watermark"),
            }
        )
    if not rows:
        print("no sources configured (add [sources.<name>] tables to the config; `gpufinops init` writes one)")
        return 0
    tables.print_sources(rows)
    return 0
