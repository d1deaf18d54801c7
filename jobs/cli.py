"""The ``gpufinops`` command line (CONTRACT.md): exit 0 ok, 1 a failed run, 2 usage or config error."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime, timezone

# Numeric libraries beside DuckDB: one thread each (DESIGN.md: a numpy matmul beside DuckDB
# doubled a query's time). Must be set before numpy / polars are imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("POLARS_MAX_THREADS", "2")

from jobs import config as config_mod  # noqa: E402
from jobs.config import ConfigError  # noqa: E402

log = logging.getLogger("gpufinops")


def _date(text: str) -> datetime:
    """A date or date-time on the command line; without an offset it is UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (expected YYYY-MM-DD)") from None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpufinops", description="FinOps for GPU fleets.")
    p.add_argument("--config", help="config file (else $GPUFINOPS_CONFIG, else ./gpufinops.toml)")
    p.add_argument("--db", help="warehouse path (overrides the config)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="build a demo home with a simulated fleet and run everything on it")
    demo.add_argument("--home", default="demo")
    demo.add_argument("--days", type=int, default=60)
    demo.add_argument("--seed", type=int, default=7)

    ingest = sub.add_parser("ingest", help="run sources (`ingest list` lists them)")
    ingest.add_argument("sources", nargs="*", metavar="SOURCE")
    ingest.add_argument("--since", type=_date)
    ingest.add_argument("--until", type=_date)
    ingest.add_argument("--full-refresh", action="store_true",
                        help="ignore the saved cursor and reload everything the source holds")

    rec = sub.add_parser("recommend", help="run the models, store and print recommendations")
    rec.add_argument("--kind")
    rec.add_argument("--team")
    rec.add_argument("--format", choices=("table", "json", "csv"), default="table")
    rec.add_argument("--show-withheld", action="store_true",
                     help="also list every resource a model withheld a finding on: why, the missing fact and "
                          "the source that would provide it")

    evaluate = sub.add_parser("evaluate", help="measure the models on planted demo fleets and real data")
    evaluate.add_argument("--quick", action="store_true", help="one seed of each generator (the demo's default seed, the second generator's first seed)")
    evaluate.add_argument("--format", choices=("table", "json"), default="table")

    sql = sub.add_parser("sql", help="one read-only query on the warehouse")
    sql.add_argument("query")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")

    dash = sub.add_parser("dashboard", help="the Streamlit dashboard")
    dash.add_argument("--port", type=int, default=8501)

    api = sub.add_parser("api", help="the HTTP API (recommendations, decisions, daily costs)")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.add_argument("--insecure-demo", action="store_true",
                     help="without [[api.tokens]]: serve every caller with finance scope (demo only)")

    export = sub.add_parser("export", help="recommendations in a scheduler's own format, or the costs as FOCUS 1.2")
    export.add_argument("kind", metavar="FORMAT", choices=("json", "kueue", "karpenter", "skypilot", "focus"))
    export.add_argument("--team")
    export.add_argument("--cluster", help="kueue / karpenter / skypilot: only this target cluster (its name or its "
                                          "gpufinops.io/cluster label value)")
    export.add_argument("--out", help="write to this file (default: stdout; required for focus)")
    export.add_argument("--from", dest="from_date", type=_date, help="focus: charges starting on or after this date")
    export.add_argument("--to", dest="to_date", type=_date, help="focus: charges starting up to this date (inclusive)")
    export.add_argument("--provider", help="focus: one provider (its ProviderName, or aws | gcp | onprem)")
    export.add_argument("--format", dest="file_format", choices=("parquet", "csv"),
                        help="focus: the file format (default: from --out's extension, else parquet)")

    sub.add_parser("serve", help="the scheduler daemon: every configured job on its schedule")
    report = sub.add_parser("report", help="the weekly report (`report weekly`)")
    report.add_argument("kind", choices=("weekly",))
    report.add_argument("--week", help="ISO week YYYY-Www (default: the last complete week with data)")
    report.add_argument("--team", help="preview one team lead's report (default: finance, every team)")
    report.add_argument("--out", help="FILE.eml: the MIME message as mailed; FILE.html: the HTML with its "
                                      "images inlined, the CSV written beside it")
    report.add_argument("--send", action="store_true", help="mail every recipient in [report] (once per week)")

    alerts = sub.add_parser("alerts", help="budgets, anomalies, idle GPUs, stale data: `alerts run` / `alerts list`")
    alerts.add_argument("action", choices=("run", "list"))
    alerts.add_argument("--now", type=_date, help="run: evaluate as of this time (UTC unless an offset is given)")
    alerts.add_argument("--no-send", action="store_true", help="run: record the alerts, leave their notifications queued")
    alerts.add_argument("--team", help="list: only alerts of this team")
    alerts.add_argument("--status", choices=("open", "resolved", "expired", "superseded", "all"), default="open")
    alerts.add_argument("--rule", help="list: only this rule (budget, budget_forecast, anomaly, idle_burn, stale_data)")
    alerts.add_argument("--format", choices=("table", "json", "csv"), default="table")
    return p


def main(argv: list[str] | None = None) -> int:
    from jobs import errors

    args = _parser().parse_args(argv)
    errors.configure_logging(args.verbose)
    cfg = None
    try:
        if args.command == "demo":
            from jobs import demo
            return demo.run(args.home, days=args.days, seed=args.seed)
        cfg = config_mod.load(args.config, db=args.db)
        errors.remember_secrets(cfg.secrets())
        return COMMANDS[args.command](cfg, args)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as exc:  # the one error funnel (jobs/errors.py)
        return errors.report(exc, verbose=args.verbose, cfg=cfg)


def cmd_ingest(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs import ingest_cmd
    if args.sources == ["list"]:
        return ingest_cmd.list_sources(cfg)
    return ingest_cmd.run(cfg, args.sources, since=args.since, until=args.until, full_refresh=args.full_refresh)


def cmd_recommend(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from models.run import MODELS, analyse
    from jobs import output
    from warehouse import db

    if args.kind and args.kind not in MODELS:
        print(f"gpufinops: --kind {args.kind}: no such model (available: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    from models.run import validate_settings
    try:
        validate_settings(cfg.raw.get("models"))
    except ValueError as exc:
        print(f"gpufinops: config error: {exc}", file=sys.stderr)
        return 2
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit, create=False) as con:  # models need data
        run = analyse(con, [args.kind] if args.kind else None, settings=cfg.raw.get("models"))
    recs, withheld = run.recommendations, run.withheld
    if args.team:
        recs = [r for r in recs if r.team == args.team]
        withheld = [w for w in withheld if w.team == args.team]
    if args.format == "json":
        print(json.dumps([r.to_dict() for r in recs], indent=2))
        return 0
    import polars as pl
    from models import plans
    frame = pl.DataFrame([{"id": r.id, "plan": r.plan, "kind": r.kind, "team": r.team, "provider": r.provider,
                           "resource_id": r.resource_id, "monthly_savings_usd": float(r.monthly_savings_usd),
                           "confidence": r.confidence, "action": r.proposed.get("action"),
                           "pattern": r.evidence.get("pattern"), "change": _change(r), "plan_id": r.plan_id}
                          for r in recs])
    print(output.render(frame, args.format) if recs else "no recommendations")
    if args.format == "table":
        if recs:
            counted = [r for r in recs if plans.counted(r)]
            print(f"\ntotal: ${plans.total(recs):,.2f}/month in {len({r.plan_id for r in counted})} plan(s) "
                  f"({len(counted)} action(s); {len(recs) - len(counted)} alternative(s), never added)")
        _print_withheld(withheld, args.show_withheld)
    return 0


def _print_withheld(withheld: list, show: bool) -> None:
    """A line per withhold reason and count; with ``show``, every withheld finding."""
    from jobs import output
    counts: dict[str, int] = {}
    for w in withheld:
        counts[w.reason] = counts.get(w.reason, 0) + 1
    if not counts:
        return
    print()
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"withheld: {n} × {reason.replace('_', ' ')}")
    if not show:
        print("  (gpufinops recommend --show-withheld lists each with the missing fact and the source that provides it)")
        return
    import polars as pl
    frame = pl.DataFrame([{"kind": w.kind, "team": w.team, "resource_id": w.resource_id, "reason": w.reason,
                           "detail": w.detail, "missing": w.missing, "source": w.source_hint} for w in withheld])
    print(output.render(frame, "table"))


def _change(rec) -> str:
    """What a recommendation changes, in a few words (e.g. "gpu_model A100-80GB→L4")."""
    keys = ("instance_type", "gpu_model", "gpu_count", "pricing", "precision", "state")
    return ", ".join(f"{k} {rec.current.get(k)}→{rec.proposed[k]}" for k in keys
                     if k in rec.proposed and rec.proposed[k] != rec.current.get(k))


def cmd_evaluate(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs import evaluate
    result = (evaluate.evaluate(fleets=evaluate.FLEETS[:1], independent_seeds=evaluate.INDEPENDENT_SEEDS[:1])
              if args.quick else evaluate.evaluate())
    print(json.dumps(result, indent=2, default=str) if args.format == "json" else evaluate.render(result))
    return 0


def cmd_sql(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import duckdb
    import polars as pl
    from jobs import output
    from warehouse import db

    with db.reader(cfg.warehouse_path) as con:
        con.execute("SET enable_external_access = false")  # no file reads/writes from user SQL
        con.execute("SET lock_configuration = true")
        try:
            frame = pl.from_arrow(con.sql(args.query).to_arrow_table())
        except duckdb.Error as exc:
            print(f"gpufinops: sql: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 1
    print(output.render(frame, args.format))
    return 0


def cmd_dashboard(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import subprocess
    from pathlib import Path

    app = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"
    section = cfg.raw.get("dashboard", {})  # validated by config_mod.load
    _warn_missing(cfg)
    budgets = [b.to_dict() for b in cfg.alerts.settings.budgets]  # [[budgets]] and the [dashboard] aliases
    env = {**os.environ, "GPUFINOPS_DB": str(cfg.warehouse_path),
           "GPUFINOPS_DASHBOARD": json.dumps({**section, "budgets": budgets})}
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer"]
    if section.get("auth") == "header" and "STREAMLIT_SERVER_ADDRESS" not in os.environ:
        cmd += ["--server.address", "127.0.0.1"]  # a trusted header is only trustworthy behind the proxy
    return subprocess.call(cmd, env=env)


def _warn_missing(cfg: config_mod.Config) -> None:
    """The dashboard and the API may start before the first ingest: they never create the warehouse,
    and say which path they wait for."""
    if not cfg.warehouse_path.exists():
        print(f"gpufinops: warning: warehouse {cfg.warehouse_path} (set by {cfg.warehouse_setting}) does not exist "
              f"yet: pages and answers say so until `gpufinops ingest` creates it", file=sys.stderr)


def cmd_api(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs import api
    _warn_missing(cfg)
    return api.serve(cfg, host=args.host, port=args.port, insecure_demo=args.insecure_demo)


def cmd_export(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    import jobs.export as export
    from warehouse import db

    if args.kind == "focus":
        return cmd_export_focus(cfg, args)
    focus_only = [flag for flag, value in (("--from", args.from_date), ("--to", args.to_date),
                                           ("--provider", args.provider), ("--format", args.file_format)) if value]
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
    return 0


def cmd_export_focus(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs.export import focus
    from warehouse import db

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
            rows = focus.export(con, args.out, fmt, filters)
    except focus.ExportError as exc:
        print(f"gpufinops: export focus: {exc}", file=sys.stderr)
        return 2
    print(f"export focus: {rows:,} rows of FOCUS 1.2 ({fmt}) written to {args.out}")
    return 0


COMMANDS = {"ingest": cmd_ingest, "recommend": cmd_recommend, "sql": cmd_sql, "dashboard": cmd_dashboard}
COMMANDS.update(api=cmd_api, export=cmd_export, evaluate=cmd_evaluate)


def cmd_serve(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs import serve
    logging.getLogger("gpufinops").setLevel(min(logging.getLogger().level, logging.INFO))
    return serve.serve(cfg)


def cmd_report(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs.report import cli as report_cli
    return report_cli.weekly(cfg, week=args.week, team=args.team, out=args.out, send=args.send)


def cmd_alerts(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs.alerts import cli as alerts_cli
    if args.action == "run":
        return alerts_cli.run(cfg, now=args.now, send=not args.no_send)
    return alerts_cli.list_alerts(cfg, team=args.team, status=args.status, rule=args.rule, fmt=args.format)


COMMANDS.update(serve=cmd_serve, report=cmd_report, alerts=cmd_alerts)


if __name__ == "__main__":
    sys.exit(main())
