"""Spot mix: the share of an on-demand workload to run on spot (``models/spot_mix.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, Ref, Scored

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="spot_mix",
        version="spot_mix/1",
        order=60,
        settings=Ref(_M + "spot_mix:SpotMixSettings"),
        load=Ref(_M + "spot_mix:load"),
        recommend=Ref(_M + "spot_mix:findings"),
        summary="the share of an on-demand workload to run on spot",
        label="Spot mix",
        family="purchase",
        ends_plan=(),
        plan_per_team_on=(),
        export="spot_share",
        truth=Scored("generator_priced"),
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("bill", "prices"),
    ),
)
