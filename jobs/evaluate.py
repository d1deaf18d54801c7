"""`gpufinops evaluate`: the models' quality, measured.

* Independent truth (:mod:`jobs.eval_independent`): a second fleet generator with its own laws
  (:mod:`simulator.eval_fleet`: published MLPerf throughput per GPU, prices that move, partial months, a
  restated month) over several seeds, each kind scored beside simple baselines; and the throughput
  predictors on published MLPerf / TensorRT-LLM ratios the generator did not use.
* Planted ground truth: demo fleets (the default seed, a second seed, a differently sized fleet) are
  generated in temporary homes, ingested through the real ingestors and analysed by every model; for
  each kind with ground truth: precision, recall, and the estimated monthly savings against the true
  figure (what the planted waste costs, priced from the generator's own price tables).
* The gpu_type throughput regression's held-out error against the spec-ratio baseline.
* idle_gpu on the real Helios cluster occupancy (tests/data/helios-sensetime): idle GPU-hours the
  model finds vs idle GPU-hours counted independently from the csv with plain Python.
* The spot and forecast models' own quality sections, when those modules are installed.

It lives in ``jobs`` because it wires the rooms together: it builds demo fleets, ingests them and
runs the models (``models`` itself never imports ``jobs``).
"""

from __future__ import annotations

import csv
import gzip
import importlib
import io
import json
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpufinops.jobs.eval_score import score
from gpufinops.models.recommendation import Recommendation

FLEETS = (
    {"name": "default seed", "seed": 7, "days": 60, "scale": 1},
    {"name": "second seed", "seed": 23, "days": 60, "scale": 1},
    {"name": "double fleet, 30 days", "seed": 7, "days": 30, "scale": 2},
)
INDEPENDENT_SEEDS, INDEPENDENT_DAYS = (1, 2, 3), 35
BUSY_QUICK_SEEDS = (101,)  # --quick: one held-out seed of the busy-waste fleets (jobs/eval_busy.py)
HELIOS = Path(__file__).resolve().parent.parent / "tests" / "data" / "helios-sensetime"


def run_fleet(home: Path, seed: int, days: int, scale: int) -> tuple[list[Recommendation], dict, Any]:
    """Generate, ingest and analyse one demo fleet; (recommendations, ground truth, throughput model)."""
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs import demo
    from gpufinops.jobs.ingest_run import run_configured
    from gpufinops.models import features, gpu_type, run_reads
    from gpufinops.models.run import run_models
    from gpufinops.simulator import demo_fleet
    from gpufinops.simulator.dcgm_export import write_dcgm_exports
    from gpufinops.warehouse import db

    fleet = demo_fleet.generate(home, days=days, seed=seed, scale=scale)
    write_dcgm_exports(fleet.metrics_dir, home / "metrics" / "dcgm")
    cfg = config_mod.load(demo.write_config(home, fleet.resource_map))
    failed = [r for r in run_configured(cfg) if not r.ok]
    if failed:
        raise RuntimeError(f"demo ingest failed: {failed[0].source}: {failed[0].error}")
    # one read scope (models/run_reads.py): the fit below reuses the frame the models' run read
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con, run_reads.scope(con):
        recs = run_models(con)
        s = features.RightsizingSettings()
        res = features.resources(con, s)
        model = gpu_type.fit(gpu_type.observations(res, features.specs(con), s.idle_util_pct))
    return recs, json.loads(fleet.ground_truth_path.read_text()), model


def helios_idle() -> list[dict[str, Any]]:
    """idle_gpu's run rule on each real Helios virtual cluster vs an independent count.

    Each of the 64 GPUs is a resource; GPU ``i`` is busy in a minute when ``i < running_gpu_num``. The
    model sees hourly peak utilisation per GPU (polars); the independent count walks the csv rows with
    plain Python: an hour is idle for GPU ``i`` when no minute ran ``i`` or more GPUs, and idle hours
    count once they form a run of at least ``min_run_hours`` consecutive hours.
    """
    from gpufinops.models import idle

    params = idle.IdleParams()
    out = []
    for path in sorted(HELIOS.glob("*_gpu_occupancy.csv.gz")):
        with gzip.open(path, "rt", newline="") as f:
            rows = [(r["time"], int(r["running_gpu_num"]), int(r["total_gpu_num"])) for r in csv.DictReader(f)]
        gpus = rows[0][2]
        peak: dict[str, int] = defaultdict(int)
        for ts, running, _ in rows:
            peak[ts[:13]] = max(peak[ts[:13]], running)
        hours = sorted(peak)
        independent = 0
        for gpu in range(gpus):
            run = 0
            for h in hours + [None]:
                if h is not None and peak[h] <= gpu:
                    run += 1
                    continue
                independent += run if run >= params.min_run_hours else 0
                run = 0
        frame = _helios_frame(rows, gpus)
        found = int(idle.idle_hours(frame, params)["idle"].sum())
        out.append(
            {
                "cluster": path.name.split("_")[0],
                "gpus": gpus,
                "hours": len(hours),
                "gpu_hours": gpus * len(hours),
                "idle_gpu_hours_found": found,
                "idle_gpu_hours_independent": independent,
                "idle_share": round(found / (gpus * len(hours)), 4),
            }
        )
    return out


