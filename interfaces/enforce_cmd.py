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
        from gpufinops.jobs import layouts

        documents = text.count("\n---\n") + text.startswith("---\n")
        layouts.wrote(args.out, f"{documents:,} {fmt} document(s): {text.splitlines()[0].split(': ', 1)[-1]}")
    return 0


def cmd_enforce(cfg: config_mod.Config, args: argparse.Namespace) -> int:
    if args.action == "simulate":
        from gpufinops.interfaces.simulate_cmd import cmd_simulate

        return cmd_simulate(cfg, args)
    misplaced = [f for f, v in (("--budget", args.budget), ("--month", args.month), ("--policy", args.policy)) if v]
    if misplaced:
        print(f"gpufinops: enforce: {', '.join(misplaced)} applies to `enforce simulate` only", file=sys.stderr)
        return 2
    if args.apply and args.current:
        print("gpufinops: enforce --apply: --current is for --diff (apply reads the cluster itself)", file=sys.stderr)
        return 2
    from gpufinops.jobs.enforce import apply as apply_mod
    from gpufinops.jobs.enforce import build
    from gpufinops.jobs.enforce.kube import KubeError

    cluster = args.cluster or cfg.enforce.cluster
    if cluster is None and not args.current:
        print(
            "gpufinops: enforce: --cluster NAME is required to read or write a cluster (the one the kubeconfig "
            "context reaches; or set [enforce] cluster)",
            file=sys.stderr,
        )
        return 2
    fmt = args.enforce_format or cfg.enforce.formats[0]
    try:
        if args.apply:
            result = apply_mod.apply(cfg, fmt=fmt, cluster=cluster)
            print(result.text, end="")
            return 0 if result.ok else 1
        print(apply_mod.diff(cfg, fmt=fmt, cluster=cluster, current=args.current), end="")
        return 0
    except build.EnforceError as exc:
        print(f"gpufinops: enforce: {exc}", file=sys.stderr)
        return 2
    except KubeError as exc:
        print(f"gpufinops: enforce: {exc}", file=sys.stderr)
        return 1
