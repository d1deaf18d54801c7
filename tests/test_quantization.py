"""quantization: FP32 serving that fits a cheaper GPU at FP16, INT8 only when enabled, training and
workloads that already fit left alone, the validation warning always present, thin evidence."""

from __future__ import annotations

import pytest

from gpufinops.models import features, gpu_type, quantization
from tests.rightsizing_fleet import Machine, offer
from tests.test_gpu_type import OFFERS, peers, vm
from tests.test_gpu_type import run as gpu_type_run


def run(path, machines, offers=OFFERS, settings=None):
    recs, withheld, _, _ = gpu_type_run(path, machines, offers, settings, recommend=quantization.recommend)
    return recs, withheld


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
    maes = rec.evidence["throughput_predictor_mae_pct"]  # all three errors, beside the predictor that priced it
    assert set(maes) == set(gpu_type.PREDICTORS) and rec.evidence["throughput_model"] == quantization.PREDICTOR
    assert rec.evidence["throughput_predictor_choice"].startswith(f"{quantization.PREDICTOR}: quantization_predictor")
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


CHOICES = ("selected", *gpu_type.PREDICTORS)


@pytest.mark.parametrize("predictor", CHOICES)
def test_shapes_that_must_not_be_quantized_under_any_predictor(warehouse, predictor):
    """Whichever predictor prices the FP16 step: a memory-bound FP32 model whose FP16 copy (35 GiB × 1.2)
    fits no cheaper GPU, a model already at FP16, FP32 training, and a 2-GPU FP32 job whose FP16 copy
    still needs both GPUs (36 GiB each → 18 GiB × 1.2 per GPU, 80 % busy) get no quantization finding."""
    membound = ranker("membound", mem=70)
    membound.instance_type, membound.gpu_model, membound.usd_per_hour = "a2-ultragpu-1g", "A100-80GB", "5.0688"
    half = ranker("half", precision="fp16", mem=31)
    train = ranker("train", workload="training")
    pair = Machine("pair", "a2-highgpu-2g", "A100-40GB", 2, "7.3468", [80, 80], [36, 36], provider="Google Cloud",
                   region="us-central1", tags={"workload": "online_inference", "precision": "fp32"})  # fmt: skip
    offers = OFFERS + [offer("a2-highgpu-2g", "A100-40GB", 2, "7.3468", "us-central1", "gcp")]
    recs, withheld = run(
        warehouse, [*peers(), membound, half, train, pair], offers, {"quantization_predictor": predictor}
    )
    assert recs == []
    (w,) = [w for w in withheld if w.resource_id == "membound"]  # considered, and said why not
    assert w.reason == "no_fitting_target" and "at FP16 g2-standard-4 (L4): memory" in w.detail


def test_the_evidence_names_the_predictor_that_priced_the_step(warehouse):
    recs, _ = run(warehouse, [*peers(), ranker()], settings={"quantization_predictor": "selected"})
    (rec,) = recs
    assert rec.evidence["throughput_predictor_choice"].endswith("gpu_type's choice")
    assert rec.evidence["throughput_model"] in gpu_type.PREDICTORS


def test_an_unknown_predictor_is_a_config_error():
    with pytest.raises(ValueError, match=r"\[models\] quantization_predictor must be one of .*got 'ridge'"):
        features.RightsizingSettings.from_config({"quantization_predictor": "ridge"})
    assert features.RightsizingSettings.from_config({"quantization_predictor": "Selected"}).quantization_predictor == (
        "selected"
    )
