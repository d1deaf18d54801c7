"""Every benchmark at its default sizes (what `make bench` runs): `python -m bench.run_all [--quick]`.

Prints one line per figure with PASS/FAIL against its target. Exits 0 whether or not targets are
met (figures, not tests); non-zero only when a benchmark could not run or a load gave wrong rows.
"""

from __future__ import annotations

import argparse
import sys

from bench import (
    bench_allocation,
    bench_aws_cur,
    bench_export_focus,
    bench_focus_files,
    bench_hour,
    bench_models,
    bench_rollup,
    bench_unit_costs,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = parser.parse_args(argv)
    from bench import bench_alerts, bench_dashboard, bench_dashboard_browser
    from gpufinops.jobs import progress

    benches = (
        bench_focus_files,
        bench_aws_cur,
        bench_export_focus,
        bench_rollup,
        bench_models,
        bench_allocation,
        bench_hour,
        bench_unit_costs,
        bench_dashboard,
        bench_alerts,
        bench_dashboard_browser,  # skips itself, saying so, where no Chromium is found
    )
    status = 0
    with progress.steps(len(benches), "bench") as step:  # on a terminal only; the figures print above it
        for bench in benches:
            step.start(bench.__name__.removeprefix("bench."))
            status |= bench.main(["--quick"] if args.quick else [])
            step.done()
    return status


if __name__ == "__main__":
    sys.exit(main())
