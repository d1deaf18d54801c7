"""A cheaper GPU type of the same count (``models/gpu_type.py``); it picks its throughput predictor per fleet.

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import SELECTED, ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.RIGHTSIZING,
        kind="gpu_type",
        version="gpu_type/2",
        order=30,
        load=Ref(_M + "gpu_type:load"),
        recommend=Ref(_M + "gpu_type:findings"),
        summary="a cheaper GPU of the same count that carries the work",
        label="Cheaper GPU type",
        truth=Scored("cheaper_gpu"),
        predictor=SELECTED,
    ),
)
