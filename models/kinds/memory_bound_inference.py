"""Serving pods whose DRAM is saturated while the tensor pipe waits (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.BUSY_PROFILE,
        kind="memory_bound_inference",
        version="memory_bound_inference/1",
        order=114,
        recommend=Ref(_M + "busy_kinds:memory_bound_inference"),
        summary="Serving pods whose DRAM is saturated while the tensor pipe waits",
        label="Memory-bound inference",
        family="rightsize",
        ends_plan=(),
        export="tune_workload",
    ),
)
