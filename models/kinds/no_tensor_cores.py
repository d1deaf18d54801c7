"""Training on tensor-core GPUs with the FP32 pipe busy and the tensor pipe idle (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.BUSY_PROFILE,
        kind="no_tensor_cores",
        version="no_tensor_cores/1",
        order=113,
        recommend=Ref(_M + "busy_kinds:no_tensor_cores"),
        summary="Training on tensor-core GPUs with the FP32 pipe busy and the tensor pipe idle",
        label="No tensor cores",
        family="rightsize",
        ends_plan=(),
        export="tune_workload",
    ),
)
