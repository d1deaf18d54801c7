"""Training on tensor-core GPUs with the FP32 pipe busy and the tensor pipe idle (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import GPU_HOURS, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="no_tensor_cores",
        version="no_tensor_cores/1",
        order=113,
        settings=None,
        load=Ref(_M + "busy_profile:load"),
        recommend=Ref(_M + "busy_kinds:no_tensor_cores"),
        summary="Training on tensor-core GPUs with the FP32 pipe busy and the tensor pipe idle",
        label="No tensor cores",
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
