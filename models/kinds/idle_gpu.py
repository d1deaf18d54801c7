"""Idle GPUs: GPU-hours billed while every GPU idles, and pods holding idle GPUs (``models/idle.py``).

Releasing an always-idle resource ends its plan: nothing is left to rightsize or buy differently.

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import IDLE_HOURS, ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="idle_gpu",
        version="idle_gpu/2",
        order=10,
        settings=None,
        load=Ref(_M + "idle:load"),
        recommend=Ref(_M + "idle:findings"),
        summary="GPU-hours billed while every GPU idles; pods holding idle GPUs (allocated_idle)",
        label="Idle GPU",
        family="usage",
        ends_plan=("always_idle",),
        plan_per_team_on=(),
        export="release_or_schedule",
        truth=Scored("idle_cost"),
        predictor=None,
        carbon=IDLE_HOURS,
        needs=("bill", "utilisation"),
    ),
)
