"""``gpufinops costs``: spend for a month or a range of days, by team, provider, resource, service, GPU
model or namespace, with its total (docs/commands.md).

The figures are ``warehouse.spend_by.spend_by`` (the one builder the API, MCP and the dashboard's
Overview call); this module parses the arguments and renders them: a table with rounded money, or the
exact figures as CSV / JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from gpufinops.interfaces import dates

BY = ("team", "provider", "resource", "service", "gpu_model", "namespace")  # warehouse.spend_by.BY


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("costs", help="spend for a month or days, by team, provider, resource, service, GPU model")
    p.add_argument("--by", choices=BY, default="team", help="one row per team (default), provider, resource, …")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--month", metavar="YYYY-MM", help="a calendar month in UTC (default: the newest with data)")
    when.add_argument("--from", dest="from_date", type=dates.parse, metavar="D", help="from this day (UTC)")
    p.add_argument("--to", dest="to_date", type=dates.parse, metavar="D", help="up to and including this day")
    p.add_argument(
        "--cost",
        choices=("effective", "billed", "gpu"),
        default="effective",
        help="effective (default: after discounts and commitments), billed, or gpu (the GPU instances' share)",
    )
    p.add_argument("--team", metavar="T", help="only this team")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="table (default), csv or json")


def run(cfg: Any, args: argparse.Namespace, out: IO[str] | None = None) -> int:
    from gpufinops.warehouse import db, spend_by

    out = out or sys.stdout
    if args.month is not None and args.to_date is not None:
        print("gpufinops: costs: --to goes with --from, not with --month", file=sys.stderr)
        return 2
    with db.reader(cfg.warehouse_path) as con:
        try:
            teams = [args.team] if args.team else None
            window = spend_by.window_for(con, args.month, args.from_date, args.to_date, teams)
            result = spend_by.spend_by(
                con,
                by=args.by,
                window=window,
                cost=args.cost,
                teams=teams,
            )
        except ValueError as exc:
            print(f"gpufinops: costs: {exc}", file=sys.stderr)
            return 2
    render(result, args.format, out)
    return 0


def render(result: Any, fmt: str, out: IO[str]) -> None:
    """A table with rounded money and its total; CSV the exact decimals (total last); JSON numbers."""
    from gpufinops.jobs import cells, output
    from gpufinops.warehouse import spend_by

    if fmt == "json":
        output.write(output.to_json(spend_by.as_json(result)), out)
        return
    if fmt == "csv":
        import polars as pl

        total = pl.DataFrame({result.by: ["total"], "cost_usd": [result.total_usd], "share": [1.0]})
        rows = pl.concat([result.rows, total.cast(result.rows.schema)]) if result.rows.height else result.rows
        output.write(output.csv_text(rows), out)
        return
    cost_title = {"effective": "Effective cost", "billed": "Billed cost", "gpu": "GPU cost"}[result.cost]
    print(f"{cost_title} by {result.by.replace('_', ' ')}, {result.window.label} (UTC)", file=out)
    if result.rows.is_empty():  # no bill at all reads unknown and why, never "no spend"
        print(f"unknown: {result.unknown}" if result.unknown else "no spend in this window", file=out)
        return
    shown = [r | {"share": None if r["share"] is None else 100 * r["share"]} for r in result.rows.to_dicts()]
    shown.append({result.by: "Total", "cost_usd": result.total_usd, "share": 100.0})
    columns = [
        cells.Col(result.by, result.by.replace("_", " ").capitalize(), cells.TEXT),
        cells.Col("cost_usd", cost_title, cells.MONEY),
        cells.Col("share", "Share", cells.PCT),
    ]
    output.print_table(shown, columns, out=out, width=output.terminal_width(out))
    if result.covers:
        print(result.covers, file=out)
