"""The ``gpufinops`` command line (docs/commands.md): exit 0 ok, 1 a failed run, 2 usage or config error."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import cast

# Numeric libraries beside DuckDB: one thread each (measured here: a numpy matmul beside DuckDB
# doubled a query's time). Must be set before numpy / polars are imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("POLARS_MAX_THREADS", "2")

from gpufinops.interfaces import dates  # noqa: E402
from gpufinops.jobs import config as config_mod  # noqa: E402

log = logging.getLogger("gpufinops")


_date = dates.parse  # a date on the command line: jobs/dates.py


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return f"gpufinops {version('gpufinops')}"
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "gpufinops (not installed)"


class ModelKinds:
    """The `--kind` choices: the model registry's kinds (models/registry.py), imported only when a kind is
    checked or the help is shown (the models' libraries take seconds to import; most commands need none)."""

    @staticmethod
    def kinds() -> tuple[str, ...]:
        from gpufinops.models.registry import KINDS
        return KINDS

    def __contains__(self, kind: object) -> bool:
        return kind in self.kinds()

    def __iter__(self):
        return iter(self.kinds())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpufinops", description="FinOps for GPU fleets.")
    p.add_argument("--version", action="version", version=_version(), help="print the version and exit")
    p.add_argument("--config", metavar="PATH", help="config file (else $GPUFINOPS_CONFIG, else ./gpufinops.toml)")
    p.add_argument("--db", metavar="PATH", help="warehouse path (overrides the config)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v: info, -vv: debug)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="build a demo home with a simulated fleet and run everything on it")
    demo.add_argument("--home", default="demo", metavar="DIR",
                      help="the demo home: its config, exports, warehouse and report (default: ./demo)")
    demo.add_argument("--days", type=int, default=60, metavar="N", help="days of fleet history to simulate (default: 60)")
    demo.add_argument("--seed", type=int, default=7, metavar="S", help="random seed: same seed, same numbers (default: 7)")

    from gpufinops.interfaces import carbon_cmd, mcp_server, unit_costs_cmd
    from gpufinops.jobs import init_cmd
    init_cmd.add_parser(sub)
    mcp_server.add_parser(sub)
    carbon_cmd.add_parser(sub)
    unit_costs_cmd.add_parser(sub)
    doctor = sub.add_parser("doctor", help="check the config, installed extras, credentials, each source and the "
                                           "warehouse; one line per check with its fix")
    doctor.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="give up on a source that has not answered in this long (default: 10)")

    ingest = sub.add_parser("ingest", help="run sources (`ingest list` lists them)")
    ingest.add_argument("sources", nargs="*", metavar="SOURCE", help="configured source names (default: every "
                                                                     "enabled source), or `list`")
    ingest.add_argument("--since", type=_date, metavar="DATE",
                        help="reload from this date or date-time (UTC unless an offset is given) without moving the cursor")
    ingest.add_argument("--until", type=_date, metavar="DATE", help="reload up to this date or date-time (exclusive)")
    ingest.add_argument("--full-refresh", action="store_true",
                        help="ignore the saved cursor and reload everything the source holds")

    rec = sub.add_parser("recommend", help="run the models, store and print recommendations")
    rec.add_argument("--kind", metavar="K", choices=ModelKinds(), help="run only this model (%(choices)s)")
    rec.add_argument("--team", metavar="T", help="print only this team's recommendations")
    rec.add_argument("--format", choices=("table", "json", "csv"), default="table",
                     help="table (default, fits the terminal), json (the recommendation objects) or csv (flat columns)")
    rec.add_argument("--show-withheld", action="store_true",
                     help="also list every resource a model withheld a finding on: why, the missing fact and "
                          "the source that would provide it")

    evaluate = sub.add_parser("evaluate", help="measure the models on planted demo fleets and real data")
    evaluate.add_argument("--quick", action="store_true",
                          help="one seed of each generator (the demo's default seed, the second generator's first seed)")
    evaluate.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    evaluate.add_argument("--explain", metavar="KIND", choices=ModelKinds(),
                          help="also print KIND's false positives and negatives on the second generator, with their evidence")

    sub.add_parser("migrate", help="upgrade the warehouse to this version's schema (every other command does it "
                                   "at its start too)")
    sql = sub.add_parser("sql", help="one read-only query on the warehouse")
    sql.add_argument("query", help="a SELECT statement (DuckDB SQL; no file access)")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table",
                     help="table (default, fits the terminal), csv or json")

    dash = sub.add_parser("dashboard", help="the Streamlit dashboard")
    dash.add_argument("--port", type=int, default=8501, metavar="P", help="port to listen on (default: 8501)")
    dash.add_argument("--host", metavar="H", help="address to listen on (default: 127.0.0.1; every interface when "
                                                  "[dashboard] auth = \"oidc\")")

    api = sub.add_parser("api", help="the HTTP API (recommendations, decisions, daily costs)")
    api.add_argument("--host", default="127.0.0.1", metavar="H", help="address to listen on (default: 127.0.0.1)")
    api.add_argument("--port", type=int, default=8000, metavar="P", help="port to listen on (default: 8000)")
    api.add_argument("--insecure-demo", action="store_true",
                     help="without [[api.tokens]]: serve every caller with finance scope (demo only)")

    export = sub.add_parser("export", help="recommendations in a scheduler's own format, or the costs as FOCUS 1.2")
    export.add_argument("kind", metavar="FORMAT", choices=("json", "kueue", "karpenter", "skypilot", "storage", "focus"),
                        help="json, kueue, karpenter, skypilot (recommendations), storage (lifecycle rules, volume "
                             "changes) or focus (the cost lines)")
    export.add_argument("--team", metavar="T", help="only this team's recommendations (not for focus)")
    export.add_argument("--cluster", help="kueue / karpenter / skypilot: only this target cluster (its name or its "
                                          "gpufinops.io/cluster label value)")
    export.add_argument("--out", metavar="FILE", help="write to this file (default: stdout; required for focus)")
    export.add_argument("--from", dest="from_date", type=_date, help="focus: charges starting on or after this date")
    export.add_argument("--to", dest="to_date", type=_date, help="focus: charges starting up to this date (inclusive)")
    export.add_argument("--provider", help="focus: one provider (its ProviderName, or aws | gcp | onprem)")
    export.add_argument("--format", dest="file_format", choices=("parquet", "csv"),
                        help="focus: the file format (default: from --out's extension, else parquet)")
    export.add_argument("--focus-version", choices=("1.2", "1.3"),
                        help="focus: the FOCUS version (default 1.2; 1.3 splits shared GPU lines into allocated rows)")

    sub.add_parser("serve", help="the scheduler daemon: every configured job on its schedule")
    report = sub.add_parser("report", help="the weekly report (`report weekly`)")
    report.add_argument("kind", choices=("weekly",), help="the report to render (weekly)")
    report.add_argument("--week", help="ISO week YYYY-Www (default: the last complete week with data)")
    report.add_argument("--team", help="preview one team lead's report (default: finance, every team)")
    report.add_argument("--out", help="FILE.eml: the MIME message as mailed; FILE.html: the HTML with its "
                                      "images inlined, the CSV written beside it")
    report.add_argument("--send", action="store_true", help="mail every recipient in [report] (once per week)")

    alerts = sub.add_parser("alerts", help="budgets, anomalies, idle GPUs, stale data: `alerts run` / `alerts list`")
    alerts.add_argument("action", choices=("run", "list"), help="run: evaluate every rule and notify; list: the alerts")
    alerts.add_argument("--now", type=_date, help="run: evaluate as of this time (UTC unless an offset is given)")
    alerts.add_argument("--no-send", action="store_true", help="run: record the alerts, leave their notifications queued")
    alerts.add_argument("--team", help="list: only alerts of this team")
    alerts.add_argument("--status", choices=("open", "resolved", "expired", "superseded", "all"), default="open",
                        help="list: alerts in this state (default: open)")
    alerts.add_argument("--rule", help="list: only this rule (budget, budget_forecast, anomaly, idle_burn, stale_data)")
    alerts.add_argument("--format", choices=("table", "json", "csv"), default="table",
                        help="list: table (default), json or csv")
    return p


