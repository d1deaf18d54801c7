"""``gpufinops unit-costs``: $ per 1M input / output tokens and per 1,000 requests of the serving pods.

The figures are ``derived.unit_costs.unit_costs`` (the one builder the API, dashboard and report call);
this module only parses the arguments and renders them as a table, CSV or JSON (to stdout, or ``--out``
through the one file writer, ``jobs.files``). Why kWh / kg CO2e are empty, when they are, goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import Any

from gpufinops.interfaces import dates


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "unit-costs",
        help="$ per 1M input/output tokens and per 1,000 requests of serving pods, "
        "per day and model, team or namespace",
    )
    p.add_argument(
        "--by",
        choices=("model", "team", "namespace"),
        default="model",
        help="model (default: per team, namespace and model), team, or namespace (per team and namespace)",
    )
    p.add_argument("--from", dest="from_date", type=dates.parse, help="hours from this date (UTC)")
    p.add_argument("--to", dest="to_date", type=dates.parse, help="hours up to this date (inclusive)")
    p.add_argument(
        "--period",
        choices=("day", "week", "month"),
        default="day",
        help="rows per UTC day (default), ISO week (from Monday) or calendar month; `day` is the period's first day",
    )
    p.add_argument("--team", metavar="T", help="only this team")
    p.add_argument("--model", metavar="M", help="only this model (as the server names it)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="table (default), csv or json")
    p.add_argument("--out", metavar="FILE", help="write to this file (default: stdout)")


def run(cfg: Any, args: argparse.Namespace) -> int:
    import polars as pl

    from gpufinops.derived import unit_costs, unit_costs_empty
    from gpufinops.jobs import files, output
    from gpufinops.warehouse import db, windows

    end = args.to_date + timedelta(days=1) if args.to_date is not None else None
    with db.reader(cfg.warehouse_path) as con:
        asked = dict(team=args.team, model=args.model, start=args.from_date, end=end, settings=cfg.unit_costs)
        frame = unit_costs.unit_costs(con, by=args.by, period=args.period, **asked)
        totals = unit_costs.unit_costs(con, by=unit_costs.TOTAL, period=args.period, **asked)
        note = unit_costs.carbon_note(con)
        empty = (
            None
            if frame.height
            else unit_costs_empty.why_empty(con, team=args.team, model=args.model, start=args.from_date, end=end)
        )
    if args.format == "table":
        from gpufinops.jobs import layouts

        shown = pl.concat([frame, totals.with_columns(pl.lit("Total", pl.Utf8).alias("team"))]).sort("day")
        cut = windows.days(args.from_date, args.to_date)
        heading = f"Unit costs per {args.by} and {args.period}, {cut.label} (UTC)\n"
        text = (
            heading + layouts.frame_text(readable(shown, args.period, cut), output.terminal_width())
            if frame.height
            else str(empty)
        )
    else:
        text = output.render(frame, args.format)
    if empty and args.format != "table":  # the records stay parseable; why they are none goes to stderr
        print(f"gpufinops: unit-costs: {empty}", file=sys.stderr)
    if note:
        print(f"gpufinops: unit-costs: kwh and kg_co2e are empty: {note}", file=sys.stderr)
    if args.out:
        files.write_text(args.out, text if text.endswith("\n") else text + "\n", make_parents=True)
    else:
        output.write(text)
    return 0


def readable(frame: Any, period: str, window: Any = None) -> Any:
    """The table's columns: money rounded to the cent, rates to a hundredth of a cent (the exact
    figures are the CSV / JSON's), the period named (a month ``2026-10``; one the ``window`` cuts with the
    days it covers, ``2026-10 (05 – 31 Oct)``), no column of only blanks."""
    import polars as pl

    from gpufinops.jobs import cells
    from gpufinops.warehouse import windows

    cut = window if window is not None else windows.days(None, None)

    def label(day: Any) -> str:
        return windows.period_label(period, f"{day:%Y-%m}" if period == "month" else day, cut)

    def dollars(col: str, places: int) -> pl.Expr:
        return pl.col(col).map_elements(lambda v: cells.money(v, places=places), return_dtype=pl.Utf8)

    shown = frame.select(
        pl.col("day")
        .map_elements(label, return_dtype=pl.Utf8)
        .alias({"day": "day", "week": "week of", "month": "month"}[period]),
        "team",
        "namespace",
        "model",
        dollars("gpu_cost_usd", 2).alias("GPU cost"),
        pl.col("output_tokens").alias("output tokens"),
        dollars("usd_per_1m_input_tokens", 4).alias("$ per 1M input"),
        dollars("usd_per_1m_output_tokens", 4).alias("$ per 1M output"),
        dollars("usd_per_1k_requests", 4).alias("$ per 1k requests"),
        pl.col("kg_co2e").round(2).alias("kg CO2e"),
    )
    return shown.select([c for c in shown.columns if shown[c].null_count() < shown.height])
