"""quantization: FP32 serving that fits a cheaper GPU at FP16, INT8 only when enabled, training and
workloads that already fit left alone, the validation warning always present, thin evidence."""

from __future__ import annotations

import duckdb

from gpufinops.models import features, gpu_type, quantization
from tests.rightsizing_fleet import Machine, build, offer
from tests.test_gpu_type import OFFERS, peers, vm


def run(path, machines, offers=OFFERS, settings=None):
    build(path, machines, offers)
    with duckdb.connect(str(path), read_only=True) as con:
        s = features.settings_of(settings)
        res, spec = features.resources(con, s), features.specs(con)
        model = gpu_type.fit(gpu_type.observations(res, spec, s.idle_util_pct))
        return quantization.recommend(res, features.catalogue(con), spec, model, s)


def ranker(rid="ranker", precision="fp32", workload="online_inference", mem=31, **kw) -> Machine:
    m = vm(rid, "a2-highgpu-1g", "A100-40GB", "3.6734", 45, mem, **kw)
    m.tags = {"workload": workload, "precision": precision}
    return m


def test_fp32_serving_moves_to_a_cheaper_gpu_at_fp16(warehouse):
    recs, _ = run(warehouse, [*peers(), ranker()])
    assert [r.resource_id for r in recs] == ["ranker"]
    rec = recs[0]
    assert rec.current["precision"] == "fp32" and rec.proposed["precision"] == "fp16"
    assert rec.proposed["gpu_model"] == "L4" and rec.proposed["instance_type"] == "g2-standard-4"
    assert rec.evidence["mem_estimate_gib"] == 15.5 and rec.evidence["precision_source"] == "tag"
    maes = rec.evidence["throughput_predictor_mae_pct"]  # the predictor used, beside all three errors
    assert set(maes) == set(gpu_type.PREDICTORS) and maes[rec.evidence["throughput_model"]] == min(maes.values())
    assert "must be validated" in rec.risk and rec.monthly_savings_usd > 0
    assert rec.confidence < 0.7  # a precision change is never a sure thing


def test_training_and_already_fitting_workloads_are_left_alone(warehouse):
    small = ranker("small", mem=12)  # fits an L4 as it is: gpu_type's finding, not quantization's
    train = ranker("train", workload="training")
    half = ranker("half", precision="fp16", mem=31)  # already FP16; INT8 not enabled by default
    recs, _ = run(warehouse, [*peers(), small, train, half])
    assert recs == []


def test_int8_only_when_enabled_and_warns(warehouse):
    half = ranker("half", precision="fp16", mem=31)
    recs, _ = run(warehouse, [*peers(), half], settings={"quantization_precisions": ["fp16", "int8"]})
    mine = [r for r in recs if r.resource_id == "half"]
    assert [r.proposed["precision"] for r in mine] == ["int8"]
    assert "slower than FP16" in mine[0].risk


def test_untagged_precision_is_inferred_only_from_dcgm_activity():
    row = {"precision": None, "sm_active_mean": 0.6, "tensor_active_mean": 0.01}
    assert quantization.current_precision(row) == ("fp32", "dcgm_tensor_idle")
    assert quantization.current_precision({**row, "tensor_active_mean": 0.4}) == (None, "unknown")
    assert quantization.current_precision({"precision": None, "sm_active_mean": None, "tensor_active_mean": None}) == (
        None,
        "unknown",
    )


def test_thin_evidence_is_withheld(warehouse):
    recs, withheld = run(warehouse, [*peers(), ranker(days=5)])
    assert recs == [] and any(
        w.reason == "short_history" and "measured days" in w.detail and w.source_hint == "2 more days of history"
        for w in withheld
    )


def test_no_target_in_the_region_means_no_recommendation(warehouse):
    lone = ranker(region="asia-northeast1")
    recs, _ = run(
        warehouse, [*peers(), lone], OFFERS + [offer("a2-highgpu-1g", "A100-40GB", 1, "4.2", "asia-northeast1", "gcp")]
    )
    assert recs == []
