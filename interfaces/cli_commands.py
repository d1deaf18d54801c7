"""What each ``gpufinops`` command runs once its config is loaded (interfaces/cli.py dispatches through
:data:`COMMANDS`): each parses nothing and prints through its own module."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import cast

from gpufinops.jobs import config as config_mod


def cmd_migrate(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    """The warehouse at the code's schema (main's prepare did it); says which version it is at."""
    from gpufinops.warehouse import db

    version = db.prepare(cfg.warehouse_path, memory_limit=cfg.memory_limit)
    if version is None:
        raise db.missing(cfg.warehouse_path)
    print(f"warehouse {cfg.warehouse_path}: schema version {version}")
    return 0


def cmd_ingest(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import ingest_cmd

    if args.sources == ["list"]:
        return ingest_cmd.list_sources(cfg)
    return ingest_cmd.run(cfg, args.sources, since=args.since, until=args.until, full_refresh=args.full_refresh)


def cmd_recommend(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import recommend_cmd

    return recommend_cmd.run(cfg, args)


def cmd_evaluate(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs import evaluate, progress

    fleets = evaluate.FLEETS[:1] if args.quick else evaluate.FLEETS
    seeds = evaluate.INDEPENDENT_SEEDS[:1] if args.quick else evaluate.INDEPENDENT_SEEDS
    busy = evaluate.BUSY_QUICK_SEEDS if args.quick else None
    with progress.steps_or_lines(len(seeds) + len(fleets) + 2, "evaluate") as step:
        result = evaluate.evaluate(fleets=fleets, independent_seeds=seeds, busy_seeds=busy, step=step)
    print(
        json.dumps(result, indent=2, default=str)
        if args.format == "json"
        else evaluate.render(result, explain=args.explain)
    )
    return 0


def cmd_sql(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import duckdb
    import polars as pl

    from gpufinops.jobs import output
    from gpufinops.warehouse import db

    with db.reader(cfg.warehouse_path) as con:
        con.execute("SET enable_external_access = false")  # no file reads/writes from user SQL
        con.execute("SET lock_configuration = true")
        try:
            # an Arrow table converts to a DataFrame (only an Arrow array gives a Series)
            frame = cast(pl.DataFrame, pl.from_arrow(con.sql(args.query).to_arrow_table()))
        except duckdb.Error as exc:
            print(f"gpufinops: sql: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
    if args.format == "table":  # a table when every column fits whole, else a block per row
        from gpufinops.jobs import layouts

        output.write(layouts.frame_text(frame, output.terminal_width()))
        return 0
    output.write(output.render(frame, args.format))
    return 0


def cmd_dashboard(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import dashboard_cmd

    _warn_missing(cfg)
    return dashboard_cmd.run(cfg, args.port, args.host)


def _warn_missing(cfg: config_mod.Config) -> None:
    """The dashboard and the API may start before the first ingest: they never create the warehouse,
    and say which path they wait for."""
    if not cfg.warehouse_path.exists():
        print(
            f"gpufinops: warning: warehouse {cfg.warehouse_path} (set by {cfg.warehouse_setting}) does not exist "
            f"yet: pages and answers say so until `gpufinops ingest` creates it",
            file=sys.stderr,
        )


def cmd_api(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import api

    _warn_missing(cfg)
    return api.serve(cfg, host=args.host, port=args.port, insecure_demo=args.insecure_demo)


def cmd_export(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import gpufinops.jobs.export as export
    from gpufinops.warehouse import db

    if args.kind == "focus":
        return cmd_export_focus(cfg, args)
    if args.kind == "budgets":
        from gpufinops.interfaces.enforce_cmd import cmd_export_budgets

        return cmd_export_budgets(cfg, args)
    focus_only = [
        flag
        for flag, value in (
            ("--from", args.from_date),
            ("--to", args.to_date),
            ("--provider", args.provider),
            ("--format", args.file_format),
            ("--focus-version", args.focus_version),
        )
        if value
    ]
    if focus_only:
        print(f"gpufinops: export {args.kind}: {', '.join(focus_only)} applies to `export focus` only", file=sys.stderr)
        return 2
    try:
        with db.reader(cfg.warehouse_path) as con:
            text = export.render(con, args.kind, team=args.team, cluster=args.cluster, settings=cfg.export)
    except export.ExportError as exc:
        print(f"gpufinops: export {args.kind}: {exc}", file=sys.stderr)
        return 2
    export.write(text, args.out)
    if args.out:
        from gpufinops.jobs import layouts

        layouts.wrote(args.out, layouts.export_detail(args.kind, text))
    return 0


def cmd_export_focus(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs.export import focus
    from gpufinops.warehouse import db

    if args.file_format not in (None, "parquet", "csv"):
        print(f"gpufinops: export focus: --format {args.file_format}: parquet or csv", file=sys.stderr)
        return 2
    if args.cluster:
        print(
            "gpufinops: export focus: --cluster applies to the kueue, karpenter and skypilot formats", file=sys.stderr
        )
        return 2
    if not args.out or args.team:
        print(
            "gpufinops: export focus: "
            + (
                "--team is not a FOCUS filter (FOCUS rows carry x_Team: filter on it where you load them)"
                if args.team
                else "--out PATH is required (a Parquet or CSV file)"
            ),
            file=sys.stderr,
        )
        return 2
    fmt = args.file_format or ("csv" if args.out.lower().endswith(".csv") else "parquet")
    filters = focus.Filters(
        since=args.from_date,
        provider=args.provider,
        until=None if args.to_date is None else focus.day_after(args.to_date),
    )
    try:
        with db.reader(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
            rows = focus.export(con, args.out, fmt, filters, args.focus_version or "1.2")
    except focus.ExportError as exc:
        print(f"gpufinops: export focus: {exc}", file=sys.stderr)
        return 2
    from gpufinops.jobs import layouts

    layouts.wrote(args.out, f"{rows:,} rows of FOCUS {args.focus_version or '1.2'} ({fmt})")
    return 0


COMMANDS = {"ingest": cmd_ingest, "recommend": cmd_recommend, "sql": cmd_sql, "dashboard": cmd_dashboard}
COMMANDS.update(api=cmd_api, export=cmd_export, evaluate=cmd_evaluate, migrate=cmd_migrate)


def cmd_enforce(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces.enforce_cmd import cmd_enforce as run

    return run(cfg, args)


COMMANDS.update(enforce=cmd_enforce)


def cmd_serve(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs import serve

    logging.getLogger("gpufinops").setLevel(min(logging.getLogger().level, logging.INFO))
    return serve.serve(cfg)


def cmd_report(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs.report import cli as report_cli

    return report_cli.weekly(cfg, week=args.week, team=args.team, out=args.out, send=args.send)


def cmd_alerts(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs.alerts import cli as alerts_cli

    if args.action == "run":
        return alerts_cli.run(cfg, now=args.now, send=not args.no_send)
    return alerts_cli.list_alerts(cfg, team=args.team, status=args.status, rule=args.rule, fmt=args.format)


def cmd_mcp(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import mcp_server

    return mcp_server.run(cfg, args)


def cmd_carbon(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import carbon_cmd

    return carbon_cmd.run(cfg, args)


COMMANDS.update(serve=cmd_serve, report=cmd_report, alerts=cmd_alerts, mcp=cmd_mcp, carbon=cmd_carbon)


def cmd_unit_costs(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import unit_costs_cmd

    return unit_costs_cmd.run(cfg, args)


COMMANDS["unit-costs"] = cmd_unit_costs


def cmd_costs(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import costs_cmd

    return costs_cmd.run(cfg, args)


COMMANDS["costs"] = cmd_costs
