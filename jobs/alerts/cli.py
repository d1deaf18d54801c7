"""`gpufinops alerts run` and `gpufinops alerts list`."""

from __future__ import annotations

import sys
from datetime import datetime

import polars as pl

from gpufinops.jobs import output
from gpufinops.jobs.alerts import render
from gpufinops.jobs.alerts import run as run_mod
from gpufinops.jobs.config import Config
from gpufinops.warehouse import alerts_queries, db

LIST_COLUMNS = ("severity", "rule", "scope", "period", "threshold", "teams", "title", "opened_at", "status")


def run(cfg: Config, *, now: datetime | None = None, send: bool = True, out=None) -> int:
    """Evaluate and deliver; exit 1 while a notification is unsent (failed or unknown: the next runs
    retry it)."""
    out = out or sys.stdout  # at call time: the CLI's scrubbed stream
    result = run_mod.run(cfg, now=now, send=send)
    print(
        f"alerts as of {result.now:%Y-%m-%d %H:%M} UTC (rules evaluated in {result.evaluate_seconds:.2f} s):", file=out
    )
    for outcome in result.outcomes:
        state = "" if outcome.complete else " (not evaluated)"
        print(f"  {outcome.rule:<11} {len(outcome.alerts):>4} holding{state}", file=out)
        for note in outcome.notes:
            print(f"    note: {note}", file=out)
    changes = result.changes
    closed = changes.get("closed", [])
    print(
        f"opened {len(changes.get('opened', []))}, still open {len(changes.get('refreshed', []))}, "
        f"resolved {sum(1 for _, s, _ in closed if s == 'resolved')}, "
        f"expired/superseded {sum(1 for _, s, _ in closed if s != 'resolved')}; "
        f"{len(changes.get('notifications', []))} notification(s) planned",
        file=out,
    )
    d = result.delivered
    if send:
        print(
            f"delivered: sent {len(d.sent)}, failed {len(d.failed)}, unknown {len(d.unknown)}"
            + (f", cancelled {len(d.cancelled)}" if d.cancelled else ""),
            file=out,
        )
        resent = f"after {cfg.report.sending_timeout_minutes:g} min"
        unknown = "  unknown  {} (a send ended mid-delivery: resent with the same Message-ID / delivery id "
        output.delivery_lines(
            [
                (d.sent, "  sent     {}"),
                (d.failed, "  failed   {} (retried by the next run)"),
                (d.unknown, unknown + resent + ")"),
            ],
            out,
        )
    return 0 if result.ok else 1


def list_alerts(
    cfg: Config,
    *,
    team: str | None = None,
    status: str = "open",
    rule: str | None = None,
    fmt: str = "table",
    out=None,
) -> int:
    out = out or sys.stdout
    with db.reader(cfg.warehouse_path) as con:  # an older warehouse without the alert tables lists none
        frame = alerts_queries.alerts(
            con, teams=[team] if team else None, status=None if status == "all" else status, rule=rule
        )
    if fmt == "json":
        print(output.to_json([render.alert_object(r) for r in frame.to_dicts()]), file=out)
        return 0
    if frame.is_empty():
        print(f"no {'' if status == 'all' else status + ' '}alerts", file=out)
        return 0
    if fmt == "table":
        from gpufinops.jobs import layouts

        out.write(layouts.alerts_text(frame.select(*LIST_COLUMNS).to_dicts(), output.terminal_width(out)))
        return 0
    view = frame.select(*LIST_COLUMNS, "summary").with_columns(pl.col("teams").list.join(","))
    output.write(output.render(view, fmt), out)  # CSV: no blank last line
    return 0
