"""Commitment: Savings Plans / CUD coverage of the steady baseline (``models/commitment.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="commitment",
        version="commitment/1",
        order=70,
        settings=Ref(_M + "commitment:CommitmentSettings"),
        load=Ref(_M + "commitment:load"),
        recommend=Ref(_M + "commitment:findings"),
        summary="Savings Plans / CUD coverage of the steady baseline",
        label="Commitment",
        family="purchase",
        ends_plan=(),
        plan_per_team_on=(),
        export="commit",
        truth=Scored("generator_priced"),
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("bill", "prices"),
    ),
)
