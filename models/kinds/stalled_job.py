"""Jobs that did steady work, then held their GPUs at zero activity past a stated limit (``models/busy_kinds.py``; the rules: ``models/busy_rules.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import GPU_HOURS, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="stalled_job",
        version="stalled_job/1",
        order=111,
        settings=None,
        load=Ref(_M + "busy_profile:load"),
        recommend=Ref(_M + "busy_kinds:stalled_job"),
        summary="Jobs that did steady work, then held their GPUs at zero activity past a stated limit",
        label="Stalled job",
        family="usage",
        needs=("bill", "utilisation"),
        ends_plan=("stalled_job",),
        plan_per_team_on=(),
        export="release_or_schedule",
        truth=NotScored("the busy-waste evaluation (jobs/eval_busy.py) scores it on its own job phases"),
        predictor=None,
        carbon=GPU_HOURS,
    ),
)
