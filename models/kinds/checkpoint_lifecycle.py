"""Checkpoint lifecycle: checkpoint prefixes whose old objects are not read (``models/checkpoint_lifecycle.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.STORAGE,
        kind="checkpoint_lifecycle",
        version="checkpoint_lifecycle/1",
        order=100,
        load=Ref(_M + "checkpoint_lifecycle:load"),
        recommend=Ref(_M + "checkpoint_lifecycle:findings"),
        summary="checkpoint prefixes whose old objects are not read: a lifecycle rule",
        label="Checkpoint lifecycle",
        export="lifecycle_rule",
    ),
)
