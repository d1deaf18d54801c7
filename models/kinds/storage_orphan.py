"""Orphaned storage: unattached volumes, snapshots past retention whose volume is gone
(``models/storage_orphan.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.STORAGE,
        kind="storage_orphan",
        version="storage_orphan/1",
        order=90,
        load=Ref(_M + "storage_orphan:load"),
        recommend=Ref(_M + "storage_orphan:findings"),
        summary="volumes GPU work left unattached; snapshots past retention whose volume is gone",
        label="Orphaned storage",
        export="delete_orphan",
    ),
)
