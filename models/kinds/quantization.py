"""Quantization: FP32 inference that fits fewer or cheaper GPUs at a lower precision (``models/quantization.py``);
its throughput predictor is the ``quantization_predictor`` setting.

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.RIGHTSIZING,
        kind="quantization",
        version="quantization/2",
        order=40,
        load=Ref(_M + "gpu_type:load"),
        recommend=Ref(_M + "quantization:findings"),
        summary="FP32 inference that fits fewer or cheaper GPUs at a lower precision",
        label="Quantization",
        truth=Scored("lower_precision"),
        predictor="quantization_predictor",
    ),
)
