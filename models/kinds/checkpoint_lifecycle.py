"""Checkpoint lifecycle: checkpoint prefixes whose old objects are not read (``models/checkpoint_lifecycle.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, Ref
from gpufinops.models.kinds.storage_tier import STORAGE_UNSCORED

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="checkpoint_lifecycle",
        version="checkpoint_lifecycle/1",
        order=100,
        settings=Ref(_M + "storage_tier:StorageSettings"),
        load=Ref(_M + "checkpoint_lifecycle:load"),
        recommend=Ref(_M + "checkpoint_lifecycle:findings"),
        summary="checkpoint prefixes whose old objects are not read: a lifecycle rule",
        label="Checkpoint lifecycle",
        family="storage",
        ends_plan=(),
        plan_per_team_on=(),
        export="lifecycle_rule",
        truth=STORAGE_UNSCORED,
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("storage",),
    ),
)
