"""gpu_type: move a workload to a cheaper GPU that fits.

A target must pass every rule, none of which is ever relaxed:

* it is offered in the resource's own provider and region (the catalogue: ``instance_types``, else
  the instance types the bills show there), with the same GPU count and a known price and spec;
* the workload's peak memory × ``memory_headroom`` fits the target GPU's usable memory;
* the utilisation the workload would need there, predicted by :class:`ThroughputModel`, stays under
  ``max_target_util_pct``;
* it cuts the resource's cost by at least ``min_savings_fraction``.

The utilisation a workload would need on a target is predicted by ``models.throughput`` (the
fleet-fitted regression or a spec-sheet baseline, whichever errs least on held-out GPU pairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import partial

import duckdb
import polars as pl

from gpufinops.kernel import providers
from gpufinops.models import features, peers
from gpufinops.models.features import RightsizingSettings
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, from_warehouse, money
from gpufinops.models.throughput import (
    DECISION_KEYS,
    MAE_KEYS,
    NO_CHANGE,
    PREDICTORS,
    REGRESSION,
    SATURATED_PCT,
    SPEC_RATIO,
    ThroughputModel,
    baseline,
    fit,
    fit_fleet,
    log_ratio,
    observations,
    select_predictor,
)

# the throughput model's names, read through gpu_type by its users (evaluate, quantization, tests)
__all__ = [
    "DECISION_KEYS",
    "MAE_KEYS",
    "NO_CHANGE",
    "PREDICTORS",
    "REGRESSION",
    "SATURATED_PCT",
    "SPEC_RATIO",
    "USABLE_MEMORY",
    "Catalogue",
    "GpuTypeInputs",
    "Need",
    "ThroughputModel",
    "analyse",
    "baseline",
    "best_target",
    "candidates",
    "findings",
    "fit",
    "fit_fleet",
    "load",
    "log_ratio",
    "nothing_fits",
    "observations",
    "recommend",
    "select_predictor",
    "unknown_count",
]

USABLE_MEMORY = 0.93  # share of a GPU's memory a process gets (driver, ECC, context)


def analyse(
    con: duckdb.DuckDBPyConnection, settings: RightsizingSettings | dict | None = None, *, recommend_fn=None
) -> tuple[list[Recommendation], list[Withheld]]:
    """Load the fleet, fit the throughput model on it and recommend: (recommendations, withheld)
    (``recommend_fn``: quantization's rules over the same inputs; default gpu_type's)."""
    find = partial(findings, recommend_fn=recommend_fn)
    return from_warehouse(con, settings, RightsizingSettings, load, find)


@dataclass(frozen=True)
class GpuTypeInputs:
    """What gpu_type and quantization read: the resources over the lookback, the catalogue of offers
    and the GPU specs (empty when the warehouse holds no GPU usage)."""

    resources: pl.DataFrame
    offers: pl.DataFrame
    specs: dict[str, dict]


def load(con: duckdb.DuckDBPyConnection, settings: RightsizingSettings) -> GpuTypeInputs:
    res = features.resources(con, settings)
    if res.is_empty():
        return GpuTypeInputs(res, pl.DataFrame(), {})
    return GpuTypeInputs(res, features.catalogue(con), features.specs(con))


def findings(inputs: GpuTypeInputs, settings: RightsizingSettings, *, recommend_fn=None) -> Findings:
    """The recommend step: fit the throughput model on the fleet's own pairs, then apply gpu_type's rules
    (``recommend_fn``: quantization's); no connection."""
    if inputs.resources.is_empty():
        return Findings()
    model = fit_fleet(inputs.resources, inputs.specs, settings)
    recs, withheld = (recommend_fn or recommend)(inputs.resources, inputs.offers, inputs.specs, model, settings)
    return Findings(recs, withheld)


def candidates(res: pl.DataFrame, s: RightsizingSettings) -> pl.DataFrame:
    """Cloud resources still running (billed in the fleet's last days), measured, not idle and not committed
    (a commitment is paid anyway)."""
    active = pl.col("active") if "active" in res.columns else pl.lit(True)
    return res.filter(
        active
        & pl.col("provider_code").is_in(list(providers.cloud_codes()))
        & (pl.col("pricing_category").fill_null("Standard") != "Committed")
        & pl.col("util_p95").is_not_null()
        & (pl.col("util_p95") >= s.idle_util_pct)
    )


def recommend(
    res: pl.DataFrame,
    offers: pl.DataFrame,
    spec: dict[str, dict],
    model: ThroughputModel,
    s: RightsizingSettings = RightsizingSettings(),
) -> tuple[list[Recommendation], list[Withheld]]:
    recs: list[Recommendation] = []
    withheld: list[Withheld] = []
    for row in candidates(res, s).sort("resource_id").iter_rows(named=True):
        if row["gpu_count"] is None:
            withheld.append(unknown_count("gpu_type", row))
            continue
        refused: list[str] = []
        need = Need((row["mem_used_max_mib"] or 0) / 1024, features.sizing_util(row), row["precision"])
        choice = best_target(row, Catalogue(offers, spec), model, s, need, refused)
        if choice is None:
            if row["util_p95"] < s.underused_util_pct:
                withheld.append(nothing_fits("gpu_type", row, refused, s))
            continue
        held = held_back("gpu_type", row, choice, s)
        if held is not None:
            withheld.append(held)
            continue
        rec = _recommendation(row, choice, model, s)
        if rec is not None:
            recs.append(rec)
    return sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld


def nothing_fits(kind: str, row: dict, refused: list[str], s: RightsizingSettings, lead: str | None = None) -> Withheld:
    """An under-used resource (p95 under ``underused_util_pct``) that no cheaper type fits: what was
    considered and why each was refused."""
    lead = lead or f"p95 {row['util_p95']:.0f} % (< {s.underused_util_pct:g} %)"
    return Withheld.of(kind, row, "no_fitting_target", f"{lead}, but no cheaper type fits: " + "; ".join(refused[:6]))


def held_back(kind: str, row: dict, choice: dict, s: RightsizingSettings) -> Withheld | None:
    """Why a resource with a cheaper target is withheld anyway: its configuration unpriced, its evidence
    too thin, or its workload ramping up; None: recommend it."""
    if "unpriced" in choice:
        return Withheld.from_detail(kind, row, choice["unpriced"])
    problem = features.evidence_problem(row, s)
    if problem:
        return features.thin(kind, row, problem, s)
    ramp = features.ramping(row)
    return Withheld.of(kind, row, "ramping", ramp) if ramp else None


def unknown_count(kind: str, row: dict) -> Withheld:
    return Withheld.of(
        kind,
        row,
        "unknown_gpu_count",
        f"no GPU count for {row['instance_type'] or 'its instance type'} on the bill, in the catalogue "
        f"or the inventory: a target must hold as many GPUs",
    )


@dataclass(frozen=True)
class Catalogue:
    """What a target is chosen from: the offers (instance types with a price) and the GPU specs."""

    offers: pl.DataFrame
    specs: dict[str, dict]


@dataclass(frozen=True)
class Need:
    """What a target must carry: the workload's peak memory (GiB) and sizing utilisation at its
    ``precision``; a quantized step names its ``new_precision`` and scales the utilisation by
    ``util_factor`` (its bytes ratio)."""

    mem_gib: float
    util: float
    precision: str | None
    new_precision: str | None = None
    util_factor: float = 1.0


def best_target(
    row: dict,
    catalogue: Catalogue,
    model: ThroughputModel,
    s: RightsizingSettings,
    need: Need,
    refused: list[str] | None = None,
) -> dict | None:
    """The cheapest offer in the region that fits; {"unpriced": reason} when the current config has no
    price or spec to compare with; None when nothing fits (each offer's refusal appended to ``refused``).

    The utilisation needed on a target is read from peer replicas (:mod:`models.peers`) where the
    workload class runs on that GPU at the same precision, else predicted by ``model``."""
    refused = [] if refused is None else refused
    offers, spec = catalogue.offers, catalogue.specs
    mem_gib, util, precision = need.mem_gib, need.util, need.precision
    new_precision, util_factor = need.new_precision, need.util_factor
    current_price = features.list_price(offers, row["provider_code"], row["region"], row["instance_type"])
    if current_price is None or row["gpu_model"] not in spec:
        what = "price" if current_price is None else "gpu_specs entry"
        return {
            "unpriced": f"unpriced: no catalogue {what} for {row['instance_type']} ({row['gpu_model']}) "
            f"in {row['region']}"
        }
    pool = offers.filter(
        (pl.col("provider") == row["provider_code"])
        & (pl.col("region") == row["region"])
        & (pl.col("gpu_count") == row["gpu_count"])
        & pl.col("memory_gib").is_not_null()
        & (pl.col("on_demand_usd_per_hour") <= float(current_price) * (1 - s.min_savings_fraction))
    )
    for offer in pool.sort("on_demand_usd_per_hour", "instance_type").iter_rows(named=True):
        usable_gib = float(offer["memory_gib"]) * USABLE_MEMORY
        label = f"{offer['instance_type']} ({offer['gpu_model']})"
        if mem_gib * s.memory_headroom > usable_gib:
            refused.append(
                f"{label}: memory {mem_gib:.1f} GiB × {s.memory_headroom:g} headroom > {usable_gib:.1f} GiB usable"
            )
            continue
        ratios = log_ratio(spec[row["gpu_model"]], spec.get(offer["gpu_model"]), new_precision or precision)
        if ratios is None:
            refused.append(f"{label}: no gpu_specs entry to compare with")
            continue
        peer = None if new_precision else peers.predict(model.peers, row, offer["gpu_model"], util, SATURATED_PCT)
        if peer is not None:
            predicted, how, peer_evidence = peer[0], peers.PEER_PREDICTOR, peer[1]
        else:
            predicted = model.predict(
                util * util_factor, ratios, row.get("sm_active_mean"), row.get("tensor_active_mean")
            )
            how, peer_evidence = model.name, {}
            slower = None if new_precision else peers.other_classes(model.peers, row, offer["gpu_model"], util)
            if slower is not None and slower[0] > predicted:
                predicted, how, peer_evidence = slower[0], peers.OTHER_CLASSES, slower[1]
        if predicted > s.max_target_util_pct:
            refused.append(
                f"{label}: predicted p95 {predicted:.0f} % > {s.max_target_util_pct:g} % cap ({how.replace('_', ' ')})"
            )
            continue
        return {
            "offer": offer,
            "current_price": current_price,
            "predicted_util_p95": predicted,
            "usable_gib": usable_gib,
            "baseline_util_p95": baseline(util * util_factor, ratios),
            "predicted_by": how,
            "peer_evidence": peer_evidence,
        }
    if pool.is_empty():
        refused.append(
            f"no {row['gpu_count']}-GPU type in {row['region']} cuts the cost by ≥ {s.min_savings_fraction:.0%}"
        )
    return None


def _recommendation(row: dict, choice: dict, model: ThroughputModel, s: RightsizingSettings) -> Recommendation | None:
    offer, price = choice["offer"], choice["current_price"]
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    ratio = Decimal(str(offer["on_demand_usd_per_hour"])) / price
    savings = money(monthly_cost * (1 - ratio))
    if savings < Decimal(str(s.min_monthly_savings_usd)):
        return None
    current = features.current_config(row, monthly_cost)
    proposed = {
        **current,
        "instance_type": offer["instance_type"],
        "gpu_model": offer["gpu_model"],
        "monthly_cost_usd": money(monthly_cost * ratio),
        "action": f"move to {offer['instance_type']} ({offer['gpu_count']}× {offer['gpu_model']})",
    }
    base = 0.85 if model.measured else 0.6
    headroom = 1 - choice["predicted_util_p95"] / s.max_target_util_pct
    evidence = {
        "util_p95": row["util_p95"],
        "util_mean": row["util_mean"],
        "util_peak_daily": row.get("util_peak_daily"),
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "mem_needed_gib": round((row["mem_used_max_mib"] or 0) / 1024 * s.memory_headroom, 2),
        "target_usable_memory_gib": round(choice["usable_gib"], 2),
        "predicted_target_util_p95": round(choice["predicted_util_p95"], 1),
        "baseline_target_util_p95": round(choice["baseline_util_p95"], 1),
        "throughput_model": choice.get("predicted_by", model.name),
        "throughput_model_quality": model.quality,
        **choice.get("peer_evidence", {}),
        "throughput_predictor_mae_pct": model.maes(),
        "current_usd_per_hour": float(price),
        "target_usd_per_hour": float(offer["on_demand_usd_per_hour"]),
        "target_price_source": offer["origin"],
        "window_days": round(row["window_days"], 2),
        "measured_hours": row["measured_hours"],
        "metric_coverage": round(row["coverage"], 4),
        "sm_active_mean": row["sm_active_mean"],
        "tensor_active_mean": row["tensor_active_mean"],
    }
    risk = (
        f"Predicted from {evidence['throughput_model'].replace('_', ' ')}: benchmark the workload on {offer['gpu_model']} "
        f"(latency at peak, batch size) before moving; peak memory {evidence['mem_max_gib']} GiB leaves "
        f"{evidence['target_usable_memory_gib'] - evidence['mem_needed_gib']:.1f} GiB beyond the headroom."
    )
    confidence = features.confidence(row, s, base * (0.8 + 0.2 * max(0.0, headroom)))
    return features.finding(
        "gpu_type", row, current, proposed, savings, confidence=confidence, risk=risk, evidence=evidence
    )
