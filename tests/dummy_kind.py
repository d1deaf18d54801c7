"""A model kind declared in this one spec module, the way a new kind is added (docs/architecture.md, *Add a
model kind*): its spec holds every fact, and nothing else in the product names it. The registry's discovery
finds ``MODEL_KINDS`` here (tests/test_model_kinds.py registers what it finds under tests/, and copies this
file into a package of its own to show it is found where it lies); the plans, the exports, the evaluation,
the labels and a stored run then pick it up."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import duckdb

from gpufinops.models.recommendation import Findings, Recommendation
from gpufinops.models.registry import ModelSpec, Scored

KIND = "dummy_reserved"


@dataclass(frozen=True)
class DummyInputs:
    resources: tuple[tuple[str, str], ...]  # (resource_id, monthly cost)


def load(con: duckdb.DuckDBPyConnection, _settings: None = None) -> DummyInputs:
    return DummyInputs(tuple(con.execute("SELECT 'i-dummy', '1000'").fetchall()))


def finding(resource_id: str, cost: str, savings: str) -> Recommendation:
    return Recommendation(
        id=f"{KIND}-{resource_id}",
        kind=KIND,
        team="nlp",
        provider="aws",
        resource_id=resource_id,
        workload=None,
        current={"monthly_cost_usd": Decimal(cost), "pricing": "on_demand"},
        proposed={"action": "reserve it", "pricing": "committed"},
        monthly_savings_usd=Decimal(savings),
        confidence=0.9,
        risk="",
        evidence={},
    )


def recommend(inputs: DummyInputs, _settings: None = None) -> Findings:
    return Findings([finding(rid, cost, "100") for rid, cost in inputs.resources])


SPEC = ModelSpec(
    kind=KIND,
    version=f"{KIND}/1",
    order=1000,  # after the built-in kinds
    settings=None,
    load=load,
    recommend=recommend,
    summary="a reservation of each resource (a test's kind)",
    label="Dummy reservation",
    family="purchase",
    ends_plan=(),
    plan_per_team_on=(),
    export="commit",
    truth=Scored("generator_priced"),
    predictor=None,
    carbon="pricing_only",
    needs=("bill",),
)
MODEL_KINDS = (SPEC,)
