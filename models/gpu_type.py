"""gpu_type: move a workload to a cheaper GPU that fits.

A target must pass every rule, none of which is ever relaxed:

* it is offered in the resource's own provider and region (the catalogue: ``instance_types``, else
  the instance types the bills show there), with the same GPU count and a known price and spec;
* the workload's peak memory × ``memory_headroom`` fits the target GPU's usable memory;
* the utilisation the workload would need there, predicted by :class:`ThroughputModel`, stays under
  ``max_target_util_pct``;
* it cuts the resource's cost by at least ``min_savings_fraction``.

ThroughputModel predicts the utilisation a workload would need on another GPU with one of three
predictors, whichever has the lowest error on GPU pairs held out of the fit:

* ``fleet_regression``: a regression fitted on the fleet's own observations: the same workload class
  (workload and precision tags) measured on different GPU models gives pairs "utilisation quantile on
  GPU A → the same quantile on GPU B", with the two GPUs' peak-throughput and memory-bandwidth ratios
  (and SM/tensor activity where DCGM exports them) as features; pairs with a side at or above
  ``SATURATED_PCT`` are left out (a flat-out job is ~95 % busy on any GPU);
* ``spec_ratio_baseline``: utilisation × √(FLOPS ratio × bandwidth ratio) from the spec sheets;
* ``no_change_baseline``: the same utilisation on the other GPU.

The regression is used only where it beats both baselines on the held-out pairs (GroupKFold by GPU
pair); otherwise the better baseline is. With too few observations nothing can be measured: the
spec-ratio baseline is used and confidence drops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import polars as pl

from gpufinops.models import features, peers
from gpufinops.models.features import RightsizingSettings
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, stable_id

USABLE_MEMORY = 0.93          # share of a GPU's memory a process gets (driver, ECC, context)
MIN_PAIRS, MIN_GROUPS = 12, 3
# A quantile at or above this on either GPU is saturated: nvidia-smi's utilisation is the share of time a
# kernel runs, so a flat-out job reads ~95 % on any GPU and says nothing about the throughput ratio.
SATURATED_PCT = 90.0


def _log_ratio(src: dict | None, tgt: dict | None, precision: str | None) -> tuple[float, float] | None:
    f_src, f_tgt = features.peak_throughput(src, precision), features.peak_throughput(tgt, precision)
    b_src, b_tgt = (src or {}).get("memory_bandwidth_gbps"), (tgt or {}).get("memory_bandwidth_gbps")
    if not (f_src and f_tgt and b_src and b_tgt):
        return None
    return math.log(f_src / f_tgt), math.log(float(b_src) / float(b_tgt))


def _x(util: float, ratios: tuple[float, float], sm: float | None, tensor: float | None) -> list[float]:
    sm, tensor = (sm or 0.0), (tensor or 0.0)
    return [math.log1p(util), ratios[0], ratios[1], tensor * ratios[0], sm * ratios[1]]


def baseline(util: float, ratios: tuple[float, float]) -> float:
    """Spec-ratio scaling: the slower GPU needs proportionally more time (geometric mean of the ratios)."""
    return util * math.exp((ratios[0] + ratios[1]) / 2)


REGRESSION, SPEC_RATIO, NO_CHANGE = "fleet_regression", "spec_ratio_baseline", "no_change_baseline"
PREDICTORS = (REGRESSION, SPEC_RATIO, NO_CHANGE)
MAE_KEYS = {REGRESSION: "regression_mae_pct", SPEC_RATIO: "spec_ratio_mae_pct", NO_CHANGE: "no_change_mae_pct"}


DECISION_KEYS = {REGRESSION: "regression_wrong_verdicts", SPEC_RATIO: "spec_ratio_wrong_verdicts",
                 NO_CHANGE: "no_change_wrong_verdicts"}


def select_predictor(maes: dict[str, float], wrong: dict[str, float] | None = None) -> str:
    """The predictor to use from held-out errors. First the findings it would yield: the share of held-out
    pairs whose verdict "fits under the utilisation ceiling" it gets wrong (``wrong``); then, between
    equals, the MAE. The regression only when it beats both baselines, else the better baseline (spec
    ratio on a tie)."""
    def key(p: str) -> tuple[float, float]:
        return ((wrong or {}).get(p) or 0.0, maes[p])

    best_baseline = SPEC_RATIO if key(SPEC_RATIO) <= key(NO_CHANGE) else NO_CHANGE
    return REGRESSION if key(REGRESSION) < key(best_baseline) else best_baseline


@dataclass
class ThroughputModel:
    fitted: Any = None
    pairs: int = 0
    groups: int = 0
    quality: dict[str, Any] = field(default_factory=dict)
    predictor: str = SPEC_RATIO     # which of PREDICTORS :meth:`predict` uses (chosen by :func:`fit`)
    peers: dict = field(default_factory=dict)  # models.peers.table: read before the predictor

    @property
    def name(self) -> str:
        return self.predictor

    @property
    def measured(self) -> bool:
        """Whether the choice rests on held-out errors (enough cross-GPU observations)."""
        return self.quality.get(MAE_KEYS[REGRESSION]) is not None

    def maes(self) -> dict[str, float | None]:
        """predictor -> its held-out MAE in utilisation points (None when unmeasured)."""
        return {p: self.quality.get(key) for p, key in MAE_KEYS.items()}

    def predict(self, util: float, ratios: tuple[float, float], sm: float | None = None,
                tensor: float | None = None) -> float:
        if self.predictor == NO_CHANGE:
            return util
        if self.predictor == REGRESSION and self.fitted is not None:
            return self.regression(util, ratios, sm, tensor)
        return baseline(util, ratios)

    def regression(self, util: float, ratios: tuple[float, float], sm: float | None = None,
                   tensor: float | None = None) -> float:
        """The fitted regression's prediction, whichever predictor is selected (for evaluation)."""
        return max(0.0, math.expm1(float(self.fitted.predict(np.array([_x(util, ratios, sm, tensor)]))[0])))


