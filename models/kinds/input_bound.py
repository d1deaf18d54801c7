"""Training whose engine keeps dropping to idle between bursts while the host feeds it (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.BUSY_PROFILE,
        kind="input_bound",
        version="input_bound/1",
        order=112,
        recommend=Ref(_M + "busy_kinds:input_bound"),
        summary="Training whose engine keeps dropping to idle between bursts while the host feeds it",
        label="Input-bound training",
        family="usage",
        ends_plan=(),
        export="tune_workload",
    ),
)
