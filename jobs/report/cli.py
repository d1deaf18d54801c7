"""`gpufinops report weekly [--week YYYY-Www] [--team T] [--out FILE] [--send]` (docs/report.md)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from gpufinops.jobs import output
from gpufinops.jobs.config import Config
from gpufinops.jobs.report import deliver
from gpufinops.jobs.report.figures import data_span
from gpufinops.jobs.report.render import Report, render
from gpufinops.jobs.report.weeks import Week, latest_complete_week, parse_week
from gpufinops.warehouse import db
from gpufinops.warehouse.scope import Scope


def default_week(cfg: Config, now: datetime | None = None) -> Week:
    """The last complete week, or the last one the warehouse's data covers: its bill, or its GPU metrics
    where no bill is loaded yet (a metrics-only account has a week to report, not the empty current one)."""
    with db.reader(cfg.warehouse_path) as con:
        start, end = data_span(con)
    return latest_complete_week(now or datetime.now(UTC), end, cfg.report.tz, start)


def render_for(cfg: Config, week: Week, scope: Scope) -> Report:
    with db.reader(cfg.warehouse_path) as con:
        return render(con, week, scope, tz=cfg.report.timezone, dashboard_url=cfg.report.dashboard_url)


def _preview_recipient(cfg: Config, scope: Scope) -> str | None:
    """The configured recipient this preview would go to, for the .eml's To: header."""
    for recipient in cfg.report.recipients:
        if recipient.scope.teams == scope.teams:
            return recipient.email
    return None


def write_report(cfg: Config, week: Week, scope: Scope, out: Path) -> list[Path]:
    report = render_for(cfg, week, scope)
    return deliver.write_file(report, out, cfg.report, _preview_recipient(cfg, scope))


def weekly(
    cfg: Config, *, week: str | None, team: str | None, out: str | None, send: bool, stdout: IO[str] | None = None
) -> int:
    stdout = stdout or sys.stdout  # the stream at call time (the CLI's scrubbed one, a test's capture), not at import
    try:
        chosen = parse_week(week) if week else default_week(cfg)
    except ValueError as exc:
        print(f"gpufinops: --week: {exc}", file=sys.stderr)
        return 2
    if send and team:
        print(
            "gpufinops: --send mails every configured recipient their own teams; --team is for previews",
            file=sys.stderr,
        )
        return 2
    scope = Scope("lead", (team,), actor="cli") if team else Scope("finance", actor="cli")
    if out:
        from gpufinops.jobs import layouts

        for path in write_report(cfg, chosen, scope, Path(out)):
            layouts.wrote(path, out=stdout)
    elif not send:
        stdout.write(render_for(cfg, chosen, scope).text)
    if not send:
        return 0
    if not cfg.report.recipients:
        print("gpufinops: --send: no [[report.recipients]] in the config", file=sys.stderr)
        return 2
    return _send(cfg, chosen, stdout)


def _send(cfg: Config, chosen: Week, stdout: IO[str]) -> int:
    """`report weekly --send`: mail every recipient, one line each; 1 when one was not sent."""
    outcome = deliver.send_weekly(cfg, chosen)
    resent = f"resent after {cfg.report.sending_timeout_minutes:g} min"
    output.delivery_lines(
        [
            (outcome.sent, "{:<40} sent"),
            (outcome.already_sent, f"{{:<40}} already sent for {chosen}"),
            (outcome.unknown, "{:<40} unknown (a send ended mid-transaction; " + resent + ")"),
            (outcome.failed, "{:<40} failed (see report_deliveries; retried on the next run)"),
        ],
        stdout,
    )
    unsent = [f"{e} (failed)" for e in outcome.failed] + [f"{e} (unknown)" for e in outcome.unknown]
    if unsent or outcome.interrupted:
        print(
            f"gpufinops: report weekly --send: {len(unsent)} recipient(s) not sent for {chosen}: "
            f"{', '.join(unsent) or 'interrupted'}",
            file=sys.stderr,
        )
        return 1
    return 0
