"""Training whose engine keeps dropping to idle between bursts while the host feeds it (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import GPU_HOURS, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="input_bound",
        version="input_bound/1",
        order=112,
        settings=None,
        load=Ref(_M + "busy_profile:load"),
        recommend=Ref(_M + "busy_kinds:input_bound"),
        summary="Training whose engine keeps dropping to idle between bursts while the host feeds it",
        label="Input-bound training",
        family="usage",
        needs=("bill", "utilisation"),
        ends_plan=(),
        plan_per_team_on=(),
        export="tune_workload",
        truth=NotScored("the busy-waste evaluation (jobs/eval_busy.py) scores it on its own job phases"),
        predictor=None,
        carbon=GPU_HOURS,
    ),
)