def observations(res: pl.DataFrame, specs: dict[str, dict], idle_util_pct: float) -> pl.DataFrame:
    """Quantile pairs of the same workload class on two GPU models (rows: x, y, ratios, group); pairs with a
    saturated side (≥ ``SATURATED_PCT``) are left out."""
    usable = res.filter(pl.col("util_p95").is_not_null() & (pl.col("util_p95") >= idle_util_pct)
                        & pl.col("workload").is_not_null() & pl.col("gpu_model").is_not_null())
    if usable.is_empty():
        return pl.DataFrame()
    pooled = usable.with_columns(pl.col("precision").fill_null("any")).group_by(
        "workload", "precision", "gpu_model").agg(
        pl.col("util_quantiles").list.to_array(6).alias("q"), pl.col("sm_active_mean").mean().alias("sm"),
        pl.col("tensor_active_mean").mean().alias("tensor"))
    rows = []
    for (workload, precision), grp in pooled.group_by("workload", "precision", maintain_order=True):
        items = [(r["gpu_model"], np.mean(np.array(r["q"], dtype=float), axis=0), r["sm"], r["tensor"])
                 for r in grp.sort("gpu_model").iter_rows(named=True)]
        for src_model, q_src, sm, tensor in items:
            for tgt_model, q_tgt, _, _ in items:
                ratios = _log_ratio(specs.get(src_model), specs.get(tgt_model), precision)
                if src_model == tgt_model or ratios is None:
                    continue
                group = "|".join(sorted((src_model, tgt_model)))
                for x, y in zip(q_src.tolist(), q_tgt.tolist()):
                    if x >= SATURATED_PCT or y >= SATURATED_PCT:
                        continue
                    rows.append({"x": x, "y": y, "lf": ratios[0], "lb": ratios[1], "sm": sm, "tensor": tensor,
                                 "group": group, "workload": workload})
    return pl.DataFrame(rows)


