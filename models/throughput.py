"""The throughput model: the utilisation a workload would need on another GPU (gpu_type, quantization,
gpu_count's moves to another model).

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
from typing import Any

import numpy as np
import polars as pl

from gpufinops.models import features, peers
from gpufinops.models.features import RightsizingSettings

MIN_PAIRS, MIN_GROUPS = 12, 3
# A quantile at or above this on either GPU is saturated: nvidia-smi's utilisation is the share of time a
# kernel runs, so a flat-out job reads ~95 % on any GPU and says nothing about the throughput ratio.
SATURATED_PCT = 90.0


def log_ratio(src: dict | None, tgt: dict | None, precision: str | None) -> tuple[float, float] | None:
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


DECISION_KEYS = {
    REGRESSION: "regression_wrong_verdicts",
    SPEC_RATIO: "spec_ratio_wrong_verdicts",
    NO_CHANGE: "no_change_wrong_verdicts",
}


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
    predictor: str = SPEC_RATIO  # which of PREDICTORS :meth:`predict` uses (chosen by :func:`fit`)
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

    def predict(
        self, util: float, ratios: tuple[float, float], sm: float | None = None, tensor: float | None = None
    ) -> float:
        if self.predictor == NO_CHANGE:
            return util
        if self.predictor == REGRESSION and self.fitted is not None:
            return self.regression(util, ratios, sm, tensor)
        return baseline(util, ratios)

    def regression(
        self, util: float, ratios: tuple[float, float], sm: float | None = None, tensor: float | None = None
    ) -> float:
        """The fitted regression's prediction, whichever predictor is selected (for evaluation)."""
        return max(0.0, math.expm1(float(self.fitted.predict(np.array([_x(util, ratios, sm, tensor)]))[0])))


def observations(res: pl.DataFrame, specs: dict[str, dict], idle_util_pct: float) -> pl.DataFrame:
    """Quantile pairs of the same workload class on two GPU models (rows: x, y, ratios, group); pairs with a
    saturated side (≥ ``SATURATED_PCT``) are left out."""
    usable = res.filter(
        pl.col("util_p95").is_not_null()
        & (pl.col("util_p95") >= idle_util_pct)
        & pl.col("workload").is_not_null()
        & pl.col("gpu_model").is_not_null()
    )
    if usable.is_empty():
        return pl.DataFrame()
    pooled = (
        usable.with_columns(pl.col("precision").fill_null("any"))
        .group_by("workload", "precision", "gpu_model")
        .agg(
            pl.col("util_quantiles").list.to_array(6).alias("q"),
            pl.col("sm_active_mean").mean().alias("sm"),
            pl.col("tensor_active_mean").mean().alias("tensor"),
        )
    )
    rows = []
    for (workload, precision), grp in pooled.group_by("workload", "precision", maintain_order=True):
        items = [
            (r["gpu_model"], np.mean(np.array(r["q"], dtype=float), axis=0), r["sm"], r["tensor"])
            for r in grp.sort("gpu_model").iter_rows(named=True)
        ]
        for src_model, q_src, sm, tensor in items:
            for tgt_model, q_tgt, _, _ in items:
                ratios = log_ratio(specs.get(src_model), specs.get(tgt_model), precision)
                if src_model == tgt_model or ratios is None:
                    continue
                group = "|".join(sorted((src_model, tgt_model)))
                for x, y in zip(q_src.tolist(), q_tgt.tolist()):
                    if x >= SATURATED_PCT or y >= SATURATED_PCT:
                        continue
                    rows.append(
                        {
                            "x": x,
                            "y": y,
                            "lf": ratios[0],
                            "lb": ratios[1],
                            "sm": sm,
                            "tensor": tensor,
                            "group": group,
                            "workload": workload,
                        }
                    )
    return pl.DataFrame(rows)


def fit(obs: pl.DataFrame, ceiling_pct: float = 60.0) -> ThroughputModel:
    """Fit the regression, score it and both baselines on held-out GPU pairs, and select the predictor
    whose verdicts (fits under ``ceiling_pct`` or not) are wrong least often, then the lowest error (the
    regression only when it beats both baselines)."""
    from sklearn.linear_model import HuberRegressor
    from sklearn.model_selection import GroupKFold

    if obs.is_empty() or obs.height < MIN_PAIRS or obs["group"].n_unique() < MIN_GROUPS:
        return ThroughputModel(
            pairs=obs.height,
            groups=0 if obs.is_empty() else obs["group"].n_unique(),
            quality={
                "predictor": SPEC_RATIO,
                **dict.fromkeys(MAE_KEYS.values()),
                "reason": f"too few cross-GPU observations to measure the predictors "
                f"(need {MIN_PAIRS} quantile pairs over {MIN_GROUPS} GPU pairs)",
            },
        )
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
    maes = {
        REGRESSION: float(np.abs(held_out - y).mean()),
        SPEC_RATIO: float(np.abs(base - y).mean()),
        NO_CHANGE: float(np.abs(x_util - y).mean()),
    }
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
        "pairs": int(obs.height),
        "gpu_pairs": int(len(set(groups.tolist()))),
        "folds": folds,
        **{MAE_KEYS[p]: round(v, 2) for p, v in maes.items()},
        "coefficients": [round(float(c), 4) for c in final.coef_],
    }
    return ThroughputModel(final, int(obs.height), int(len(set(groups.tolist()))), quality, predictor)


def fit_fleet(res: pl.DataFrame, spec: dict[str, dict], s: RightsizingSettings) -> ThroughputModel:
    """The throughput model of a fleet: the predictor fitted on its pairs, and its peer replicas."""
    model = fit(observations(res, spec, s.idle_util_pct), s.max_target_util_pct)
    model.peers = peers.table(res, s.idle_util_pct)
    return model
