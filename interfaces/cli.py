"""The ``gpufinops`` command line (docs/commands.md): exit 0 ok, 1 a failed run, 2 usage or config error."""

from __future__ import annotations

import argparse
import logging
import os
import sys

# Numeric libraries beside DuckDB: one thread each (measured here: a numpy matmul beside DuckDB
# doubled a query's time). Must be set before numpy / polars are imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("POLARS_MAX_THREADS", "2")


from gpufinops.interfaces.cli_commands import COMMANDS  # noqa: E402
from gpufinops.interfaces.cli_parser import build_parser as _parser  # noqa: E402
from gpufinops.jobs import config as config_mod  # noqa: E402

log = logging.getLogger("gpufinops")


def main(argv: list[str] | None = None) -> int:
    from gpufinops.interfaces import errors

    with errors.scrubbed_output():  # every command's output through the one scrubber (ingest.core.scrub)
        argv = sys.argv[1:] if argv is None else argv
        args = _parser(argv).parse_args(argv)
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
            from gpufinops.interfaces import init_cmd

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
    except (Exception, KeyboardInterrupt) as exc:  # the one error funnel (interfaces/errors.py)
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


if __name__ == "__main__":
    sys.exit(main())
