"""Commitment: Savings Plans / CUD coverage of the steady baseline (``models/commitment.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models import kind_facts
from gpufinops.models.kind_spec import ModelSpec, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        **kind_facts.PRICE_MIX,
        kind="commitment",
        version="commitment/1",
        order=70,
        settings=Ref(_M + "commitment:CommitmentSettings"),
        load=Ref(_M + "commitment:load"),
        recommend=Ref(_M + "commitment:findings"),
        summary="Savings Plans / CUD coverage of the steady baseline",
        label="Commitment",
        export="commit",
    ),
)
