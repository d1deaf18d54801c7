"""A model kind declared in this one module, the way a new kind is added (docs/architecture.md, *Add a
model kind*): its spec holds every fact, and nothing else in the product names it. tests/test_model_kinds.py
registers it and checks that the plans, the exports, the evaluation and the labels pick it up."""

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
    settings=None,
    load=load,
    recommend=recommend,
    summary="a reservation of each resource (a test's kind)",
    label="Dummy reservation",
    family="purchase",
    export="commit",
    truth=Scored("generator_priced"),
    carbon="pricing_only",
)
