"""Jobs that did steady work, then held their GPUs at zero activity past a stated limit (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.BUSY_PROFILE,
        kind="stalled_job",
        version="stalled_job/1",
        order=111,
        recommend=Ref(_M + "busy_kinds:stalled_job"),
        summary="Jobs that did steady work, then held their GPUs at zero activity past a stated limit",
        label="Stalled job",
        family="usage",
        ends_plan=("stalled_job",),
        export="release_or_schedule",
    ),
)
