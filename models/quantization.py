"""quantization: inference workloads that would fit fewer or cheaper GPUs at a lower precision.

An inference resource (``workload`` tag in ``inference_workloads``) running at FP32 (its
``precision`` tag, or inferred from DCGM when tensor pipes stay idle while SMs are busy) would move
half the bytes at FP16/BF16 and a quarter at INT8/FP8: its peak memory and, conservatively, its
busy time shrink by that ratio. The shrunk workload is then placed with gpu_type's rules (offered
in the region, memory × headroom fits, predicted utilisation under the ceiling, a real saving) on a
cheaper GPU of the same count, or on fewer GPUs of the same type. A move that fits without
quantizing is gpu_type's finding, not this one. Which precisions are proposed is configurable
(``quantization_precisions``, default FP16 only: INT8/FP8 need calibration and can be slower than
FP16 on GPUs whose runtimes lack fast INT8 kernels).

Which throughput predictor prices the quantized steps is quantization's own choice
(``quantization_predictor``, default :data:`PREDICTOR`), made by the findings each predictor yields on
the second generator's training seeds (:data:`TRAINING_SEEDS`: F1, then the savings error) and checked
on the held-out seed by ``gpufinops evaluate``: the spec-ratio scaling over-predicts what an FP16
encoder needs on a smaller GPU, so "no change" (the FP16 job's busy time shrinks as its bytes do) wins.
Whether the move fits without quantizing is still judged by gpu_type's own predictor, so exactly one of
the two kinds claims a move.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal

import duckdb
import polars as pl

from gpufinops.models import features, gpu_type
from gpufinops.models.features import RightsizingSettings
from gpufinops.models.gpu_type import ThroughputModel
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money

# chosen from `gpufinops evaluate` on the training seeds (tests/test_quantization_choice.py re-derives it)
PREDICTOR: str = RightsizingSettings.quantization_predictor
TRAINING_SEEDS, HELD_OUT_SEEDS = (1, 2), (3,)
FEWER_GPUS = "none_same_gpu_type"  # a fewer-GPUs step is priced by the bytes factor, not a predictor

BITS = {"fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16, "int8": 8, "fp8": 8}


def analyse(
    con: duckdb.DuckDBPyConnection, settings: RightsizingSettings | dict | None = None
) -> tuple[list[Recommendation], list[Withheld]]:
    return gpu_type.analyse(con, settings, recommend_fn=recommend)


def findings(inputs: gpu_type.GpuTypeInputs, settings: RightsizingSettings) -> Findings:
    """The recommend step over gpu_type's inputs (gpu_type.load): the same fleet, quantization's rules."""
    return gpu_type.findings(inputs, settings, recommend_fn=recommend)


def current_precision(row: dict) -> tuple[str | None, str]:
    """(precision, where it came from): the tag, else DCGM activity (busy SMs, idle tensor pipes → FP32)."""
    if row.get("precision") in BITS:
        return row["precision"], "tag"
    sm, tensor = row.get("sm_active_mean"), row.get("tensor_active_mean")
    if sm is not None and tensor is not None and sm > 0.2 and tensor < 0.05:
        return "fp32", "dcgm_tensor_idle"
    return None, "unknown"


def pricing_model(model: ThroughputModel, s: RightsizingSettings) -> tuple[ThroughputModel, str]:
    """(the model that predicts a quantized step's utilisation, why that predictor)."""
    wanted = s.quantization_predictor
    if wanted == "selected" or wanted == model.predictor:
        return (
            model,
            f"{model.predictor}: gpu_type's choice" if wanted == "selected" else f"{wanted}: quantization_predictor",
        )
    if wanted == gpu_type.REGRESSION and model.fitted is None:
        return model, f"{model.predictor}: quantization_predictor {wanted} asked for, too few observations to fit it"
    why = f"{wanted}: quantization_predictor" + (
        " (chosen by findings F1 on the evaluation's training seeds)" if wanted == PREDICTOR else ""
    )
    return dataclasses.replace(model, predictor=wanted), why


def recommend(
    res: pl.DataFrame,
    offers: pl.DataFrame,
    spec: dict[str, dict],
    model: ThroughputModel,
    s: RightsizingSettings = RightsizingSettings(),
) -> tuple[list[Recommendation], list[Withheld]]:
    recs: list[Recommendation] = []
    withheld: list[Withheld] = []
    priced, why = pricing_model(model, s)
    inference = gpu_type.candidates(res, s).filter(pl.col("workload").is_in(list(s.inference_workloads)))
    for row in inference.sort("resource_id").iter_rows(named=True):
        precision, source = current_precision(row)
        steps = [p for p in s.quantization_precisions if precision and BITS.get(p, 99) < BITS[precision]]
        if not steps or precision is None:
            continue
        if row["gpu_count"] is None:
            withheld.append(gpu_type.unknown_count("quantization", row))
            continue
        refused: list[str] = []
        best = _best_step(row, steps, precision, gpu_type.Catalogue(offers, spec), model, s, refused, priced)
        if best is None:
            if refused:
                lead = f"{precision.upper()} inference at p95 {row['util_p95']:.0f} %"
                withheld.append(gpu_type.nothing_fits("quantization", row, refused, s, lead))
            continue
        held = gpu_type.held_back("quantization", row, best, s)
        if held is not None:
            withheld.append(held)
            continue
        recs.append(_recommendation(row, best, precision, source, priced, s, why))
    return sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld


def _best_step(
    row: dict,
    steps: list[str],
    precision: str,
    catalogue: gpu_type.Catalogue,
    model: ThroughputModel,
    s: RightsizingSettings,
    refused: list[str] | None = None,
    priced: ThroughputModel | None = None,
) -> dict | None:
    """The best-saving (precision, target) step; None when it fits as it is (gpu_type's finding, judged
    by ``model``) or when nothing fits (each target's refusal at each step appended to ``refused``); the
    quantized steps are predicted by ``priced`` (default ``model``)."""
    refused = [] if refused is None else refused
    priced = model if priced is None else priced
    mem_gib, util = (row["mem_used_max_mib"] or 0) / 1024, features.sizing_util(row)
    spec = catalogue.specs
    as_is = gpu_type.best_target(row, catalogue, model, s, gpu_type.Need(mem_gib, util, precision))
    if as_is is not None:
        return as_is if "unpriced" in as_is else None  # fits without quantizing: gpu_type's finding
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    options = []
    for step in steps:
        at_step: list[str] = []
        factor = BITS[step] / BITS[precision]
        need = gpu_type.Need(mem_gib * factor, util, precision, new_precision=step, util_factor=factor)
        choice = gpu_type.best_target(row, catalogue, priced, s, need, at_step)
        refused.extend(f"at {step.upper()} {r}" for r in at_step)
        if choice is not None and "offer" in choice:
            ratio = Decimal(str(choice["offer"]["on_demand_usd_per_hour"])) / choice["current_price"]
            options.append(
                {
                    **choice,
                    "step": step,
                    "factor": factor,
                    "gpu_count": row["gpu_count"],
                    "savings": money(monthly_cost * (1 - ratio)),
                    "monthly_cost": money(monthly_cost * ratio),
                }
            )
        fewer = _fewer_gpus(row, mem_gib * factor, util * factor, spec, s)
        if fewer is not None:
            per_gpu = monthly_cost / row["gpu_count"]
            options.append(
                {
                    "step": step,
                    "factor": factor,
                    "gpu_count": fewer,
                    "offer": None,
                    "savings": money(per_gpu * (row["gpu_count"] - fewer)),
                    "monthly_cost": money(per_gpu * fewer),
                }
            )
    options = [
        o
        for o in options
        if o["savings"] >= Decimal(str(s.min_monthly_savings_usd))
        and o["savings"] >= monthly_cost * Decimal(str(s.min_savings_fraction))
    ]
    return max(options, key=lambda o: (o["savings"], BITS[o["step"]])) if options else None


def _fewer_gpus(row: dict, mem_gib: float, util: float, spec: dict, s: RightsizingSettings) -> int | None:
    """GPUs of the same type the shrunk workload needs, when fewer than today."""
    count, gpu = row["gpu_count"] or 1, spec.get(row["gpu_model"])
    if count <= 1 or not gpu or not gpu.get("memory_gib"):
        return None
    usable = float(gpu["memory_gib"]) * gpu_type.USABLE_MEMORY
    needed = max(
        math.ceil(count * mem_gib * s.memory_headroom / usable), math.ceil(count * util / s.max_target_util_pct), 1
    )
    return needed if needed < count else None


def _recommendation(
    row: dict, best: dict, precision: str, source: str, model: ThroughputModel, s: RightsizingSettings, why: str
) -> Recommendation:
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    current = {**features.current_config(row, monthly_cost), "precision": precision}
    offer = best["offer"]
    proposed = {
        **current,
        "precision": best["step"],
        "gpu_count": best["gpu_count"],
        "monthly_cost_usd": best["monthly_cost"],
    }
    if offer is not None:
        proposed.update(instance_type=offer["instance_type"], gpu_model=offer["gpu_model"])
        proposed["action"] = f"serve at {best['step'].upper()} on {offer['instance_type']} ({offer['gpu_model']})"
    else:
        proposed["action"] = f"serve at {best['step'].upper()} on {best['gpu_count']} of {row['gpu_count']} GPUs"
    mem_gib = (row["mem_used_max_mib"] or 0) / 1024
    evidence = {
        "util_p95": row["util_p95"],
        "mem_max_gib": round(mem_gib, 2),
        "mem_estimate_gib": round(mem_gib * best["factor"], 2),
        "bytes_factor": best["factor"],
        "precision_source": source,
        "window_days": round(row["window_days"], 2),
        "measured_hours": row["measured_hours"],
        "metric_coverage": round(row["coverage"], 4),
        "sm_active_mean": row["sm_active_mean"],
        "tensor_active_mean": row["tensor_active_mean"],
        "throughput_model": best.get("predicted_by", model.name) if offer is not None else FEWER_GPUS,
        "throughput_predictor_choice": why,
        "throughput_predictor_mae_pct": model.maes(),
    }
    if offer is not None:
        evidence.update(
            predicted_target_util_p95=round(best["predicted_util_p95"], 1),
            target_usable_memory_gib=round(best["usable_gib"], 2),
            target_price_source=offer["origin"],
        )
    risk = (
        f"Accuracy and speed at {best['step'].upper()} must be validated on this model before switching "
        f"(an evaluation set and a load test); the memory estimate assumes weights, activations and caches "
        f"shrink {1 / best['factor']:.0f}×."
    )
    if BITS[best["step"]] == 8:
        risk += " INT8/FP8 needs calibration and can be slower than FP16 on GPUs without fast INT8 kernels."
    base = (0.6 if source == "tag" else 0.4) * (0.85 if model.measured else 0.7)
    confidence = features.confidence(row, s, base)
    return features.finding(
        "quantization", row, current, proposed, best["savings"], confidence=confidence, risk=risk, evidence=evidence
    )
