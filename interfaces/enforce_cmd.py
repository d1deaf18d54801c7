"""`gpufinops export budgets` and `gpufinops enforce` (--diff, --apply, simulate): budgets that hold."""

from __future__ import annotations

import argparse
import sys

from gpufinops.jobs import config as config_mod


def cmd_export_budgets(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    from gpufinops.jobs.enforce import build
    from gpufinops.jobs.export import write
    from gpufinops.warehouse import db

    if args.team or args.from_date or args.to_date or args.provider or args.focus_version:
        print("gpufinops: export budgets: only --format, --cluster and --out apply", file=sys.stderr)
        return 2
    fmt = args.file_format or "kueue"
    try:
        with db.reader(cfg.warehouse_path) as con:
            text = build.render(con, fmt, cfg.alerts.settings.budgets, cfg.export, cluster=args.cluster)
    except build.EnforceError as exc:
        print(f"gpufinops: export budgets: {exc}", file=sys.stderr)
        return 2
    write(text, args.out)
    if args.out:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
