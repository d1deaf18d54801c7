"""Serving pods whose DRAM is saturated while the tensor pipe waits (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import GPU_HOURS, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="memory_bound_inference",
        version="memory_bound_inference/1",
        order=114,
        settings=None,
        load=Ref(_M + "busy_profile:load"),
        recommend=Ref(_M + "busy_kinds:memory_bound_inference"),
        summary="Serving pods whose DRAM is saturated while the tensor pipe waits",
        label="Memory-bound inference",
        family="rightsize",
        needs=("bill", "utilisation"),
        ends_plan=(),
        plan_per_team_on=(),
        export="tune_workload",
        truth=NotScored("the busy-waste evaluation (jobs/eval_busy.py) scores it on its own job phases"),
        predictor=None,
        carbon=GPU_HOURS,
    ),
)
