"""`gpufinops recommend`: run the models, store their findings, and print them as the store holds them.

What is printed (table, JSON, CSV) and totalled is the one read model (``jobs.export.recommendation_read.of_run``
over ``warehouse.recommendation_read.VIEW``): each finding with its stored status and latest
decision, so a finding dismissed through the API or the dashboard reads ``dismissed`` here too and is
left out of the total (``models.plans.total``), which says how many findings decisions left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpufinops.jobs import config as config_mod


def run(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs import output, progress
    from gpufinops.models.kind_coverage import unknown_kinds
    from gpufinops.models.registry import MODELS
    from gpufinops.models.run import analyse
    from gpufinops.warehouse import db, recommendation_read

    with (
        progress.steps(len(MODELS), "recommend") as step,
        db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit, create=False) as con,  # models need data
    ):
        found = analyse(
            con,
            [args.kind] if args.kind else None,
            settings=cfg.models,  # every model runs
            on_model=lambda kind, done: step.done() if done else step.start(f"model {kind}"),
        )
        recs = recommendation_read.of_run(con, found.recommendations)
        blind = unknown_kinds(con, [args.kind] if args.kind else None, team=args.team or None)
    withheld = found.withheld
    if args.team:
        recs = [r for r in recs if r["team"] == args.team]
        withheld = [w for w in withheld if w.team == args.team]
    if args.format in ("json", "csv"):  # the records on stdout, what the models could not see on stderr
        for group in blind:
            print(f"unknown: {group.line()}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(recs, indent=2))
        return 0
    if args.format == "csv":
        from gpufinops.models.recommendation import flat_csv

        output.write(flat_csv(recs))
        return 0
    from gpufinops.jobs import tables

    if recs:
        tables.print_recommendations(recs)
        print()
        for line in total_lines(recs):
            print(line)
    else:
        print("no recommendations" + (" where the models could see the data" if blind else ""))
    print_unknown(blind)
    print_withheld(withheld, args.show_withheld)
    return 0


def print_unknown(blind: list) -> None:
    """The kinds whose inputs are missing: unknown, why, and the source that would complete them."""
    if not blind:
        return
    from rich.padding import Padding

    from gpufinops.jobs import output

    print()
    print('unknown (an input is missing: these kinds could not look, so no finding there is not "no waste"):')
    for group in blind:
        output.emit(output.console(), Padding(group.line(), (0, 0, 0, 2)))


def total_lines(recs: list[dict[str, Any]]) -> list[str]:
    """The total (``models.plans.total``) and, when decisions took findings out of it, how many and which."""
    from gpufinops.jobs import cells
    from gpufinops.models import plans

    counted = [r for r in recs if plans.counted(r)]
    dropped = plans.left_out(recs)
    alternatives = sum(1 for r in recs if r.get("plan") not in plans.COUNTED)
    lines = [
        f"total: {cells.money(plans.total(recs))}/month in {len({r['plan_id'] for r in counted})} plan(s) "
        f"({len(counted)} action(s); {alternatives} alternative(s), never added)"
    ]
    if dropped:
        by_status: dict[str, int] = {}
        for r in dropped:
            by_status[r["status"]] = by_status.get(r["status"], 0) + 1
        states = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items()))
        lines.append(
            f"left out of the total because of decisions: {len(dropped)} finding(s) ({states}), "
            f"{cells.money(plans.total(dropped, statuses=tuple(by_status)))}/month"
        )
    return lines


def print_withheld(withheld: list, show: bool) -> None:
    """A line per withhold reason and count; with ``show``, every withheld finding."""
    from gpufinops.jobs import tables

    counts: dict[str, int] = {}
    for w in withheld:
        counts[w.reason] = counts.get(w.reason, 0) + 1
    if not counts:
        return
    print()
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"withheld: {n} × {reason.replace('_', ' ')}")
    if not show:
        from rich.padding import Padding

        from gpufinops.jobs import output

        output.emit(
            output.console(),
            Padding(
                "(gpufinops recommend --show-withheld lists each with the missing fact "
                "and the source that provides it)",
                (0, 0, 0, 2),
            ),
        )  # wrapped, indented
        return
    tables.print_withheld(withheld)
