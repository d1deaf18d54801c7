"""`gpufinops evaluate`: the demo's planted waste is found (precision, recall, savings within ±10 %),
the scoring itself counts misses and false findings, idle_gpu matches an independent count on the real
Helios cluster occupancy, and the independent figures (second generator, published throughput ratios)
are printed with their baselines (tests/test_eval_fleet.py tests that generator itself)."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from gpufinops.interfaces import cli, cli_commands
from gpufinops.jobs import evaluate
from gpufinops.models.registry import KINDS

RIGHTSIZING = {"gpu_count", "gpu_type", "quantization", "idle_gpu"}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo-eval")
    return evaluate.run_fleet(home, seed=5, days=21, scale=1)


def test_planted_waste_is_found_on_a_short_demo_fleet(demo_run):
    recs, truth, model = demo_run
    scores = evaluate.score(recs, truth, set(KINDS))
    assert RIGHTSIZING <= set(scores)
    for kind in RIGHTSIZING:
        s = scores[kind]
        assert s["precision"] >= 0.95 and s["recall"] >= 0.95, (kind, s["missed"], s["extra"])
        assert s["savings_error"] is not None and abs(s["savings_error"]) <= 0.10, (kind, s)
    maes = model.maes()  # the demo loads every GPU alike: the predictor with the least held-out error is used
    assert maes[model.name] == min(maes.values()) and model.quality["predictor"] == model.name


def test_score_counts_misses_and_false_findings(demo_run):
    recs, truth, _ = demo_run
    gpu_type = [r for r in recs if r.kind == "gpu_type"]
    fake = copy.deepcopy(gpu_type[0])
    fake.resource_id, fake.monthly_savings_usd = "not-planted", Decimal("10")
    scores = evaluate.score([r for r in recs if r.kind != "gpu_count"] + [fake], truth, set(KINDS))
    assert scores["gpu_type"]["precision"] == 0.5 and scores["gpu_type"]["extra"] == ["not-planted"]
    assert scores["gpu_count"]["recall"] == 0.0 and scores["gpu_count"]["missed"]
    doubled = copy.deepcopy(gpu_type[0])
    doubled.monthly_savings_usd *= 2
    doubled.evidence = {**doubled.evidence, "standalone_monthly_savings_usd": doubled.monthly_savings_usd}
    assert evaluate.score([doubled], truth, {"gpu_type"})["gpu_type"]["savings_error"] == pytest.approx(1.0, abs=0.01)


def test_idle_on_real_helios_occupancy_matches_an_independent_count():
    rows = evaluate.helios_idle()
    assert {r["cluster"] for r in rows} == {"vc3sl", "vchbv"}
    for r in rows:
        assert r["idle_gpu_hours_found"] == r["idle_gpu_hours_independent"] > 0
        assert 0 < r["idle_share"] < 1 and r["gpu_hours"] == 64 * r["hours"]


def test_other_models_sections_are_included_when_present_and_reported_when_not(monkeypatch):
    import types

    def fake_import(name):
        if name == "gpufinops.models.spot_mix":
            raise ImportError("no module")
        if name == "gpufinops.models.spot_forecast":
            return types.SimpleNamespace(quality=lambda: {"model_mape_pct": 1.0})
        return types.SimpleNamespace(quality=lambda con: 1 / 0)

    monkeypatch.setattr(evaluate.importlib, "import_module", fake_import)
    sections = evaluate.m2_sections(object())
    assert sections["spot price-ratio forecast"] == {"model_mape_pct": 1.0}
    assert sections["spot-mix backtest"]["status"].startswith("not available")
    assert sections["cost forecast"]["status"].startswith("failed: ZeroDivisionError")


@pytest.mark.slow
def test_evaluate_prints_the_independent_figures_beside_their_baselines():
    result = evaluate.evaluate(
        fleets=(), independent_seeds=(2,), independent_days=21, helios=False, others=False, busy_seeds=()
    )
    (fleet,) = result["independent"]
    assert fleet["seed"] == 2 and set(result["independent_summary"]) >= RIGHTSIZING
    text = evaluate.render(result)
    assert "Second generator" in text and "seed 2 throughput predictors" in text
    for line in (
        "vs predictor spec_ratio_baseline",
        "vs predictor no_change_baseline",
        "vs p95 < 5 % over the window",
        "on published trtllm ratios",
        "on published mlperf_inference ratios",
        "throughput predictor per kind, chosen by its findings",
        "quantization: ",
        "held-out seed not run",  # seed 2 trains; the held-out seed 3 was not run
    ):
        assert line in text, line
    choice = result["predictor_choice"]["quantization"]
    assert choice["training_seeds"] == [2] and choice["shipped"] == "no_change_baseline"


def test_cli_has_the_evaluate_command():
    args = cli._parser().parse_args(["evaluate", "--quick", "--format", "json"])
    assert cli.COMMANDS[args.command] is cli_commands.cmd_evaluate and args.quick
