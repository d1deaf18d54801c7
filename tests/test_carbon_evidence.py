"""evidence.kg_co2e_month_saved: one function over every registered kind, checked against the
measured energy the change removes, recomputed here from the fixture's known power."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from gpufinops.models import carbon_evidence, registry
from gpufinops.models.recommendation import Recommendation
from gpufinops.models.registry import KINDS
from gpufinops.warehouse import db
from tests import dummy_kind
from tests.carbon_fleet import START, build

DAYS = 2 / 24  # the fixture's two measured hours


def test_every_registered_kind_is_classified_once():
    removes, pricing = carbon_evidence.REMOVES_GPU_HOURS, carbon_evidence.PRICING_ONLY
    assert set(KINDS) == removes | pricing and not removes & pricing


def finding(kind: str) -> Recommendation:
    current = {"gpu_model": "A100-40GB", "gpu_count": 2, "instance_type": "p4d.24xlarge"}
    proposed = {
        "idle_gpu": {**current, "gpu_count": 0},
        "gpu_count": {**current, "gpu_count": 1},
        "gpu_type": {**current, "gpu_model": "L4", "gpu_count": 2},
        "quantization": {**current, "gpu_model": "L4", "gpu_count": 1},
    }.get(kind, dict(current))
    evidence: dict[str, object] = {
        "window_days": DAYS,
        "util_threshold_pct": 60.0,
    }  # the fixture's GPUs peak at 50 %: idle
    if kind not in BUILT_IN:  # a pod-level kind (the busy ones): pod ml/p1 on GPU-A, saving 40 % of its cost
        current = {**current, "gpu_count": 1, "monthly_cost_usd": Decimal(100)}
        evidence.update(namespace="ml", pod="p1", gpu_units=["GPU-A"])
        return Recommendation(
            f"{kind}-x", kind, "ml", "aws", "i-aws", None, current, dict(current), Decimal(40), 0.9, "", evidence
        )
    return Recommendation(
        f"{kind}-x", kind, "ml", "aws", "i-aws", None, current, proposed, Decimal(1), 0.9, "", evidence
    )


# the node-level kinds whose rule the test recomputes by name; every other GPU-hour kind is checked as a pod's
BUILT_IN = ("idle_gpu", "gpu_count", "gpu_type", "quantization")


@pytest.mark.parametrize("kind", KINDS)
def test_kg_co2e_month_saved_over_the_registry(warehouse, kind):
    with db.writer(warehouse) as con:
        rows = build(con)
        con.execute("DELETE FROM gpu_specs")
        con.execute("INSERT INTO gpu_specs (gpu_model, tdp_w) VALUES ('A100-40GB', 400), ('L4', 72)")
        rec = finding(kind)
        carbon_evidence.annotate(con, [rec])
    aws = [r for r in rows if r["resource_id"] == "i-aws"]
    kg = sum(r["kg_co2e"] for r in aws)
    kg_per_gpu_kwh = kg / sum(r["gpu_kwh"] for r in aws)
    month = 30.4375 / DAYS
    expected = {
        "idle_gpu": kg * month,  # every hour idle: all of it
        "gpu_count": 0.200 * 2 * kg_per_gpu_kwh * month,  # GPU-B (200 W, two hours) is the one given up
        "gpu_type": kg * (1 - (2 * 72) / (2 * 400)) * month,
        "quantization": kg * (1 - (1 * 72) / (2 * 400)) * month,
    }
    pod_kg = sum(r["kg_co2e"] for r in aws if r["pod"] == "p1" and r["namespace"] == "ml")
    assert pod_kg > 0
    if kind in carbon_evidence.PRICING_ONLY:
        assert "kg_co2e_month_saved" not in rec.evidence
    else:
        want = expected[kind] if kind in BUILT_IN else pod_kg * 0.4 * month
        assert rec.evidence["kg_co2e_month_saved"] == pytest.approx(want, abs=1e-3)
        assert rec.evidence["kg_co2e_month_saved_basis"]


def test_a_finding_without_measured_energy_says_so(warehouse):
    with db.writer(warehouse) as con:
        build(con)
        rec = finding("gpu_count")
        rec.resource_id = "i-dark"
        rec.evidence.update(first_hour=START, last_hour=START)
        carbon_evidence.annotate(con, [rec])
    assert rec.evidence["kg_co2e_month_saved"] is None
    assert "no measured energy" in rec.evidence["kg_co2e_month_saved_basis"]


def test_a_kind_that_frees_idle_hours_is_measured_by_its_spec_fact_not_its_name(warehouse):
    """A kind other than idle_gpu that schedules GPUs off when idle (same GPUs proposed, no pod) is given the
    idle hours' measured energy because its spec says ``carbon="idle_hours"``, never "0.0 kg saved"."""
    spec = dataclasses.replace(
        dummy_kind.SPEC,
        kind="dummy_scheduled_off",
        version="dummy_scheduled_off/1",
        label="Dummy scheduled off",
        family="usage",
        export="release_or_schedule",
        carbon=registry.IDLE_HOURS,
    )
    registry.register(spec)
    try:
        with db.writer(warehouse) as con:
            rows = build(con)
            rec = finding("idle_gpu")
            rec.kind, rec.proposed = spec.kind, dict(rec.current)  # the same GPUs, off while idle
            carbon_evidence.annotate(con, [rec])
    finally:
        registry.unregister(spec.kind)
    kg = sum(r["kg_co2e"] for r in rows if r["resource_id"] == "i-aws")  # every fixture hour is idle
    assert rec.evidence["kg_co2e_month_saved"] == pytest.approx(kg * 30.4375 / DAYS, abs=1e-3)
    assert rec.evidence["kg_co2e_month_saved"] > 0
    assert rec.evidence["kg_co2e_month_saved_basis"] == "measured energy of the idle hours"
