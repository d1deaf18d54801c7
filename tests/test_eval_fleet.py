"""The second fleet generator: its laws come from the published benchmark tables, not the models' formulas;
its truth holds what it plants and rejects its look-alikes; its bills arrive late, restated and with moving
prices; the evaluation runs every ingestor on it and scores every kind beside its baselines."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import duckdb
import numpy as np
import pytest

from gpufinops.jobs import eval_independent
from gpufinops.models import gpu_type, peers, quantization
from gpufinops.simulator import eval_benchmarks, eval_exports, eval_fleet, eval_laws, eval_truth


def test_benchmark_tables_give_the_published_medians():
    m = eval_benchmarks.measurements()
    resnet = next(
        g
        for g in m
        if (g.suite, g.round, g.benchmark, g.scenario) == ("mlperf_inference", "v3.1", "resnet50", "Server")
    )
    assert m[resnet]["L4"] == pytest.approx(12204.5, abs=0.1) and m[resnet]["T4"] == pytest.approx(4350.9, abs=0.1)
    assert resnet.precision == "int8"
    llm = [g for g in m if g.suite == "trtllm" and g.precision == "fp16"]  # like precision only
    assert llm and all({"H100-SXM", "A100-80GB"} & set(m[g]) for g in llm)
    assert {g.suite for g in m} == {"mlperf_inference", "mlperf_training", "trtllm"}


def test_the_fleet_law_fills_gaps_through_shared_gpus_and_the_real_pairs_leave_its_groups_out():
    table, used, origin = eval_laws.service_throughput(eval_laws.SERVICES["nlp"])
    assert set(table) == set(eval_laws.FLEET_GPUS)
    assert "measured" in origin["L4"] and "through" in origin["L40S"]  # L40S: not in v3.1, scaled from v4.x
    assert len(used) > 1
    pairs = eval_benchmarks.real_pairs(exclude=eval_independent.used_groups())
    assert pairs and not {p["group"] for p in pairs} & eval_independent.used_groups()
    with pytest.raises(KeyError, match="no mlperf_inference"):
        eval_benchmarks.fleet_law("mixtral-8x7b", "Server", "v4.1", {"T4": "T4"})


@pytest.fixture(scope="module")
def built():
    return {(seed, days): eval_fleet.build(seed, days) for seed in (1, 2, 3) for days in (21, 35)}


def test_replicas_are_as_busy_as_the_published_throughput_ratio_says(built):
    machines, _, _ = built[(1, 35)]
    by = {m.box.name: m for m in machines}
    nlp = eval_laws.SERVICES["nlp"]
    for a, b in (("nlp-l4", "nlp-h100"), ("nlp-l4", "nlp-l40s"), ("nlp-a10g", "nlp-g2")):
        ua, ub = by[a].util.mean(), by[b].util.mean()
        expected = eval_laws.rate_on(nlp, by[b].gpu_model) / eval_laws.rate_on(nlp, by[a].gpu_model)
        assert ua / ub == pytest.approx(expected, rel=0.15)  # machine efficiency ±5 %, util floors
    assert by["nlp-l4"].util.mean() > 3 * by["nlp-h100"].util.mean()  # not "no change"


def test_truth_holds_every_planted_finding_and_rejects_every_look_alike(built):
    for (seed, days), (machines, prices, start) in built.items():
        truth = eval_truth.ground_truth(machines, prices, start, {}, seed=seed, days=days)
        assert truth["roles_not_positive"] == [] and truth["lookalikes_that_are_positive"] == [], (seed, days)
        kinds = {p["kind"] for p in truth["planted"]}
        assert kinds == {"idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix", "commitment"}
        assert all(Decimal(p["monthly_savings_usd"]) >= 25 for p in truth["planted"])


def test_truth_is_priced_at_the_prices_after_their_mid_window_change(built):
    machines, prices, start = built[(2, 35)]
    law = prices[("gcp", "a2-highgpu-1g")]
    assert law.list_usd(0) != law.list_usd(law.spot_ratio.size - 1)
    hit = next(
        p
        for p in eval_truth.ground_truth(machines, prices, start, {}, seed=2, days=35)["planted"]
        if p["machine"] == "vision-a100" and p["kind"] == "gpu_type"
    )
    now = law.list_usd(law.spot_ratio.size - 1)
    target = prices[("gcp", hit["target_instance_type"])].list_usd(law.spot_ratio.size - 1)
    expected = now * eval_truth.HOURS_PER_MONTH * (1 - target / now)
    assert Decimal(hit["monthly_savings_usd"]) == expected.quantize(Decimal("0.01"))


def test_the_first_delivery_lacks_late_hours_and_the_restatement_changes_costs(built):
    machines, prices, start = built[(1, 21)]
    rows = [r for m in machines for r in eval_exports.bill_rows(m, prices, start)]
    month = eval_exports.month_bounds(start)[0]
    first, final = eval_exports.first_delivery(rows, month), eval_exports.restated(rows, month)
    kept = {id(r) for r in first}
    late = [r for r in rows if id(r) not in kept]
    assert {r["_machine"] for r in late} == set(eval_exports.LATE) and len(late) == 36 * len(eval_exports.LATE)
    changed = [r for r in final if "_credit" in r]
    assert {r["_machine"] for r in changed} == set(eval_exports.CORRECTED)
    assert all(r["BillingPeriodStart"] == month and r["_credit"] < 0 for r in changed)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    return eval_independent.run_fleet(tmp_path_factory.mktemp("eval-fleet"), seed=1, days=21)


def test_every_ingestor_loads_it_and_the_restated_bill_is_held_exactly_once(scored):
    for provider, totals in scored["bill_reconciled"].items():
        assert totals["warehouse"] == totals["generator"], provider
    assert scored["withheld"].get("thin_evidence", 0) >= 1  # the host without metrics is withheld


def test_every_kind_is_scored_beside_its_baselines(scored):
    summary = eval_independent.summarise([scored])
    assert set(summary) == {"idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix", "commitment"}
    for kind, k in summary.items():
        assert k["model"]["planted"] > 0 and k["baselines"], kind
        assert 0 <= k["model"]["precision"] <= 1 and 0 <= k["model"]["recall"] <= 1
    assert set(summary["gpu_type"]["baselines"]) == {f"predictor {p}" for p in gpu_type.PREDICTORS}
    # the spot baseline moves everything: its precision is what the model's rules buy
    spot = summary["spot_mix"]
    assert spot["baselines"]["every on-demand non-notebook to spot"]["precision"] < spot["model"]["precision"]
    text = eval_independent.render([scored], summary)
    assert "look-alikes flagged" in text and "vs p95 < 5 % over the window" in text


def test_findings_name_the_selected_predictor_and_its_three_errors(scored):
    q = scored["throughput_model"]
    maes = {p: q[gpu_type.MAE_KEYS[p]] for p in gpu_type.PREDICTORS}
    wrong = {p: q[gpu_type.DECISION_KEYS[p]] for p in gpu_type.PREDICTORS}
    # chosen by the verdicts it would give on held-out pairs, then by MAE
    assert q["predictor"] == gpu_type.select_predictor(maes, wrong)
    assert scored["evidence_predictors"]
    measured = {peers.PEER_PREDICTOR, peers.OTHER_CLASSES}  # replicas on the target GPU measure it
    own = {"gpu_type": {q["predictor"], *measured}, "quantization": {quantization.PREDICTOR, quantization.FEWER_GPUS}}
    for e in scored["evidence_predictors"]:  # quantization prices its steps with its own choice
        assert e["throughput_model"] in own[e["kind"]] and set(e["mae_pct"]) == set(gpu_type.PREDICTORS)


def test_predictors_are_scored_on_real_ratios_the_generator_never_used(scored):
    real = scored["real_ratios"]
    assert {"mlperf_inference", "mlperf_training", "trtllm", "all"} <= set(real)
    for r in real.values():
        assert set(r["mae_pct"]) == set(gpu_type.PREDICTORS) and r["points"] > 0
        assert all(math.isfinite(v) for v in r["mae_pct"].values())
    # published ratios are far from "no change": a T4 is not an H100
    assert real["all"]["mae_pct"]["no_change_baseline"] > 2 * real["all"]["mae_pct"]["spec_ratio_baseline"]


def test_the_truth_file_lists_the_laws_and_where_each_throughput_came_from(tmp_path):
    fleet = eval_fleet.generate(tmp_path, seed=3, days=21)
    truth = json.loads(fleet.truth_path.read_text())
    assert truth["generator"] == "gpufinops.simulator.eval_fleet" and truth["laws"]["fp32_slowdown"] == 2.0
    assert set(truth["throughput_origin"]) == set(eval_laws.SERVICES)
    assert list((tmp_path / "metrics" / "dcgm").glob("*.prom")) and list(
        (tmp_path / "metrics" / "nvidia-smi").glob("*.csv")
    )
    dark = next(m for m in fleet.machines if not m.box.metrics)
    assert not (tmp_path / "metrics" / "nvidia-smi" / f"{dark.host}.csv").exists()
    con = duckdb.connect()
    assert (
        con.sql(
            "SELECT count(*) FROM read_parquet(?)", params=[str(tmp_path / "exports/aws/cur/**/*.parquet")]
        ).fetchall()[0][0]
        > 0
    )
    assert np.isfinite([float(v) for v in truth["cost_by_provider_usd"].values()]).all()
