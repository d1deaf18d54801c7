"""Orphaned storage: unattached volumes, snapshots past retention whose volume is gone
(``models/storage_orphan.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, Ref
from gpufinops.models.kinds.storage_tier import STORAGE_UNSCORED

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="storage_orphan",
        version="storage_orphan/1",
        order=90,
        settings=Ref(_M + "storage_tier:StorageSettings"),
        load=Ref(_M + "storage_orphan:load"),
        recommend=Ref(_M + "storage_orphan:findings"),
        summary="volumes GPU work left unattached; snapshots past retention whose volume is gone",
        label="Orphaned storage",
        family="storage",
        ends_plan=(),
        plan_per_team_on=(),
        export="delete_orphan",
        truth=STORAGE_UNSCORED,
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("storage",),
    ),
)
