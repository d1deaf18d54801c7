"""quantization's throughput predictor is the one whose findings score best on the second generator's
training seeds (F1, then savings error): re-run that evaluation and fail when the shipped default
(``[models] quantization_predictor``) stops matching it."""

from __future__ import annotations

import pytest

from gpufinops.jobs import eval_choice, eval_independent
from gpufinops.models import features, quantization


@pytest.mark.timeout(300)
@pytest.mark.slow  # two second-generator fleets, each simulated, ingested and analysed (~30 s each)
def test_the_shipped_predictor_is_what_the_training_seeds_choose(tmp_path):
    fleets = [eval_independent.run_fleet(tmp_path / f"seed-{seed}", seed, 35) for seed in quantization.TRAINING_SEEDS]
    assert len(fleets) == 2  # bounded: exactly the training seeds, never the held-out one
    choice = eval_choice.choose(fleets, "quantization")
    assert choice["chosen"] == quantization.PREDICTOR, choice
    assert features.RightsizingSettings().quantization_predictor == quantization.PREDICTOR
    assert all(f["seed"] not in quantization.HELD_OUT_SEEDS for f in fleets)
    priced = {e["throughput_model"] for f in fleets for e in f["evidence_predictors"] if e["kind"] == "quantization"}
    assert priced <= {quantization.PREDICTOR, quantization.FEWER_GPUS}, priced  # each finding names its predictor


def _fleet(seed: int, predictor_scores: dict, selected: str) -> dict:
    return {
        "seed": seed,
        "throughput_model": {"predictor": selected},
        "baselines": {"quantization": {f"predictor {n}": s for n, s in predictor_scores.items()}},
        "kinds": {"quantization": predictor_scores[selected]},
    }


def _score(hits: int, found: int, planted: int, error: float) -> dict:
    return {"planted": planted, "found": found, "hits": hits, "precision": hits / found if found else 0.0,
            "recall": hits / planted, "truth_monthly_savings_usd": 100.0,
            "found_monthly_savings_usd": 100.0 * (1 + error), "savings_error": error, "extra": [], "missed": []}  # fmt: skip


def test_the_choice_is_f1_then_savings_error_then_the_model_then_the_simpler_baseline():
    spec, none, reg = "spec_ratio_baseline", "no_change_baseline", "fleet_regression"
    fleets = [
        _fleet(1, {spec: _score(1, 1, 3, 0.0), none: _score(3, 3, 3, 0.05), reg: _score(3, 3, 3, 0.01)}, spec),
        _fleet(3, {spec: _score(0, 5, 3, 0.0), none: _score(0, 5, 3, 0.0), reg: _score(0, 5, 3, 0.0)}, spec),
    ]
    c = eval_choice.choose(fleets, "quantization", training=(1,))
    assert c["chosen"] == reg and c["training_seeds"] == [1]  # the held-out seed 3 is not looked at
    assert "F1 1.00" in c["reason"]
    fleets[0]["baselines"]["quantization"][f"predictor {reg}"] = _score(3, 3, 3, 0.05)
    c = eval_choice.choose(fleets, "quantization", training=(1,))
    assert c["chosen"] == none  # tied on F1 and error: the simpler one
    assert c["reason"].startswith(
        "baseline no_change_baseline beat the model (gpu_type's selection) on training seeds 1"
    )
    assert "F1 1.00 vs 0.50" in c["reason"]
    fleets[0]["baselines"]["quantization"][f"predictor {spec}"] = _score(3, 3, 3, 0.05)
    c = eval_choice.choose(fleets, "quantization", training=(1,))
    assert c["chosen"] == eval_choice.SELECTED and c["reason"].startswith("the model has the best findings")