def fit(obs: pl.DataFrame, ceiling_pct: float = 60.0) -> ThroughputModel:
    """Fit the regression, score it and both baselines on held-out GPU pairs, and select the predictor
    whose verdicts (fits under ``ceiling_pct`` or not) are wrong least often, then the lowest error (the
    regression only when it beats both baselines)."""
    from sklearn.linear_model import HuberRegressor
    from sklearn.model_selection import GroupKFold

    if obs.is_empty() or obs.height < MIN_PAIRS or obs["group"].n_unique() < MIN_GROUPS:
        return ThroughputModel(pairs=obs.height, groups=0 if obs.is_empty() else obs["group"].n_unique(),
                               quality={"predictor": SPEC_RATIO, **dict.fromkeys(MAE_KEYS.values()),
                                        "reason": f"too few cross-GPU observations to measure the predictors "
                                                  f"(need {MIN_PAIRS} quantile pairs over {MIN_GROUPS} GPU pairs)"})
    rows = list(obs.iter_rows(named=True))
    X = np.array([_x(r["x"], (r["lf"], r["lb"]), r["sm"], r["tensor"]) for r in rows])
    y, x_util = obs["y"].to_numpy(), obs["x"].to_numpy()
    base = np.array([baseline(r["x"], (r["lf"], r["lb"])) for r in rows])
    groups = obs["group"].to_numpy()
    folds = min(5, len(set(groups.tolist())))
    held_out = np.zeros_like(y)
    for train, test in GroupKFold(n_splits=folds).split(X, y, groups):
        model = HuberRegressor(max_iter=500).fit(X[train], np.log1p(y[train]))
        held_out[test] = np.expm1(model.predict(X[test])).clip(0)
    final = HuberRegressor(max_iter=500).fit(X, np.log1p(y))
    maes = {REGRESSION: float(np.abs(held_out - y).mean()), SPEC_RATIO: float(np.abs(base - y).mean()),
            NO_CHANGE: float(np.abs(x_util - y).mean())}
    held = {REGRESSION: held_out, SPEC_RATIO: base, NO_CHANGE: x_util}
    # a verdict is asked only of a resource under the ceiling, moving to a GPU it would need more of
    asked = (x_util < ceiling_pct) & (y > x_util)
    asked = asked if asked.any() else np.ones_like(asked)
    wrong = {p: float(((v[asked] <= ceiling_pct) != (y[asked] <= ceiling_pct)).mean()) for p, v in held.items()}
    predictor = select_predictor(maes, wrong)
    quality = {
        "predictor": predictor,
        "selection": f"fewest wrong verdicts (fits under {ceiling_pct:g} % or not) on held-out GPU pairs, then the "
                     f"lowest held-out MAE; the regression only where it beats both baselines",
        **{DECISION_KEYS[p]: round(v, 4) for p, v in wrong.items()},
        "pairs": int(obs.height), "gpu_pairs": int(len(set(groups.tolist()))), "folds": folds,
        **{MAE_KEYS[p]: round(v, 2) for p, v in maes.items()},
        "coefficients": [round(float(c), 4) for c in final.coef_],
    }
    return ThroughputModel(final, int(obs.height), int(len(set(groups.tolist()))), quality, predictor)


def fit_fleet(res: pl.DataFrame, spec: dict[str, dict], s: RightsizingSettings) -> ThroughputModel:
    """The throughput model of a fleet: the predictor fitted on its pairs, and its peer replicas."""
    model = fit(observations(res, spec, s.idle_util_pct), s.max_target_util_pct)
    model.peers = peers.table(res, s.idle_util_pct)
    return model


def recommend_from_warehouse(con: duckdb.DuckDBPyConnection,
                             settings: RightsizingSettings | dict | None = None, *,
                             recommend_fn=None) -> list[Recommendation]:
    """Load the fleet, fit the throughput model on it and recommend (``recommend_fn``: quantization's
    rules over the same inputs; default gpu_type's)."""
    return analyse(con, settings, recommend_fn=recommend_fn)[0]


