"""The busy-waste kinds' evaluation (``gpufinops evaluate``): per seed, a fleet of pods planted with job
phases (simulator/busy_fleet.py) is rolled up by the real hourly rollup (ingest/metrics/rollup_sql.py,
minute samples to gpu_metrics_hourly rows with their minute-level shape) and judged by the kinds' own
recommend steps (models/busy_kinds.py). Each kind's precision and recall are measured on seeds its
thresholds were not set on (HELD_OUT), beside a single-utilisation-threshold baseline: a pod is the
kind's waste when its mean DCGM_FI_DEV_GPU_UTIL is under a threshold, the threshold chosen per kind for
its best F1 on the tuning seeds (TUNING) and then measured on the held-out ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from gpufinops.ingest.metrics import metrics_store, rollup_sql
from gpufinops.models import busy_kinds
from gpufinops.models.busy_profile import BusyInputs
from gpufinops.simulator.busy_fleet import fleet
from gpufinops.simulator.busy_phases import hour_minutes
from gpufinops.warehouse.gpu_models import load_gpu_specs, normalize_gpu_model

KINDS = ("idle_held", "stalled_job", "input_bound", "no_tensor_cores", "memory_bound_inference")
TUNING = (1, 2, 3)  # the seeds the rules' thresholds and the baseline's were set on
HELD_OUT = (101, 102, 103, 104, 105)
START = datetime(2026, 11, 2, tzinfo=UTC)
GPU_HOUR_USD = 4.0
COLUMNS = {"engine": "gr_active", "sm": "sm_active", "occupancy": "sm_occupancy", "tensor": "tensor_active"}
COLUMNS |= {"fp16": "fp16_active", "fp32": "fp32_active", "dram": "dram_active", "rx": "pcie_rx_bps"}
COLUMNS |= {"tx": "pcie_tx_bps", "util": "util", "mem": "mem_used_mib", "free": "mem_free_mib"}


def samples(planted: list, seed: int) -> pa.Table:
    """Every pod's minutes as sample rows (metrics_store.SAMPLE_SCHEMA)."""
    rng = random.Random(seed)
    rows: dict[str, list] = {name: [] for name in metrics_store.SAMPLE_SCHEMA.names}
    for p in planted:
        pod = p.pod
        for hour, phase in enumerate(pod.phases):
            if phase is None:
                continue
            for minute, values in enumerate(hour_minutes(phase, rng, pod.mem_gib)):
                row: dict[str, Any] = {name: None for name in rows}
                row |= {"ts": START + timedelta(hours=hour, minutes=minute), "gpu_uuid": pod.gpu_uuids[0]}
                row |= {"name": pod.model_name, "host": pod.host, "namespace": pod.namespace, "pod": pod.pod}
                row |= {column: values[field] for field, column in COLUMNS.items()}
                for name, value in row.items():
                    rows[name].append(value)
    return pa.table(rows, schema=metrics_store.SAMPLE_SCHEMA)


def hours_of(table: pa.Table) -> pl.DataFrame:
    """The real hourly rollup of the samples, as the kinds' load step hands it over (a flat cost per GPU-hour)."""
    con = duckdb.connect()
    try:
        con.register("eval_samples", table)
        name = rollup_sql.hourly_table(con, "eval_samples", run_id="eval", deduplicate=False)
        frame = pl.from_arrow(con.sql(f"SELECT * FROM {name}").to_arrow_table())
    finally:
        con.close()
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(
        pl.struct("name", "mem_total_mib")
        .map_elements(lambda g: normalize_gpu_model(g["name"], g["mem_total_mib"]), return_dtype=pl.String)
        .alias("gpu_model"),
        pl.col("host").alias("resource_id"),
        pl.lit(GPU_HOUR_USD).alias("cost_usd"),
        pl.lit("ml").alias("team"),
        pl.lit("eval").alias("source"),
        pl.lit("dcgm_exporter").alias("source_type"),
        pl.lit("AWS").alias("provider"),
        pl.lit("p4de.24xlarge").alias("instance_type"),
        pl.lit("Standard").alias("pricing_category"),
    )


def _tensor_ratio() -> dict[str, float]:
    specs = load_gpu_specs().to_pylist()
    return {s["gpu_model"]: s["fp16_tflops"] / s["fp32_tflops"] for s in specs if s["fp16_tflops"] and s["fp32_tflops"]}


