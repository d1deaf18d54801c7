"""`gpufinops carbon`: energy and emissions per team, resource or month (docs/carbon.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from gpufinops.interfaces import dates
from gpufinops.jobs.config import Config

BY = ("team", "resource", "month")  # warehouse.queries.carbon.BY (imported only when the command runs)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "carbon", help="energy (kWh) and emissions (kg CO2e) from measured GPU power, per team, resource or month"
    )
    p.add_argument(
        "--by", choices=BY, default="team", help="rows per month and team (default), resource, or month alone"
    )
    p.add_argument(
        "--period",
        choices=("day", "week", "month"),
        default="month",
        help="rows per calendar month (default), ISO week (from Monday, its first day shown) or UTC day",
    )
    p.add_argument("--team", help="only this team")
    p.add_argument("--from", dest="start", type=dates.parse, metavar="D", help="from this date (UTC)")
    p.add_argument("--to", dest="end", type=dates.parse, metavar="D", help="up to and including this date")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="table (default), csv or json")


def run(cfg: Config, args: argparse.Namespace, out=None) -> int:
    from gpufinops.jobs import cells, output
    from gpufinops.warehouse import db, windows
    from gpufinops.warehouse.queries import carbon as carbon_queries

    out = out or sys.stdout
    end = args.end + timedelta(days=1) if args.end is not None else None
    if args.start is not None and end is not None and end <= args.start:
        print("gpufinops: carbon: --to is before --from", file=sys.stderr)
        return 2
    with db.reader(cfg.warehouse_path) as con:
        frame = carbon_queries.carbon_summary(
            con, by=args.by, team=args.team, start=args.start, end=end, period=args.period
        )
        sources = carbon_queries.sources(con, team=args.team, start=args.start, end=end)
        cover = carbon_queries.emissions_coverage(con, team=args.team, start=args.start, end=end)
    frame = carbon_queries.described(frame, args.period, windows.days(args.start, args.end))
    if args.format != "table":
        output.write(output.render(frame, args.format), out)
        return 0
    if frame.is_empty():
        print("no carbon rows (carbon_hourly is filled by loads of bills and GPU metrics)", file=out)
        print(f"{cover.sentence()}; withheld, not estimated", file=out) if cover.sentence() else None
        return 0
    frame = _unknown_where_unmeasured(frame)
    per = args.period if args.by == "month" else f"{args.period} and {args.by}"
    print(f"Energy and emissions per {per}, {windows.days(args.start, args.end).label} (UTC)", file=out)
    cols = [
        cells.Col(
            "period_label",
            {"month": "Month", "week": "Week of", "day": "Day"}[args.period],
            cells.TEXT,
            no_wrap=True,
        )
    ]
    if args.by != "month":
        cols.append(cells.Col("team", "Team", cells.TEXT))
    if args.by == "resource":
        cols += [cells.Col("resource_id", "Resource", cells.ID), cells.Col("region", "Region", cells.TEXT)]
    cols += [
        cells.Col("gpu_hours", "GPU-h", cells.NUMBER),
        cells.Col("withheld_gpu_hours", "Withheld GPU-h", cells.NUMBER),
        cells.Col("kwh", "kWh", cells.NUMBER),
        cells.Col("kg_co2e", "kg CO2e", cells.NUMBER),
        cells.Col("kg_co2e_per_gpu_hour", "kg/GPU-h", cells.NUMBER, hide_below=100),
    ]
    output.print_table(frame, cols, out=out, width=output.terminal_width(out))
    if cover.sentence():  # how many GPU-hours had no power reading, and which source would measure them
        print(f"{cover.sentence()}; withheld, not estimated", file=out)
    for row in sources.head(5).iter_rows(named=True):
        print(
            f"  {row['grid_g_co2e_per_kwh']:.0f} gCO2e/kWh: {row['intensity_source']}; PUE {row['pue']:g} "
            f"({row['pue_source']}); node: {row['node_basis']}",
            file=out,
        )
    return 0


def _unknown_where_unmeasured(frame):
    """The energy columns as text: ``unknown`` in a row none of whose GPU-hours had a power reading (its
    emissions are not zero, they were not measured; the sentence below the table says which source would)."""
    import polars as pl

    from gpufinops.jobs import cells

    blind = (pl.col("gpu_hours") - pl.col("withheld_gpu_hours")) <= 0
    return frame.with_columns(
        pl.when(blind)
        .then(pl.lit("unknown"))
        .otherwise(pl.col(c).map_elements(cells.number, return_dtype=pl.Utf8))
        .alias(c)
        for c in ("kwh", "kg_co2e", "kg_co2e_per_gpu_hour")
    )
