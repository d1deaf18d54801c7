"""`gpufinops enforce simulate --budget NAME --month YYYY-MM [--policy P]` (jobs/enforce/simulate.py)."""

from __future__ import annotations

import argparse
import json
import sys

from gpufinops.jobs import config as config_mod


def cmd_simulate(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs.enforce import simulate
    from gpufinops.warehouse import db

    if not args.budget or not args.month:
        print("gpufinops: enforce simulate: --budget NAME and --month YYYY-MM are required", file=sys.stderr)
        return 2
    if args.apply or args.current or args.enforce_format:
        print("gpufinops: enforce simulate: --apply, --current and --format are not for a replay", file=sys.stderr)
        return 2
    if not 1 <= args.workload_hours <= 24 * 92:
        print(
            f"gpufinops: enforce simulate: --workload-hours {args.workload_hours}: must be 1 to 2208", file=sys.stderr
        )
        return 2
    budgets = {b.name: b for b in cfg.alerts.settings.budgets}
    budget = budgets.get(args.budget)
    if budget is None or not budget.scope.teams:
        known = ", ".join(n for n, b in budgets.items() if b.scope.teams) or "none"
        print(f"gpufinops: enforce simulate: --budget {args.budget!r}: no budget of that name with teams in its "
              f"scope (known: {known})", file=sys.stderr)  # fmt: skip
        return 2
    if budget.period != "month":
        print(f"gpufinops: enforce simulate: budget {budget.name} is for a {budget.period}: a month replays a "
              "monthly budget", file=sys.stderr)  # fmt: skip
        return 2
    policy = args.policy or (budget.enforce if budget.enforce != "warn" else "cap")
    try:
        simulate.month_bounds(args.month)
    except ValueError as exc:
        print(f"gpufinops: enforce simulate: {exc}", file=sys.stderr)
        return 2
    with db.reader(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
        result = simulate.replay(
            con,
            budget,
            args.month,
            policy=policy,
            interval_hours=max(int(cfg.enforce.interval_hours), 1),
            workload_hours=args.workload_hours,
            settings=cfg.export,
        )
    if result.gpu_hours_asked == 0 and result.spend_without == 0:
        print(f"gpufinops: enforce simulate: no cost lines of team {result.team} in {args.month}", file=sys.stderr)
        return 1
    if args.output_format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(result.lines()))
    return 0
