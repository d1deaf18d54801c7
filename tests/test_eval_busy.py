"""The busy-waste evaluation: on seeds the rules were not set on, each kind reaches precision and recall of
at least 0.90 and beats the single-utilisation-threshold baseline (tuned on the tuning seeds), and
``evaluate --explain KIND`` prints its confusion. The figures come from the generator's planted cases and
the kinds' own recommend steps over the real hourly rollup (jobs/eval_busy.py)."""

from __future__ import annotations

import pytest

from gpufinops.jobs import eval_busy, evaluate


@pytest.fixture(scope="module")
def section():
    return eval_busy.evaluate(held_out=(101, 102))


@pytest.mark.parametrize("kind", eval_busy.KINDS)
def test_each_kind_is_precise_on_held_out_seeds_and_beats_the_baseline(section, kind):
    scores = section["kinds"][kind]
    model, baseline = scores["model"], scores["baseline"]
    assert model["tp"] >= 5  # enough planted cases to measure
    assert model["precision"] >= 0.9 and model["recall"] >= 0.9
    f1 = 2 * model["precision"] * model["recall"] / (model["precision"] + model["recall"])
    assert f1 > eval_busy._f1(baseline)


def test_the_generator_plants_each_look_alike(section):
    cases = {p.case for p in eval_busy.fleet(101)}
    for look_alike in ("short pause", "healthy BF16 trainer", "notebook in use", "light-traffic server"):
        assert look_alike in cases
    phases = {phase for p in eval_busy.fleet(101) for phase in p.pod.phases}
    assert {"checkpoint_pause", "eval_pass", "warmup", "optimizer_step"} <= phases


def test_explain_prints_the_confusion_of_a_busy_kind(section):
    text = evaluate.render({"fleets": [], "busy": section}, explain="stalled_job")
    assert "Busy-waste kinds" in text and "stalled_job on the busy-waste fleets:" in text
    assert "true positives" in text and "false negatives" in text