def _helios_frame(rows: list[tuple[str, int, int]], gpus: int) -> pl.DataFrame:
    minutes = pl.DataFrame({"time": [r[0] for r in rows], "running": [r[1] for r in rows]}).with_columns(
        pl.col("time").str.to_datetime("%Y-%m-%d %H:%M:%S", time_zone="UTC").dt.truncate("1h").alias("hour")
    )
    per_gpu = minutes.join(pl.DataFrame({"gpu": list(range(gpus))}), how="cross").with_columns(
        pl.when(pl.col("gpu") < pl.col("running")).then(100.0).otherwise(0.0).alias("util")
    )
    return (
        per_gpu.group_by("gpu", "hour")
        .agg(pl.col("util").max().alias("util_max"))
        .with_columns(pl.format("gpu-{}", pl.col("gpu")).alias("resource_id"))
    )


def m2_sections(con=None) -> dict[str, Any]:
    """The spot and forecast models' own quality figures, when their modules exist."""
    out: dict[str, Any] = {}
    for label, module, func, needs_con in (
        ("spot price-ratio forecast", "gpufinops.models.spot_forecast", "quality", False),
        ("spot-mix backtest", "gpufinops.models.spot_backtest", "backtest", False),
        ("cost forecast", "gpufinops.models.forecast", "quality", True),
    ):
        try:
            fn = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            out[label] = {"status": f"not available ({exc.__class__.__name__}: {exc})"}
            continue
        if needs_con and con is None:
            out[label] = {"status": "needs a demo warehouse"}
            continue
        try:
            out[label] = fn(con) if needs_con else fn()
        except Exception as exc:  # a section's failure is reported, the others still run
            out[label] = {"status": f"failed: {exc.__class__.__name__}: {exc}"}
    return out


def evaluate(
    workdir: Path | None = None,
    fleets: tuple[dict, ...] = FLEETS,
    *,
    helios: bool = True,
    others: bool = True,
    independent_seeds: tuple[int, ...] = INDEPENDENT_SEEDS,
    independent_days: int = INDEPENDENT_DAYS,
    busy_seeds: tuple[int, ...] | None = None,
    step=None,
) -> dict[str, Any]:
    """Every figure, as plain data (printed by :func:`render`); ``step`` (a ``jobs.progress.Steps``)
    shows which fleet or data set is being measured."""
    from gpufinops.jobs import eval_independent
    from gpufinops.models import features
    from gpufinops.models.registry import scored_kinds
    from gpufinops.warehouse import db

    result: dict[str, Any] = {"fleets": [], "independent": [], "generated_at": datetime.now(UTC).isoformat()}
    show = step.start if step is not None else (lambda _text: None)
    done = step.done if step is not None else (lambda: None)
    with tempfile.TemporaryDirectory(prefix="gpufinops-evaluate-", dir=workdir) as tmp:
        for n, seed in enumerate(independent_seeds):
            show(f"independent fleet {n + 1} of {len(independent_seeds)} (seed {seed}: simulate, ingest, every model)")
            result["independent"].append(
                eval_independent.run_fleet(Path(tmp) / f"independent-{n}", seed, independent_days)
            )
            done()
        if result["independent"]:
            from gpufinops.jobs import eval_explain

            result["independent_summary"] = eval_independent.summarise(result["independent"])
            result["calibration"] = eval_explain.calibration(result["independent"])
            from gpufinops.jobs import eval_choice

            result["predictor_choice"] = eval_choice.choices(result["independent"])
        for n, fleet in enumerate(fleets):
            home = Path(tmp) / f"fleet-{n}"
            show(f"fleet {n + 1} of {len(fleets)}: {fleet['name']} (simulate, ingest, every model)")
            recs, truth, model = run_fleet(home, fleet["seed"], fleet["days"], fleet["scale"])
            from gpufinops.jobs import config as config_mod

            cfg = config_mod.load(home / "gpufinops.toml")
            with db.reader(cfg.warehouse_path) as con:
                real = eval_independent.real_ratio_mae(model, features.specs(con))
                if others and n == 0:
                    result["others"] = m2_sections(con)
            done()
            result["fleets"].append(
                {
                    **fleet,
                    "machines": len(truth["machines"]),
                    "kinds": score(recs, truth, set(scored_kinds())),
                    "throughput_model": model.quality,
                    "real_ratios": real,
                }
            )
    if busy_seeds != ():
        from gpufinops.jobs import eval_busy

        show("busy-waste kinds on their job-phase fleets (tuning and held-out seeds)")
        result["busy"] = eval_busy.evaluate(held_out=busy_seeds or eval_busy.HELD_OUT)
        done()
    if helios:
        show("idle detection on the real Helios clusters")
        result["helios_idle"] = helios_idle()
        done()
    return result


