"""Pods holding GPU memory with the engine idle most of their hours (DCGM profiling) (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.BUSY_PROFILE,
        kind="idle_held",
        version="idle_held/1",
        order=110,
        recommend=Ref(_M + "busy_kinds:idle_held"),
        summary="Pods holding GPU memory with the engine idle most of their hours (DCGM profiling)",
        label="Idle-held GPU",
        family="usage",
        ends_plan=("idle_held",),
        export="release_or_schedule",
    ),
)
