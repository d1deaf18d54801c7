"""Every benchmark at its default sizes (what `make bench` runs): `python -m bench.run_all [--quick]`.

Prints one line per figure with PASS/FAIL against its target. Exits 0 whether or not targets are
met (figures, not tests); non-zero only when a benchmark could not run or a load gave wrong rows.
"""

from __future__ import annotations

import argparse
import sys

from bench import bench_allocation, bench_aws_cur, bench_export_focus, bench_focus_files, bench_models, bench_rollup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = parser.parse_args(argv)
    status = 0
    status |= bench_focus_files.main(["--quick"] if args.quick else [])
    status |= bench_aws_cur.main(["--quick"] if args.quick else [])
    status |= bench_export_focus.main(["--quick"] if args.quick else [])
    status |= bench_rollup.main(["--quick"] if args.quick else [])
    status |= bench_models.main(["--quick"] if args.quick else [])
    status |= bench_allocation.main(["--quick"] if args.quick else [])
    from bench import bench_dashboard
    status |= bench_dashboard.main(["--quick"] if args.quick else [])
    from bench import bench_alerts
    status |= bench_alerts.main(["--quick"] if args.quick else [])
    return status


if __name__ == "__main__":
    sys.exit(main())