def main(argv: list[str] | None = None) -> int:
    from gpufinops.interfaces import errors

    with errors.scrubbed_output():  # every command's output through the one scrubber (ingest.core.scrub)
        args = _parser().parse_args(argv)
        errors.configure_logging(args.verbose)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from gpufinops.interfaces import errors
    from gpufinops.jobs import files

    cfg = None
    try:
        out = getattr(args, "out", None)
        if out:  # every output file is checked before any work (jobs/files.py)
            files.check(out, make_parents=True)  # its folder: each writer says whether it creates one
        if args.command == "demo":
            from gpufinops.jobs import demo
            return demo.run(args.home, days=args.days, seed=args.seed)
        if args.command == "init":  # it loads no config: the warehouse of one that loads is protected still
            _protect_configured(args)
            if out:
                files.check(out, make_parents=True)  # its folder: each writer says whether it creates one
            from gpufinops.jobs import init_cmd
            return init_cmd.run(args)
        if args.command == "doctor":
            from gpufinops.interfaces import doctor
            return doctor.run(args.config, db=args.db, timeout=args.timeout)
        cfg = config_mod.load(args.config, db=args.db)
        errors.remember_secrets(cfg.secrets())
        files.protect(cfg.warehouse_path)
        if out:
            files.check(out, make_parents=True)  # its folder: each writer says whether it creates one
        from gpufinops.interfaces import arg_checks
        if (problem := arg_checks.problem(cfg, args)) is not None:  # contradictory or unknown: a usage error
            print(f"gpufinops: {args.command}: {problem}", file=sys.stderr)
            return 2
        if not _reads_only(args):  # migrations and reference data: once, here (warehouse/db.py)
            from gpufinops.warehouse import db
            db.prepare(cfg.warehouse_path, memory_limit=cfg.memory_limit)
        return COMMANDS[args.command](cfg, args)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as exc:  # the one error funnel (jobs/errors.py)
        return errors.report(exc, verbose=args.verbose, cfg=cfg)


