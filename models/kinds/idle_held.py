"""Pods holding GPU memory with the engine idle most of their hours (DCGM profiling) (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import GPU_HOURS, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="idle_held",
        version="idle_held/1",
        order=110,
        settings=None,
        load=Ref(_M + "busy_profile:load"),
        recommend=Ref(_M + "busy_kinds:idle_held"),
        summary="Pods holding GPU memory with the engine idle most of their hours (DCGM profiling)",
        label="Idle-held GPU",
        family="usage",
        needs=("bill", "utilisation"),
        ends_plan=("idle_held",),
        plan_per_team_on=(),
        export="release_or_schedule",
        truth=NotScored("the busy-waste evaluation (jobs/eval_busy.py) scores it on its own job phases"),
        predictor=None,
        carbon=GPU_HOURS,
    ),
)
