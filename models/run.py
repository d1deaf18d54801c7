"""Run every model over the warehouse and store what they recommend."""

from __future__ import annotations

import duckdb

from models import idle
from models.recommendation import Recommendation
from warehouse import queries, store

MODELS = {"idle_gpu": lambda con: idle.recommend(queries.gpu_resource_hours(con))}

# Stored with each finding; bump a kind's version when its rules or fitted model change meaning.
MODEL_VERSIONS = {"idle_gpu": "idle_gpu/1"}


def run_models(con: duckdb.DuckDBPyConnection, kinds: list[str] | None = None) -> list[Recommendation]:
    """Run the chosen models (default: all), store their recommendations, return them."""
    chosen = kinds or list(MODELS)
    unknown = [k for k in chosen if k not in MODELS]
    if unknown:
        raise ValueError(f"unknown recommendation kind(s) {', '.join(unknown)} (available: {', '.join(MODELS)})")
    recs: list[Recommendation] = []
    for kind in chosen:
        recs.extend(MODELS[kind](con))
    store.store_recommendations(con, recs, chosen, MODEL_VERSIONS)
    return recs
