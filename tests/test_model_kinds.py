"""Every recommendation kind's facts are on its spec (models/registry.py) and every reader reads them:
a meta-lint over each registered kind fails on a missing or unknown fact, and a kind declared in one
module (tests/dummy_kind.py) is planned, exported, evaluated and labelled with no other file edited."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from decimal import Decimal

import duckdb
import pytest

from gpufinops.jobs import eval_score
from gpufinops.jobs.export import placement
from gpufinops.jobs.export import plan as export_plan
from gpufinops.jobs.export import storage as export_storage
from gpufinops.models import carbon_evidence, plans, registry
from gpufinops.models.registry import ModelSpec, NotScored, Ref, Scored
from gpufinops.warehouse import labels
from tests import dummy_kind

FACTS = ("label", "family", "export", "truth", "carbon")


@pytest.mark.parametrize("spec", registry.MODELS, ids=lambda s: s.kind)
def test_every_registered_kind_declares_every_fact_and_each_is_known(spec: ModelSpec) -> None:
    assert spec.version.startswith(f"{spec.kind}/") and spec.summary
    assert spec.label and not labels.is_code(spec.label)
    assert spec.family in plans.ORDER
    assert spec.export in export_plan.ACTIONS
    if isinstance(spec.truth, Scored):
        assert spec.truth.truth in eval_score.TRUTHS
    else:
        assert isinstance(spec.truth, NotScored) and len(spec.truth.reason) > 20
    assert spec.carbon in registry.CARBON
    for ref in (spec.load, spec.recommend, spec.settings):
        if isinstance(ref, Ref):
            assert callable(ref.resolve()), ref.path  # a typo in a module or name fails here, not at 03:00
    assert plans.family(spec.kind) == spec.family
    assert export_plan.action(spec.kind) is export_plan.ACTIONS[spec.export]


def test_the_lower_layers_tables_are_the_registrys_exactly() -> None:
    """warehouse/labels.py sits below the models (it cannot import them): its kind labels are the specs'.
    The storage export and the carbon evidence carry exactly the kinds whose specs say so."""
    assert labels.KINDS == {s.kind: s.label for s in registry.MODELS}
    assert set(export_storage.KINDS) == {s.kind for s in registry.MODELS if s.export == "storage"}
    assert carbon_evidence.REMOVES_GPU_HOURS == {s.kind for s in registry.MODELS if s.carbon == "gpu_hours"}
    assert carbon_evidence.PRICING_ONLY == {s.kind for s in registry.MODELS if s.carbon == "pricing_only"}
    assert set(registry.KINDS) == {s.kind for s in registry.MODELS} and len(registry.KINDS) == len(registry.MODELS)


def test_the_scored_kinds_are_the_ones_the_generators_plant() -> None:
    from gpufinops.simulator import eval_machines
    from gpufinops.simulator.demo_workloads import FLEET

    planted = {s.plant[0] for s in FLEET if s.plant} | {"commitment"}  # the demo plants; its commitments
    assert set(registry.scored_kinds()) == planted
    roles = {b.role[0].removeprefix("not ") for b in eval_machines.FLEET if b.role}  # the second generator's
    assert roles and roles <= set(registry.scored_kinds())


def test_a_spec_without_a_fact_does_not_construct_and_an_unknown_fact_is_refused() -> None:
    whole = {f.name: getattr(dummy_kind.SPEC, f.name) for f in dataclasses.fields(ModelSpec)}
    for fact in FACTS:
        with pytest.raises(TypeError, match=fact):
            ModelSpec(**{k: v for k, v in whole.items() if k != fact})
    for fact, bad in (("family", "buy"), ("carbon", "some"), ("truth", "planted"), ("label", "")):
        with pytest.raises(ValueError, match=fact if fact != "truth" else "Scored"):
            ModelSpec(**{**whole, fact: bad})


def test_a_kind_the_registry_does_not_hold_is_refused_by_every_reader() -> None:
    with pytest.raises(ValueError, match="unknown recommendation kind 'gpu_size'"):
        plans.family("gpu_size")
    with pytest.raises(ValueError, match="unknown recommendation kind"):
        plans.reconcile([dummy_kind.finding("i-1", "1000", "10")])  # not registered here
    with pytest.raises(ValueError, match="unknown recommendation kind"):
        export_plan.action("gpu_size")
    with pytest.raises(ValueError, match="not scored by evaluate"):
        eval_score.truth_rule("storage_orphan")
    with pytest.raises(ValueError, match="built-in"):
        registry.unregister("idle_gpu")


def test_reading_the_facts_imports_no_model_library() -> None:
    code = (
        "import sys; from gpufinops.models import plans, registry; from gpufinops.warehouse import labels; "
        "assert 'polars' not in sys.modules and 'gpufinops.models.gpu_type' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture
def dummy():
    registry.register(dummy_kind.SPEC)
    try:
        yield dummy_kind
    finally:
        registry.unregister(dummy_kind.KIND)


def test_a_kind_declared_in_one_module_is_planned_exported_evaluated_and_labelled(dummy) -> None:
    from tests.test_plans import rec

    assert dummy.KIND in registry.KINDS and registry.VERSIONS[dummy.KIND] == f"{dummy.KIND}/1"
    # plans: a purchase after a rightsize is a step priced on what the rightsize leaves
    out = {
        r.kind: r
        for r in plans.reconcile([rec("gpu_count", "i-9", "400", cost="1000"), dummy.finding("i-9", "1000", "100")])
    }
    assert out["gpu_count"].plan == "primary" and out[dummy.KIND].plan == "step"
    assert out[dummy.KIND].monthly_savings_usd == Decimal("60.00")  # 100 × (1000 − 400) / 1000
    # exports: its action is its spec's
    state = export_plan.Placement("i-9", "nlp", None, "A100", 8)
    after, problem = placement.apply(state, {"kind": dummy.KIND, "proposed": {}}, None)
    assert after.committed and problem is None and after.gpus == 8
    # evaluation: scored, its truth priced by its spec's rule
    assert dummy.KIND in registry.scored_kinds()
    truth = {
        "days": 30,
        "machines": [{"resource_id": "i-9", "provider": "aws"}],
        "planted": [{"kind": dummy.KIND, "resource_id": "i-9", "region": "us-east-1", "monthly_savings_usd": "90"}],
    }
    scored = eval_score.score([dummy.finding("i-9", "1000", "100")], truth, set(registry.scored_kinds()))
    assert scored[dummy.KIND]["hits"] == 1 and scored[dummy.KIND]["savings_error"] == pytest.approx(10 / 90)
    # labels: the lower layer has its label, passed down by the registration
    assert labels.label(dummy.KIND, "kind") == "Dummy reservation" == labels.label(dummy.KIND)
    # its steps run through the spec like a built-in's
    assert [r.id for r in registry.spec(dummy.KIND).run(duckdb.connect(), None).recommendations] == [
        f"{dummy.KIND}-i-dummy"
    ]
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(dummy.SPEC)


def test_unregistering_takes_the_kind_out_of_every_reader(dummy) -> None:
    registry.unregister(dummy.KIND)
    try:
        assert dummy.KIND not in registry.KINDS and dummy.KIND not in labels.KINDS
        assert labels.label(dummy.KIND, "kind") == "Dummy reserved"  # back to its words
        with pytest.raises(ValueError):
            export_plan.action(dummy.KIND)
    finally:
        registry.register(dummy.SPEC)  # the fixture takes it out again


def test_the_fitted_calibration_covers_exactly_the_scored_kinds() -> None:
    """`gpufinops evaluate` fits the shown confidence of the kinds it scores; the others show their raw
    score, by their spec's NotScored truth, not by being forgotten."""
    from gpufinops.models import calibration

    assert set(calibration.CALIBRATION) == set(registry.scored_kinds())


def test_a_registered_kind_runs_and_is_stored_with_the_others(dummy, tmp_path) -> None:
    from gpufinops.models.run import analyse
    from gpufinops.warehouse import db

    with db.writer(tmp_path / "wh.duckdb") as con:
        found = analyse(con, [dummy.KIND])
        stored = con.execute("SELECT kind, model_version, plan FROM recommendations").fetchall()
    assert [r.kind for r in found.recommendations] == [dummy.KIND]
    assert stored == [(dummy.KIND, f"{dummy.KIND}/1", "primary")]
