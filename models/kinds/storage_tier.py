"""Storage tier: provisioned-IOPS volumes whose measured IOPS fit a cheaper tier (``models/storage_tier.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

# The storage kinds' one reason for not being scored (storage_orphan and checkpoint_lifecycle share it).
STORAGE_UNSCORED = NotScored(
    "the generators plant GPU waste only; the demo's storage plants (simulator/demo_storage.py) are "
    "checked by tests/test_storage_models.py"
)

MODEL_KINDS = (
    ModelSpec(
        kind="storage_tier",
        version="storage_tier/1",
        order=80,
        settings=Ref(_M + "storage_tier:StorageSettings"),
        load=Ref(_M + "storage_tier:load"),
        recommend=Ref(_M + "storage_tier:findings"),
        summary="provisioned-IOPS volumes of GPU work whose measured IOPS fit gp3 (PD-SSD: pd-balanced)",
        label="Storage tier",
        family="storage",
        ends_plan=(),
        plan_per_team_on=(),
        export="retier_volume",
        truth=STORAGE_UNSCORED,
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("storage",),
    ),
)
