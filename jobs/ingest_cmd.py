"""`gpufinops ingest`: run configured sources, one line each; `ingest list`: what is configured."""

from __future__ import annotations

import sys
from datetime import datetime

from ingest.registry import default_registry
from ingest.runner import RunResult, run_source
from jobs.config import Config, ConfigError
from warehouse import allocation, db, freshness, queries


def run_configured(cfg: Config, names: list[str] | None = None, *, since: datetime | None = None,
                   until: datetime | None = None, full_refresh: bool = False) -> list[RunResult]:
    """Run the named sources (default: every enabled one) in config order."""
    unknown = [n for n in names or [] if n not in cfg.sources]
    if unknown:
        raise ConfigError(f"sources.{unknown[0]}: no such source in the config "
                          f"(configured: {', '.join(cfg.sources) or 'none'})")
    chosen = names or [n for n, s in cfg.sources.items() if s.enabled]
    registry = default_registry()
    if cfg.allocation is not None:  # a changed [allocation] reallocates now, whether or not a source has news
        allocation.configure(cfg.warehouse_path, cfg.allocation, memory_limit=cfg.memory_limit)
    results = []
    for name in chosen:
        source = cfg.sources[name]
        results.append(run_source(registry, cfg.warehouse_path, name, source.type, source.options,
                                  team_tag_keys=cfg.team_tag_keys, since=since, until=until,
                                  full_refresh=full_refresh, base_dir=str(cfg.base_dir),
                                  memory_limit=cfg.memory_limit, secrets=cfg.secrets(),
                                  allocation_settings=cfg.allocation))
    return results


def run(cfg: Config, names: list[str], **kwargs) -> int:
    if not cfg.sources:
        print("gpufinops: no sources configured (add [sources.<name>] tables to the config)", file=sys.stderr)
        return 2
    results = run_configured(cfg, names, **kwargs)
    for r in results:
        quarantined = f"  ({r.rejected} rejected, see ingest_rejects)" if r.rejected else ""
        print(f"{r.source:<24} {r.status:<10} {r.rows:>10} rows{quarantined}")
        if r.error:
            print(f"gpufinops: {r.error}", file=sys.stderr)
    return 1 if any(not r.ok for r in results) else 0


def list_sources(cfg: Config) -> int:
    status, fresh = {}, {}
    if cfg.warehouse_path.exists():
        with db.reader(cfg.warehouse_path) as con:
            status = {row["source"]: row for row in queries.ingest_status(con).iter_rows(named=True)}
            fresh = {row["source"]: row for row in freshness.source_freshness(con).iter_rows(named=True)}
    print(f"{'source':<24} {'type':<16} {'schedule':<16} {'last run':<26} {'status':<10} {'data':<44} watermark")
    for name, source in cfg.sources.items():
        s, f = status.get(name, {}), fresh.get(name)
        last = s.get("last_started_at")
        data = "no run yet" if f is None else (("STALE: " if f["stale"] else "") + f["message"].split(" (expected")[0])
        print(f"{name:<24} {source.type:<16} {source.schedule:<16} "
              f"{last.strftime('%Y-%m-%d %H:%M:%S UTC') if last else 'never':<26} "
              f"{s.get('last_status') or '-':<10} {data:<44} {s.get('watermark') or '-'}")
    return 0