def render(result: dict[str, Any], explain: str | None = None) -> str:
    """The figures as text; ``explain`` (a kind): also that kind's false positives and negatives."""
    from gpufinops.jobs import eval_explain, eval_independent

    out = io.StringIO()
    if result.get("independent"):
        out.write(eval_independent.render(result["independent"], result["independent_summary"]))
        if result.get("predictor_choice"):
            from gpufinops.jobs import eval_choice

            out.write("\n".join(eval_choice.render(result["predictor_choice"])) + "\n")
        if result.get("calibration"):
            out.write("\n".join(eval_explain.render_calibration(result["calibration"])) + "\n")
        if explain and explain not in (result.get("busy") or {}).get("kinds", {}):
            out.write(eval_explain.render_explain(result["independent"], explain))
    if result.get("busy"):
        from gpufinops.jobs import eval_busy

        out.write(eval_busy.render(result["busy"]))
        if explain in result["busy"]["kinds"]:
            out.write(eval_busy.render_explain(result["busy"], explain))
        print("\nDemo fleets (simulator/demo_fleet.py; truth from the demo's own price tables)", file=out)
    for fleet in result["fleets"]:
        print(f"\n{fleet['name']} (seed {fleet['seed']}, {fleet['days']} days, {fleet['machines']} machines)", file=out)
        print(
            f"  {'kind':<13} {'planted':>7} {'found':>5} {'precision':>9} {'recall':>6} "
            f"{'truth $/mo':>12} {'found $/mo':>12} {'error':>7}",
            file=out,
        )
        for kind, k in fleet["kinds"].items():
            money = (
                f"{k['truth_monthly_savings_usd']:>12,.2f} {k['found_monthly_savings_usd']:>12,.2f} "
                f"{k['savings_error']:>+7.1%}"
                if k["savings_error"] is not None
                else f"{'n/a':>12} {'n/a':>12} {'':>7}"
            )
            print(
                f"  {kind:<13} {k['planted']:>7} {k['found']:>5} {k['precision']:>9.2f} {k['recall']:>6.2f} {money}",
                file=out,
            )
        q = fleet["throughput_model"]
        print(
            f"  throughput predictors, held out by GPU pair ({q.get('folds')} folds, {q.get('pairs')} quantile pairs "
            f"over {q.get('gpu_pairs')} GPU pairs): regression {q.get('regression_mae_pct')} util points, spec-ratio "
            f"{q.get('spec_ratio_mae_pct')}, no-change {q.get('no_change_mae_pct')} -> {q.get('predictor')} used",
            file=out,
        )
        real = fleet.get("real_ratios", {}).get("all")
        if real:
            print(
                f"  the same predictors on published ratios ({real['points']} points): "
                + ", ".join(f"{n.replace('_baseline', '')} {v}" for n, v in real["mae_pct"].items()),
                file=out,
            )
    for row in result.get("helios_idle", []):
        print(
            f"\nHelios {row['cluster']} ({row['gpus']} GPUs × {row['hours']} h): idle GPU-hours found "
            f"{row['idle_gpu_hours_found']}, counted independently {row['idle_gpu_hours_independent']} "
            f"({row['idle_share']:.1%} of GPU-hours)",
            file=out,
        )
    for label, section in result.get("others", {}).items():
        print(f"\n{label}", file=out)
        out.writelines(f"{line}\n" for line in _readable(section, "  "))
    return out.getvalue()


def _readable(value: Any, indent: str) -> list[str]:
    """A nested section as indented ``key: value`` lines (``--format json`` keeps the raw structure)."""
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            name = str(key).replace("_", " ")
            if isinstance(item, dict | list) and item:
                lines += [f"{indent}{name}:", *_readable(item, indent + "  ")]
            else:
                lines.append(f"{indent}{name}: {_scalar(item)}")
        return lines
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            return [f"{indent}{', '.join(_scalar(v) for v in value)}"]
        return [line for item in value for line in [f"{indent}-", *_readable(item, indent + "  ")]]
    return [f"{indent}{_scalar(value)}"]


def _scalar(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