def judge(seed: int) -> dict[str, Any]:
    """One seed: the planted kind of every pod, what each kind found, and each pod's mean utilisation."""
    planted = fleet(seed)
    hours = hours_of(samples(planted, seed))
    servers = frozenset((p.pod.namespace, p.pod.pod) for p in planted if p.case == "memory-bound server")
    inputs = BusyInputs(hours, _tensor_ratio(), servers, {})
    found = {kind: {r.workload for r in getattr(busy_kinds, kind)(inputs).recommendations} for kind in KINDS}
    util = dict(
        hours.group_by("namespace", "pod")
        .agg(pl.col("util_mean").mean())
        .select(pl.concat_str("namespace", pl.lit("/"), "pod"), "util_mean")
        .iter_rows()
    )
    pods = [
        {
            "workload": f"{p.pod.namespace}/{p.pod.pod}",
            "planted": p.kind,
            "case": p.case,
            "util": util.get(f"{p.pod.namespace}/{p.pod.pod}"),
        }
        for p in planted
    ]
    return {"seed": seed, "pods": pods, "found": found}


def _score(pods: list[dict], kind: str, flagged) -> dict[str, Any]:
    tp = [p for p in pods if flagged(p) and p["planted"] == kind]
    fp = [p for p in pods if flagged(p) and p["planted"] != kind]
    fn = [p for p in pods if not flagged(p) and p["planted"] == kind]
    precision = len(tp) / (len(tp) + len(fp)) if tp or fp else None
    recall = len(tp) / (len(tp) + len(fn)) if tp or fn else None
    return {"tp": len(tp), "fp": fp, "fn": fn, "precision": precision, "recall": recall}


def _found_in(found: set[tuple], kind: str) -> Callable[[dict], bool]:
    return lambda p: (p["seed"], p["workload"], kind) in found


def _under(threshold: int) -> Callable[[dict], bool]:
    """The baseline's rule: the pod's mean GPU utilisation is under ``threshold`` %."""
    return lambda p: (p["util"] or 0) < threshold


def _best_threshold(pods: list[dict], kind: str) -> int:
    """The baseline's threshold (5 % steps) with the best F1 for ``kind`` on ``pods`` (the tuning seeds')."""
    return max(range(5, 100, 5), key=lambda threshold: _f1(_score(pods, kind, _under(threshold))))


def _f1(score: dict) -> float:
    p, r = score["precision"] or 0.0, score["recall"] or 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def evaluate(tuning: tuple[int, ...] = TUNING, held_out: tuple[int, ...] = HELD_OUT) -> dict[str, Any]:
    """Per kind: the model's and the baseline's precision / recall on the held-out seeds, and the model's
    false positives and negatives there (``render_explain``)."""
    tuned = [p for seed in tuning for p in judge(seed)["pods"]]
    judged = [judge(seed) for seed in held_out]
    pods = [p | {"seed": j["seed"]} for j in judged for p in j["pods"]]
    found = {(j["seed"], w, k) for j in judged for k in KINDS for w in j["found"][k]}
    out: dict[str, Any] = {"tuning_seeds": list(tuning), "held_out_seeds": list(held_out), "kinds": {}}
    for kind in KINDS:
        model = _score(pods, kind, _found_in(found, kind))
        threshold = _best_threshold(tuned, kind)
        baseline = _score(pods, kind, _under(threshold))
        out["kinds"][kind] = {"model": model, "baseline": baseline, "baseline_threshold_pct": threshold}
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def render(section: dict[str, Any]) -> str:
    seeds = ", ".join(map(str, section["held_out_seeds"]))
    lines = [
        f"\nBusy-waste kinds (simulator/busy_fleet.py; held-out seeds {seeds}; baseline: mean GPU util under a threshold)",
        f"  {'kind':<24} {'planted':>7} {'precision':>9} {'recall':>6}   {'baseline':>8} {'precision':>9} {'recall':>6}",
    ]
    for kind, s in section["kinds"].items():
        m, b = s["model"], s["baseline"]
        lines.append(
            f"  {kind:<24} {m['tp'] + len(m['fn']):>7} {_pct(m['precision']):>9} {_pct(m['recall']):>6}   "
            f"{'<' + str(s['baseline_threshold_pct']) + '%':>8} {_pct(b['precision']):>9} {_pct(b['recall']):>6}"
        )
    return "\n".join(lines) + "\n"


def render_explain(section: dict[str, Any], kind: str) -> str:
    """The kind's confusion on the held-out seeds: counts, then each false positive and negative's case."""
    s = section["kinds"][kind]["model"]
    lines = [
        f"\n{kind} on the busy-waste fleets: {s['tp']} true positives, {len(s['fp'])} false positives, {len(s['fn'])} false negatives"
    ]
    for label, pods in (("false positive", s["fp"]), ("false negative", s["fn"])):
        lines += [
            f"  {label}: seed {p['seed']} {p['workload']} ({p['case']}, planted {p['planted'] or 'nothing'})"
            for p in pods
        ]
    return "\n".join(lines) + "\n"
