"""`gpufinops ingest`: run configured sources, one line each; `ingest list`: what is configured."""

from __future__ import annotations

import sys

from gpufinops.ingest.core import scrub
from gpufinops.ingest.core.runner import RunResult
from gpufinops.jobs import progress, tables
from gpufinops.jobs.config import Config
from gpufinops.jobs.ingest_run import run_configured
from gpufinops.warehouse import db, freshness, queries


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
            # the where and why cut to 200 characters (long paths and values first); the product's own remedy
            # (an install command, the credential chain) kept whole, as on the main error line (interfaces/errors.py)
            print(f"gpufinops: {scrub.brief_keeping_remedy(r.error)}", file=sys.stderr)
    if any(r.config_error for r in results):
        return 2  # a setting only the config can fix (e.g. a serving source's model)
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
