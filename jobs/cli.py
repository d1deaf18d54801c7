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

    sql = sub.add_parser("sql", help="one read-only query on the warehouse")
    sql.add_argument("query")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")

    dash = sub.add_parser("dashboard", help="the Streamlit dashboard")
    dash.add_argument("--port", type=int, default=8501)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        if args.command == "demo":
            from jobs import demo
            return demo.run(args.home, days=args.days, seed=args.seed)
        cfg = config_mod.load(args.config, db=args.db)
        return COMMANDS[args.command](cfg, args)
    except ConfigError as exc:
        print(f"gpufinops: config error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"gpufinops: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def cmd_ingest(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from jobs import ingest_cmd
    if args.sources == ["list"]:
        return ingest_cmd.list_sources(cfg)
    return ingest_cmd.run(cfg, args.sources, since=args.since, until=args.until, full_refresh=args.full_refresh)


def cmd_recommend(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from models.run import MODELS, run_models
    from jobs import output
    from warehouse import db

    if args.kind and args.kind not in MODELS:
        print(f"gpufinops: --kind {args.kind}: no such model (available: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        recs = run_models(con, [args.kind] if args.kind else None)
    if args.team:
        recs = [r for r in recs if r.team == args.team]
    if args.format == "json":
        print(json.dumps([r.to_dict() for r in recs], indent=2))
    else:
        import polars as pl
        frame = pl.DataFrame([{"id": r.id, "kind": r.kind, "team": r.team, "provider": r.provider,
                               "resource_id": r.resource_id, "monthly_savings_usd": float(r.monthly_savings_usd),
                               "confidence": r.confidence, "action": r.proposed.get("action"),
                               "pattern": r.evidence.get("pattern")} for r in recs])
        print(output.render(frame, args.format) if recs else "no recommendations")
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
    env = {**os.environ, "GPUFINOPS_DB": str(cfg.warehouse_path)}
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    return subprocess.call(cmd, env=env)


COMMANDS = {"ingest": cmd_ingest, "recommend": cmd_recommend, "sql": cmd_sql, "dashboard": cmd_dashboard}


if __name__ == "__main__":
    sys.exit(main())
