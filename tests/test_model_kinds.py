"""Every recommendation kind's facts are on its spec (models/kind_spec.py, one spec module per kind under
models/kinds/) and every reader reads them: a meta-lint over each registered kind fails on a missing or
unknown fact, and a kind declared in one module (tests/dummy_kind.py), found by the registry's discovery,
is planned, exported, evaluated, labelled and stored with no other file edited (docs/architecture.md,
*Add a model kind*: four files)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpufinops.jobs import eval_score
from gpufinops.jobs.export import placement
from gpufinops.jobs.export import plan as export_plan
from gpufinops.jobs.export import storage as export_storage
from gpufinops.kernel import labels, providers
from gpufinops.models import carbon_evidence, plans, registry
from gpufinops.models.registry import SELECTED, ModelSpec, NotScored, Ref, Scored
from tests import dummy_kind

ROOT = Path(__file__).resolve().parents[1]
FACTS = tuple(f.name for f in dataclasses.fields(ModelSpec))
# Readers that once named kinds by hand and now read a fact (ends_plan, export, predictor): no kind's
# name may come back into them.
READERS = (
    "models/plans.py",
    "jobs/export/storage.py",
    "jobs/eval_choice.py",
    "jobs/eval_independent.py",
    "jobs/eval_baselines.py",
    "jobs/demo_summary.py",
    "models/carbon_evidence.py",
    "models/token_costs.py",
)


def test_no_fact_has_a_silent_default() -> None:
    defaulted = [f.name for f in dataclasses.fields(ModelSpec) if f.default is not dataclasses.MISSING]
    assert defaulted == [] and {f.default_factory for f in dataclasses.fields(ModelSpec)} == {dataclasses.MISSING}


@pytest.mark.parametrize("spec", registry.MODELS, ids=lambda s: s.kind)
def test_every_registered_kind_declares_every_fact_and_each_is_known(spec: ModelSpec) -> None:
    assert spec.version.startswith(f"{spec.kind}/") and spec.summary
    assert spec.label and not labels.is_code(spec.label)
    assert spec.family in plans.ORDER
    assert spec.ends_plan == () or (spec.family == "usage" and set(spec.ends_plan) <= set(labels.PATTERNS))
    assert set(spec.plan_per_team_on) <= set(providers.PROVIDERS)
    assert spec.export in export_plan.ACTIONS
    assert (spec.export in export_storage.WRITERS) == (spec.family == "storage")
    if isinstance(spec.truth, Scored):
        assert spec.truth.truth in eval_score.TRUTHS
    else:
        assert isinstance(spec.truth, NotScored) and len(spec.truth.reason) > 20
    assert spec.predictor in (None, SELECTED) or spec.predictor in spec.keys()
    if spec.predictor is not None:
        assert spec.family == "rightsize" and spec.shipped_predictor()
    assert spec.carbon in registry.CARBON
    for ref in (spec.load, spec.recommend, spec.settings):
        if isinstance(ref, Ref):
            assert callable(ref.resolve()), ref.path  # a typo in a module or name fails here, not at 03:00
    assert plans.family(spec.kind) == spec.family
    assert export_plan.action(spec.kind) is export_plan.ACTIONS[spec.export]


def test_the_registry_is_what_discovery_finds_in_each_spec_s_order() -> None:
    """No list of kinds: the built-in ones are the modules under models/ declaring MODEL_KINDS, one spec
    module per kind, ordered by their `order` (distinct), which is the order people read them in."""
    files = sorted(p.stem for p in (ROOT / "models" / "kinds").glob("*.py") if p.stem != "__init__")
    assert registry.spec_modules() == tuple(f"gpufinops.models.kinds.{stem}" for stem in files)
    assert sorted(s.kind for s in registry.BUILTIN) == files  # one spec module per kind, named for it
    assert registry.BUILTIN == registry.MODELS == registry.discover()
    assert registry.KINDS == tuple(s.kind for s in sorted(registry.BUILTIN, key=lambda s: s.order))  # read order
    assert len({s.order for s in registry.MODELS}) == len(registry.MODELS)
    assert registry.predictor_kinds() == ("gpu_type", "quantization")
    twice = dataclasses.replace(dummy_kind.SPEC, order=registry.spec("gpu_type").order)
    with pytest.raises(ValueError, match="order 30 is gpu_type's already"):
        registry.register(twice)
    assert dummy_kind.KIND not in registry.KINDS


def test_the_lower_layers_tables_are_the_registrys_exactly() -> None:
    """kernel/labels.py sits below the models (it cannot import them) and holds no kind's label: the
    registry hands them down. The storage export and the carbon evidence carry exactly the kinds whose
    specs say so."""
    assert labels.KINDS == {s.kind: s.label for s in registry.MODELS}
    assert set(export_storage.WRITERS) == set(placement.STORAGE_ACTIONS)
    assert carbon_evidence.REMOVES_GPU_HOURS == {s.kind for s in registry.MODELS if s.carbon != "pricing_only"}
    assert carbon_evidence.PRICING_ONLY == {s.kind for s in registry.MODELS if s.carbon == "pricing_only"}
    assert set(registry.KINDS) == {s.kind for s in registry.MODELS} and len(registry.KINDS) == len(registry.MODELS)


def test_the_label_table_has_no_kind_until_the_registry_names_them() -> None:
    code = (
        "from gpufinops.kernel import labels\n"
        "assert labels.KINDS == {}\n"
        "for call in (lambda: labels.label('idle_gpu', 'kind'), lambda: labels.label('open')):\n"
        "    try:\n"
        "        call()\n"
        "    except labels.KindsNotLoaded:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('labelled before the registry named the kinds')\n"
        "import gpufinops.jobs\n"
        "assert labels.label('gpu_count', 'kind') == 'Fewer GPUs' and labels.label('open') == 'Open'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_no_reader_names_a_kind() -> None:
    """A line comparing or listing kinds (``kind == "x"``, ``KINDS = ("x", …)``) in a reader of the facts."""
    named = {
        (path, kind)
        for path in READERS
        for kind in registry.KINDS
        if re.search(rf'kind\w*\W.*"{kind}"', (ROOT / path).read_text(), re.IGNORECASE)
    }
    assert named == set()


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
    for fact, bad in (
        ("family", "buy"),
        ("carbon", "some"),
        ("truth", "planted"),
        ("label", ""),
        ("order", 0),
        ("ends_plan", "always_idle"),
        ("plan_per_team_on", ["onprem"]),
        ("predictor", ""),
    ):
        with pytest.raises(ValueError, match=fact if fact != "truth" else "Scored"):
            ModelSpec(**{**whole, fact: bad})


def test_a_kind_the_registry_does_not_hold_is_refused_by_every_reader() -> None:
    with pytest.raises(ValueError, match="unknown recommendation kind 'gpu_size'"):
        plans.family("gpu_size")
    with pytest.raises(ValueError, match="unknown recommendation kind"):
        plans.reconcile([dummy_kind.finding("i-1", "1000", "10")])  # not registered here
    with pytest.raises(ValueError, match="unknown recommendation kind"):
        export_plan.action("gpu_size")
    stored = {"id": "x", "kind": "gpu_size", "plan": "primary", "status": "open", "monthly_savings_usd": 1}
    with pytest.raises(ValueError, match="unknown recommendation kind 'gpu_size'"):
        export_storage.document([stored])  # neither carried nor skipped: refused
    with pytest.raises(ValueError, match="not scored by evaluate"):
        eval_score.truth_rule("storage_orphan")
    with pytest.raises(ValueError, match="built-in"):
        registry.unregister("idle_gpu")


def test_reading_the_facts_imports_no_model_library() -> None:
    code = (
        "import sys; from gpufinops.models import plans, registry; from gpufinops.kernel import labels; "
        "assert 'polars' not in sys.modules and 'gpufinops.models.gpu_type' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_registry_finds_a_new_spec_module_where_it_lies(tmp_path) -> None:
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "acme_kind.py").write_text(Path(dummy_kind.__file__).read_text())
    (tmp_path / "acme" / "helpers.py").write_text("X = 1\n")
    assert registry.spec_modules(tmp_path, "pkg") == ("pkg.acme.acme_kind",)


@pytest.fixture
def dummy():
    """The dummy registered as a plug-in's loader does: what discovery finds under its folder (tests/),
    no list, no label line."""
    found = registry.discover(ROOT / "tests", "tests")
    assert [s.kind for s in found] == [dummy_kind.KIND]
    registry.register(*found)
    try:
        yield dummy_kind
    finally:
        registry.unregister(dummy_kind.KIND)


def test_a_kind_declared_in_one_module_is_planned_exported_evaluated_and_labelled(dummy) -> None:
    from tests.test_plans import rec

    assert (
        registry.KINDS == (*(s.kind for s in registry.BUILTIN), dummy.KIND)
        and registry.VERSIONS[dummy.KIND] == f"{dummy.KIND}/1"
    )
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
    # the storage export: not a storage action, so not carried (by its spec, not a list)
    assert export_storage.document(
        [{**dummy.finding("i-9", "1000", "100").to_dict(), "plan": "primary", "status": "open"}]
    ) == {
        "s3_lifecycle": {},
        "gcs_lifecycle": {},
        "azure_lifecycle": {},
        "modify_volume": [],
        "commands": [],
        "monthly_savings_usd": 0.0,
        "left_out": [],
    }
    # evaluation: scored, its truth priced by its spec's rule; no throughput predictor to choose
    assert dummy.KIND in registry.scored_kinds() and dummy.KIND not in registry.predictor_kinds()
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
    # the command line's --kind offers it, last (its order)
    from tests.test_model_registry import _kind_action

    assert list(_kind_action().choices)[-1] == dummy.KIND


def test_unregistering_takes_the_kind_out_of_every_reader(dummy) -> None:
    registry.unregister(dummy.KIND)
    try:
        assert dummy.KIND not in registry.KINDS and dummy.KIND not in labels.KINDS
        assert labels.label(dummy.KIND, "kind") == "Dummy reserved"  # back to its words: no kind of ours
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


def test_the_baselines_and_demo_summary_read_a_registered_kind_s_facts(dummy, tmp_path) -> None:
    """No reader keeps its own list of kinds: the evaluation scores a kind beside its action's baseline (the
    dummy commits, so the commitment baseline), and the demo summary's idle GPUs are the kinds whose change
    frees idle hours."""
    from gpufinops.jobs import demo_summary, eval_baselines
    from gpufinops.warehouse import db

    with db.writer(tmp_path / "wh.duckdb") as con:
        baselines = eval_baselines.all_baselines(con)
    assert list(baselines[dummy.KIND]) == [eval_baselines.BY_ACTION[dummy.SPEC.export][0]]
    assert set(baselines) == set(registry.scored_kinds())  # every scored kind has a baseline, none other
    assert demo_summary.frees_idle_hours() == {s.kind for s in registry.MODELS if s.carbon == registry.IDLE_HOURS}
    idle_like = dataclasses.replace(
        dummy.SPEC, kind="dummy_idle", version="dummy_idle/1", order=1001, carbon="idle_hours"
    )
    registry.register(idle_like)
    try:
        assert "dummy_idle" in demo_summary.frees_idle_hours()
    finally:
        registry.unregister("dummy_idle")
