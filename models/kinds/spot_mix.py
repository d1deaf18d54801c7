"""Spot mix: the share of an on-demand workload to run on spot (``models/spot_mix.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.PRICE_MIX,
        kind="spot_mix",
        version="spot_mix/1",
        order=60,
        settings=Ref(_M + "spot_mix:SpotMixSettings"),
        load=Ref(_M + "spot_mix:load"),
        recommend=Ref(_M + "spot_mix:findings"),
        summary="the share of an on-demand workload to run on spot",
        label="Spot mix",
        export="spot_share",
    ),
)