def analyse(con: duckdb.DuckDBPyConnection, settings: RightsizingSettings | dict | None = None, *,
            recommend_fn=None) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld) over the warehouse (see :func:`recommend_from_warehouse`)."""
    s = features.settings_of(settings)
    found = findings(load(con, s), s, recommend_fn=recommend_fn)
    return found.recommendations, found.withheld


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
    return res.filter(active & pl.col("provider_code").is_in(list(features.CLOUD_PROVIDERS))
                      & (pl.col("pricing_category").fill_null("Standard") != "Committed")
                      & pl.col("util_p95").is_not_null() & (pl.col("util_p95") >= s.idle_util_pct))


def recommend(res: pl.DataFrame, offers: pl.DataFrame, spec: dict[str, dict], model: ThroughputModel,
              s: RightsizingSettings = RightsizingSettings()) -> tuple[list[Recommendation], list[Withheld]]:
    recs: list[Recommendation] = []
    withheld: list[Withheld] = []
    for row in candidates(res, s).sort("resource_id").iter_rows(named=True):
        if row["gpu_count"] is None:
            withheld.append(unknown_count("gpu_type", row))
            continue
        refused: list[str] = []
        choice = best_target(row, offers, spec, model, s, mem_gib=(row["mem_used_max_mib"] or 0) / 1024,
                             util=features.sizing_util(row), precision=row["precision"], refused=refused)
        if choice is None:
            if row["util_p95"] < s.underused_util_pct:
                withheld.append(nothing_fits("gpu_type", row, refused, s))
            continue
        if choice.get("unpriced"):
            withheld.append(Withheld.from_detail("gpu_type", row, choice["unpriced"]))
            continue
        problem = features.evidence_problem(row, s)
        if problem:
            withheld.append(features.thin("gpu_type", row, problem, s))
            continue
        ramp = features.ramping(row)
        if ramp:
            withheld.append(Withheld.of("gpu_type", row, "ramping", ramp))
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


def unknown_count(kind: str, row: dict) -> Withheld:
    return Withheld.of(kind, row, "unknown_gpu_count",
                       f"no GPU count for {row['instance_type'] or 'its instance type'} on the bill, in the catalogue "
                       f"or the inventory: a target must hold as many GPUs")


def best_target(row: dict, offers: pl.DataFrame, spec: dict[str, dict], model: ThroughputModel,
                s: RightsizingSettings, *, mem_gib: float, util: float, precision: str | None,
                new_precision: str | None = None, util_factor: float = 1.0,
                refused: list[str] | None = None) -> dict | None:
    """The cheapest offer in the region that fits; {"unpriced": reason} when the current config has no
    price or spec to compare with; None when nothing fits (each offer's refusal appended to ``refused``).

    The utilisation needed on a target is read from peer replicas (:mod:`models.peers`) where the
    workload class runs on that GPU at the same precision, else predicted by ``model``."""
    refused = [] if refused is None else refused
    current_price = features.list_price(offers, row["provider_code"], row["region"], row["instance_type"])
    if current_price is None or row["gpu_model"] not in spec:
        what = "price" if current_price is None else "gpu_specs entry"
        return {"unpriced": f"unpriced: no catalogue {what} for {row['instance_type']} ({row['gpu_model']}) "
                            f"in {row['region']}"}
    pool = offers.filter((pl.col("provider") == row["provider_code"]) & (pl.col("region") == row["region"])
                         & (pl.col("gpu_count") == row["gpu_count"]) & pl.col("memory_gib").is_not_null()
                         & (pl.col("on_demand_usd_per_hour") <= float(current_price) * (1 - s.min_savings_fraction)))
    for offer in pool.sort("on_demand_usd_per_hour", "instance_type").iter_rows(named=True):
        usable_gib = float(offer["memory_gib"]) * USABLE_MEMORY
        label = f"{offer['instance_type']} ({offer['gpu_model']})"
        if mem_gib * s.memory_headroom > usable_gib:
            refused.append(f"{label}: memory {mem_gib:.1f} GiB × {s.memory_headroom:g} headroom > "
                           f"{usable_gib:.1f} GiB usable")
            continue
        ratios = _log_ratio(spec[row["gpu_model"]], spec.get(offer["gpu_model"]), new_precision or precision)
        if ratios is None:
            refused.append(f"{label}: no gpu_specs entry to compare with")
            continue
        peer = None if new_precision else peers.predict(model.peers, row, offer["gpu_model"], util, SATURATED_PCT)
        if peer is not None:
            predicted, how, peer_evidence = peer[0], peers.PEER_PREDICTOR, peer[1]
        else:
            predicted = model.predict(util * util_factor, ratios, row.get("sm_active_mean"),
                                      row.get("tensor_active_mean"))
            how, peer_evidence = model.name, {}
            slower = None if new_precision else peers.other_classes(model.peers, row, offer["gpu_model"], util)
            if slower is not None and slower[0] > predicted:
                predicted, how, peer_evidence = slower[0], peers.OTHER_CLASSES, slower[1]
        if predicted > s.max_target_util_pct:
            refused.append(f"{label}: predicted p95 {predicted:.0f} % > {s.max_target_util_pct:g} % cap "
                           f"({how.replace('_', ' ')})")
            continue
        return {"offer": offer, "current_price": current_price, "predicted_util_p95": predicted,
                "usable_gib": usable_gib, "baseline_util_p95": baseline(util * util_factor, ratios),
                "predicted_by": how, "peer_evidence": peer_evidence}
    if pool.is_empty():
        refused.append(f"no {row['gpu_count']}-GPU type in {row['region']} cuts the cost by "
                       f"≥ {s.min_savings_fraction:.0%}")
    return None


def _recommendation(row: dict, choice: dict, model: ThroughputModel, s: RightsizingSettings) -> Recommendation | None:
    offer, price = choice["offer"], choice["current_price"]
    monthly_cost = features.monthly(row["cost_usd"], row["window_days"])
    ratio = Decimal(str(offer["on_demand_usd_per_hour"])) / price
    savings = money(monthly_cost * (1 - ratio))
    if savings < Decimal(str(s.min_monthly_savings_usd)):
        return None
    current = features.current_config(row, monthly_cost)
    proposed = {**current, "instance_type": offer["instance_type"], "gpu_model": offer["gpu_model"],
                "monthly_cost_usd": money(monthly_cost * ratio),
                "action": f"move to {offer['instance_type']} ({offer['gpu_count']}× {offer['gpu_model']})"}
    base = 0.85 if model.measured else 0.6
    headroom = 1 - choice["predicted_util_p95"] / s.max_target_util_pct
    evidence = {
        "util_p95": row["util_p95"], "util_mean": row["util_mean"], "util_peak_daily": row.get("util_peak_daily"),
        "mem_max_gib": round((row["mem_used_max_mib"] or 0) / 1024, 2),
        "mem_needed_gib": round((row["mem_used_max_mib"] or 0) / 1024 * s.memory_headroom, 2),
        "target_usable_memory_gib": round(choice["usable_gib"], 2),
        "predicted_target_util_p95": round(choice["predicted_util_p95"], 1),
        "baseline_target_util_p95": round(choice["baseline_util_p95"], 1),
        "throughput_model": choice.get("predicted_by", model.name), "throughput_model_quality": model.quality,
        **choice.get("peer_evidence", {}),
        "throughput_predictor_mae_pct": model.maes(),
        "current_usd_per_hour": float(price), "target_usd_per_hour": float(offer["on_demand_usd_per_hour"]),
        "target_price_source": offer["origin"], "window_days": round(row["window_days"], 2),
        "measured_hours": row["measured_hours"], "metric_coverage": round(row["coverage"], 4),
        "sm_active_mean": row["sm_active_mean"], "tensor_active_mean": row["tensor_active_mean"],
    }
    risk = (f"Predicted from {evidence['throughput_model'].replace('_', ' ')}: benchmark the workload on {offer['gpu_model']} "
            f"(latency at peak, batch size) before moving; peak memory {evidence['mem_max_gib']} GiB leaves "
            f"{evidence['target_usable_memory_gib'] - evidence['mem_needed_gib']:.1f} GiB beyond the headroom.")
    return Recommendation(
        id=stable_id("gpu_type", row["provider"], row["resource_id"]), kind="gpu_type", team=row["team"],
        provider=row["provider_code"], resource_id=row["resource_id"], workload=row["workload"],
        current=current, proposed=proposed, monthly_savings_usd=savings,
        confidence=features.confidence(row, s, base * (0.8 + 0.2 * max(0.0, headroom))), risk=risk,
        evidence=evidence)
