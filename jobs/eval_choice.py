"""Which throughput predictor each rightsizing kind uses, chosen by the findings it yields.

A throughput predictor's own error (utilisation points on held-out GPU pairs) is a proxy: what a user
acts on is the findings. On the second generator's training seeds (``quantization.TRAINING_SEEDS``)
every candidate predictor is forced in turn (:func:`jobs.eval_baselines.with_predictors`) and its
findings scored against the truth; the winner has the highest F1, then the smallest absolute savings
error; on a tie the model (gpu_type's selection) stays, else the simpler baseline (no change, spec
ratio, regression). ``evaluate`` prints, per kind, the winner, why, and the shipped product's figures
on the held-out seed (``quantization.HELD_OUT_SEEDS``); tests/test_quantization_choice.py fails when
the shipped default stops being the winner.
"""

from __future__ import annotations

import math
from typing import Any

from gpufinops.jobs.eval_independent import _pool
from gpufinops.models import gpu_type, quantization, registry

SELECTED = (
    registry.SELECTED
)  # the model: gpu_type's own choice on each fleet (fewest wrong held-out verdicts, then MAE)
TIE_ORDER = (SELECTED, gpu_type.NO_CHANGE, gpu_type.SPEC_RATIO, gpu_type.REGRESSION)  # on a tie, the model stays


def f1(score: dict | None) -> float:
    if not score:
        return 0.0
    p, r = score["precision"], score["recall"]
    return 2 * p * r / (p + r) if p + r else 0.0


def _key(name: str, score: dict) -> tuple[float, float, int]:
    error = score["savings_error"]
    return (-round(f1(score), 4), abs(error) if error is not None else math.inf, TIE_ORDER.index(name))


def candidates(fleets: list[dict], kind: str) -> dict[str, dict]:
    """predictor -> the kind's findings with it forced, pooled over ``fleets``; ``selected``: the model as it
    runs (a kind whose spec's ``predictor`` is SELECTED: the product's own findings, peer replicas first;
    one whose predictor is a setting, quantization's: that setting at ``selected``, gpu_type's selection)."""
    names = {n for f in fleets for n in f["baselines"].get(kind, {}) if n.startswith("predictor ")}
    out = {n.removeprefix("predictor "): _pool([f["baselines"][kind].get(n) for f in fleets]) for n in sorted(names)}
    if registry.spec(kind).predictor != SELECTED:
        by_fleet = [f["baselines"][kind].get(f"predictor {f['throughput_model'].get('predictor')}") for f in fleets]
    else:
        by_fleet = [f["kinds"].get(kind) for f in fleets]
    out[SELECTED] = _pool(by_fleet)
    return {n: s for n, s in out.items() if s and n in TIE_ORDER}


def choose(fleets: list[dict], kind: str, training: tuple[int, ...] = quantization.TRAINING_SEEDS) -> dict[str, Any]:
    """The winning predictor for ``kind`` on the ``training`` seeds among ``fleets``, and why."""
    train = [f for f in fleets if f["seed"] in training]
    scores = candidates(train, kind)
    if not scores:
        return {"kind": kind, "chosen": None, "reason": "no training seed was run", "f1": {}, "training_seeds": []}
    chosen = min(scores, key=lambda n: _key(n, scores[n]))
    seeds = ", ".join(str(f["seed"]) for f in train)
    best_f1, model_f1 = f1(scores[chosen]), f1(scores.get(SELECTED))
    if chosen == SELECTED:
        rivals = {n: s for n, s in scores.items() if n != SELECTED}
        rival = min(rivals, key=lambda n: _key(n, rivals[n])) if rivals else None
        reason = f"the model has the best findings on training seeds {seeds}: F1 {best_f1:.2f}" + (
            f" vs {f1(rivals[rival]):.2f} for {rival} forced" if rival else ""
        )
    else:
        what = "baseline " if chosen != gpu_type.REGRESSION else ""
        reason = f"{what}{chosen} beat the model (gpu_type's selection) on training seeds {seeds}: F1 {best_f1:.2f} vs {model_f1:.2f}"
    tied = [
        n for n in scores if n not in (chosen, SELECTED) and _key(n, scores[n])[:2] == _key(chosen, scores[chosen])[:2]
    ]
    if tied:
        reason += f" (tied with {', '.join(sorted(tied))} on F1 and savings error: {'the model stays' if chosen == SELECTED else 'the simpler one'})"
    return {
        "kind": kind,
        "chosen": chosen,
        "reason": reason,
        "training_seeds": [f["seed"] for f in train],
        "f1": {n: round(f1(s), 4) for n, s in scores.items()},
        "savings_error": {n: s["savings_error"] for n, s in scores.items()},
    }


def choices(fleets: list[dict]) -> dict[str, dict[str, Any]]:
    """Per kind: the training choice, what the product ships, and the product's findings on the held-out seeds."""
    out = {}
    for kind in registry.predictor_kinds():  # the kinds whose spec names a throughput predictor, in order
        c = choose(fleets, kind)
        shipped = registry.spec(kind).shipped_predictor()
        held = [f for f in fleets if f["seed"] in quantization.HELD_OUT_SEEDS]
        c.update(
            shipped=shipped,
            matches=c["chosen"] is None or shipped == c["chosen"],
            held_out_seeds=[f["seed"] for f in held],
            held_out=_pool([f["kinds"].get(kind) for f in held]) if held else None,
        )
        out[kind] = c
    return out


def render(found: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["  throughput predictor per kind, chosen by its findings (F1, then savings error) on training seeds:"]
    for kind, c in found.items():
        shipped = (
            "gpu_type's per-fleet selection"
            if c["shipped"] == SELECTED
            else f"{registry.spec(kind).predictor} = {c['shipped']}"
        )
        line = f"    {kind}: {c['chosen']} ({c['reason']}); product uses {shipped}"
        if not c["matches"]:
            line += " — DOES NOT MATCH the training choice"
        h = c.get("held_out")
        if h:
            error = f"{h['savings_error']:+.1%}" if h["savings_error"] is not None else "n/a"
            seeds = ", ".join(map(str, c["held_out_seeds"]))
            line += f"; held-out seed {seeds}: precision {h['precision']:.2f}, recall {h['recall']:.2f}, error {error}"
        else:
            line += "; held-out seed not run (--quick)"
        lines.append(line)
    return lines