def _protect_configured(args: argparse.Namespace) -> None:
    from gpufinops.jobs import files
    try:
        cfg = config_mod.load(args.config, db=args.db)
    except Exception:  # no config yet, or a broken one: init writes a new one
        if args.db:
            files.protect(args.db)
        return
    files.protect(cfg.warehouse_path)


def _reads_only(args: argparse.Namespace) -> bool:
    """`sql` and `alerts list` only read: they never migrate (nor create) the warehouse."""
    return args.command == "sql" or (args.command == "alerts" and args.action == "list")


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
    with progress.steps(len(seeds) + len(fleets) + 1, "evaluate") as step:
        result = evaluate.evaluate(fleets=fleets, independent_seeds=seeds, step=step)
    print(json.dumps(result, indent=2, default=str) if args.format == "json"
          else evaluate.render(result, explain=args.explain))
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
        print(f"gpufinops: warning: warehouse {cfg.warehouse_path} (set by {cfg.warehouse_setting}) does not exist "
              f"yet: pages and answers say so until `gpufinops ingest` creates it", file=sys.stderr)


def cmd_api(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.interfaces import api
    _warn_missing(cfg)
    return api.serve(cfg, host=args.host, port=args.port, insecure_demo=args.insecure_demo)


def cmd_export(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import gpufinops.jobs.export as export
    from gpufinops.warehouse import db

    if args.kind == "focus":
        return cmd_export_focus(cfg, args)
    focus_only = [flag for flag, value in (("--from", args.from_date), ("--to", args.to_date),
                                           ("--provider", args.provider), ("--format", args.file_format),
                                           ("--focus-version", args.focus_version)) if value]
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

    if args.cluster:
        print("gpufinops: export focus: --cluster applies to the kueue, karpenter and skypilot formats", file=sys.stderr)
        return 2
    if not args.out or args.team:
        print("gpufinops: export focus: " + ("--team is not a FOCUS filter (FOCUS rows carry x_Team: filter on it "
              "where you load them)" if args.team else "--out PATH is required (a Parquet or CSV file)"),
              file=sys.stderr)
        return 2
    fmt = args.file_format or ("csv" if args.out.lower().endswith(".csv") else "parquet")
    filters = focus.Filters(since=args.from_date, provider=args.provider,
                            until=None if args.to_date is None else focus.day_after(args.to_date))
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


if __name__ == "__main__":
    sys.exit(main())
