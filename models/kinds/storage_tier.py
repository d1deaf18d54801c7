"""Storage tier: provisioned-IOPS volumes whose measured IOPS fit a cheaper tier (``models/storage_tier.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.STORAGE,
        kind="storage_tier",
        version="storage_tier/1",
        order=80,
        load=Ref(_M + "storage_tier:load"),
        recommend=Ref(_M + "storage_tier:findings"),
        summary="provisioned-IOPS volumes of GPU work whose measured IOPS fit gp3 (PD-SSD: pd-balanced)",
        label="Storage tier",
        export="retier_volume",
    ),
)
