"""Fewer GPUs: resources holding more GPUs than they keep busy (``models/gpu_count.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.RIGHTSIZING,
        kind="gpu_count",
        version="gpu_count/2",
        order=20,
        load=Ref(_M + "gpu_count:load"),
        recommend=Ref(_M + "gpu_count:findings"),
        summary="resources holding more GPUs than they keep busy",
        label="Fewer GPUs",
        truth=Scored("smaller_type"),
        predictor=None,
    ),
)
