"""One plan per resource (models/plans.py): exclusive candidates are alternatives, compatible ones are
steps priced on what the previous steps leave, and the one total counts each dollar once."""

from __future__ import annotations

from decimal import Decimal

from gpufinops.models import plans
from gpufinops.models.recommendation import Recommendation, money


def rec(
    kind: str,
    resource: str,
    savings: str,
    cost: str = "10000",
    pattern: str | None = None,
    provider: str = "aws",
    team: str = "nlp",
) -> Recommendation:
    return Recommendation(
        id=f"{kind}-{resource}-{pattern or ''}",
        kind=kind,
        team=team,
        provider=provider,
        resource_id=resource,
        workload=None,
        current={"monthly_cost_usd": Decimal(cost)},
        proposed={"action": kind},
        monthly_savings_usd=Decimal(savings),
        confidence=0.8,
        risk="",
        evidence={"pattern": pattern} if pattern else {},
    )


def by_id(recs):
    return {r.id: r for r in recs}


def test_spot_repatriate_and_commit_on_one_resource_are_one_primary_and_alternatives():
    """The issue's p4d: "run 100 % on spot" and "repatriate to dc1" are two ways to buy the same hours."""
    out = by_id(
        plans.reconcile(
            [
                rec("spot_mix", "i-p4d", "10746"),
                rec("onprem_vs_cloud", "i-p4d", "9318"),
                rec("commitment", "i-p4d", "993"),
            ]
        )
    )
    assert out["spot_mix-i-p4d-"].plan == "primary"
    assert {out["onprem_vs_cloud-i-p4d-"].plan, out["commitment-i-p4d-"].plan} == {"alternative"}
    assert len({r.plan_id for r in out.values()}) == 1
    assert plans.total(out.values()) == Decimal("10746.00")  # never 10,746 + 9,318 + 993


def test_a_commitment_after_rightsizing_is_a_step_priced_on_the_rightsized_baseline():
    """recsys-ranker: FP16 on an L4 first; the commitment then covers what is left, not the old A100."""
    out = by_id(
        plans.reconcile(
            [
                rec("quantization", "vm-r", "2167", cost="2681"),
                rec("commitment", "vm-r", "993", cost="2681"),
                rec("onprem_vs_cloud", "vm-r", "1864", cost="2681"),
            ]
        )
    )
    primary, step = out["quantization-vm-r-"], out["onprem_vs_cloud-vm-r-"]
    assert primary.plan == "primary" and step.plan == "step" and out["commitment-vm-r-"].plan == "alternative"
    left = Decimal("2681") - Decimal("2167")
    assert step.monthly_savings_usd == money(Decimal("1864") * left / Decimal("2681"))
    assert step.evidence["standalone_monthly_savings_usd"] == Decimal("1864")
    assert step.evidence["priced_after"] == [primary.id]
    assert plans.total(out.values()) == Decimal("2167") + step.monthly_savings_usd
    assert plans.total(out.values()) < Decimal("2681")  # a plan never saves more than the resource costs


def test_rightsizing_candidates_exclude_each_other():
    out = by_id(
        plans.reconcile(
            [rec("gpu_type", "i-1", "3000"), rec("gpu_count", "i-1", "4000"), rec("quantization", "i-1", "3500")]
        )
    )
    assert [r.plan for r in sorted(out.values(), key=lambda r: r.kind)] == ["primary", "alternative", "alternative"]
    assert out["gpu_count-i-1-"].plan == "primary"


def test_releasing_an_idle_resource_ends_its_plan():
    out = by_id(
        plans.reconcile(
            [
                rec("idle_gpu", "i-2", "16000", pattern="always_idle"),
                rec("spot_mix", "i-2", "9000"),
                rec("gpu_count", "i-2", "5000"),
            ]
        )
    )
    assert out["idle_gpu-i-2-always_idle"].plan == "primary"
    assert out["spot_mix-i-2-"].plan == out["gpu_count-i-2-"].plan == "alternative"
    assert plans.total(out.values()) == Decimal("16000.00")


def test_a_scheduled_idle_resource_can_still_be_rightsized_on_the_hours_left():
    out = by_id(
        plans.reconcile([rec("idle_gpu", "i-3", "3000", pattern="idle_off_hours"), rec("gpu_type", "i-3", "5000")])
    )
    assert out["idle_gpu-i-3-idle_off_hours"].plan == "primary"
    step = out["gpu_type-i-3-"]
    assert step.plan == "step" and step.monthly_savings_usd == money(
        Decimal("5000") * Decimal("7000") / Decimal("10000")
    )


def test_conditional_savings_are_alternatives_and_resources_plan_apart():
    packing = rec("gpu_count", "i-4", "9000")
    packing.evidence["conditional"] = True
    out = plans.reconcile([packing, rec("spot_mix", "i-5", "100")])
    assert {r.resource_id: r.plan for r in out} == {"i-4": "alternative", "i-5": "primary"}
    assert len({r.plan_id for r in out}) == 2
    assert plans.total(out) == Decimal("100.00")


def test_on_prem_workload_findings_on_one_group_are_separate_plans():
    """Two teams' work on one node group: each team's shrink is its own plan (different work)."""
    a = rec("onprem_vs_cloud", "dc1/a100", "500", provider="onprem", team="nlp")
    b = rec("onprem_vs_cloud", "dc1/a100", "700", provider="onprem", team="vision")
    out = plans.reconcile([a, b])
    assert [r.plan for r in out] == ["primary", "primary"] and plans.total(out) == Decimal("1200.00")


def test_total_reads_dicts_and_objects_alike():
    out = plans.reconcile([rec("spot_mix", "i-6", "10.005"), rec("commitment", "i-6", "5")])
    assert (
        plans.total(out)
        == plans.total([r.to_dict() | {"monthly_savings_usd": str(r.monthly_savings_usd)} for r in out])
        == Decimal("10.01")
    )


def test_a_purchase_step_buys_the_rightsized_shape():
    q = rec("quantization", "vm-r", "2167", cost="2681")
    q.proposed = {
        "instance_type": "g2-standard-4",
        "gpu_model": "L4",
        "gpu_count": 1,
        "monthly_cost_usd": Decimal("514"),
        "action": "serve at FP16 on g2-standard-4 (L4)",
    }
    c = rec("commitment", "vm-r", "993", cost="2681")
    c.proposed = {
        "instance_type": "a2-highgpu-1g",
        "pricing": "commit_1y",
        "action": "commit to 1 machine(s) for 1 year",
    }
    out = by_id(plans.reconcile([q, c]))
    step = out["commitment-vm-r-"]
    assert step.plan == "step" and step.proposed["instance_type"] == "g2-standard-4"
    assert step.current["instance_type"] == "g2-standard-4" and step.current["monthly_cost_usd"] == Decimal("514")
    assert "after: serve at FP16" in step.proposed["action"]
