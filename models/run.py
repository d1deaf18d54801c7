"""Run every model over the warehouse and store what they recommend and what they withheld."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import duckdb

from models import commitment, gpu_count, gpu_type, idle, onprem_vs_cloud, plans, quantization, spot_mix
from models.recommendation import Recommendation, Withheld
from warehouse import allocation_queries, queries, store

# kind -> analyse(con[, settings]) -> (recommendations, withheld)
MODELS = {"idle_gpu": lambda con: idle.analyse(queries.gpu_resource_hours(con),
                                                workload_hours=allocation_queries.workload_hours(con)),
          # rightsizing: each also takes the `[models]` config section (models/features.py)
          "gpu_count": gpu_count.analyse, "gpu_type": gpu_type.analyse, "quantization": quantization.analyse,
          "onprem_vs_cloud": onprem_vs_cloud.analyse_warehouse,
          "spot_mix": spot_mix.recommend, "commitment": commitment.recommend}

# Stored with each finding; bump a kind's version when its rules or fitted model change meaning.
MODEL_VERSIONS = {"idle_gpu": "idle_gpu/2", "gpu_count": "gpu_count/2", "gpu_type": "gpu_type/2",
                  "quantization": "quantization/2", "onprem_vs_cloud": "onprem_vs_cloud/2",
                  "spot_mix": "spot_mix/1", "commitment": "commitment/1"}


SETTINGS = ("models.features:RightsizingSettings", "models.spot_mix:SpotMixSettings",
            "models.commitment:CommitmentSettings", "models.onprem_vs_cloud:OnpremSettings")


@dataclass
class ModelRun:
    recommendations: list[Recommendation] = field(default_factory=list)   # reconciled: one plan per resource
    withheld: list[Withheld] = field(default_factory=list)
    comparison: list[Recommendation] = field(default_factory=list)  # on-prem verdicts: facts, not recommendations

    @property
    def monthly_savings_usd(self):
        """The one total (models.plans.total): primary and step objects only."""
        return plans.total(self.recommendations)

    def withheld_counts(self) -> dict[str, int]:
        """reason -> how many resources a model withheld for it, largest first."""
        counts: dict[str, int] = {}
        for w in self.withheld:
            counts[w.reason] = counts.get(w.reason, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def validate_settings(section: dict | None) -> None:
    """Check the whole `[models]` section up front: every model's keys, and no key no model reads
    (a typo would otherwise be ignored silently). Raises ValueError naming the key."""
    import dataclasses
    import importlib

    known: set[str] = set()
    for path in SETTINGS:
        module, name = path.split(":")
        cls = getattr(importlib.import_module(module), name)
        cls.from_config(section)
        known |= {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(section or {}) - known)
    if unknown:
        raise ValueError(f"[models] {unknown[0]}: unknown key (known: {', '.join(sorted(known))})")


def analyse(con: duckdb.DuckDBPyConnection, kinds: list[str] | None = None,
            settings: dict | None = None, on_model=None) -> ModelRun:
    """Run every model, reconcile their candidates into one plan per resource, store the plans, the
    withheld findings and the on-prem comparison; return what ``kinds`` (default: all) found.

    Every model runs even when ``kinds`` names one: a plan is about all the candidates on a resource
    (a step is priced on what the primary leaves), so one kind alone cannot be planned. ``settings``
    (the `[models]` config section) goes to the models that take it; ``on_model(kind, done)`` is called
    before (``done`` False) and after (True) each model (a progress display)."""
    chosen = kinds or list(MODELS)
    unknown = [k for k in chosen if k not in MODELS]
    if unknown:
        raise ValueError(f"unknown recommendation kind(s) {', '.join(unknown)} (available: {', '.join(MODELS)})")
    run = ModelRun()
    for kind, model in MODELS.items():
        takes_settings = settings is not None and len(inspect.signature(model).parameters) > 1
        if on_model:
            on_model(kind, False)
        found = model(con, settings) if takes_settings else model(con)
        if on_model:
            on_model(kind, True)
        run.recommendations.extend(found[0])
        run.withheld.extend(found[1])
        if len(found) > 2:
            run.comparison.extend(found[2])
    run.recommendations = plans.reconcile(run.recommendations)
    store.store_recommendations(con, run.recommendations, list(MODELS), MODEL_VERSIONS, withheld=run.withheld,
                                comparison=run.comparison)
    if kinds:
        run.recommendations = [r for r in run.recommendations if r.kind in chosen]
        run.withheld = [w for w in run.withheld if w.kind in chosen]
    return run


def run_models(con: duckdb.DuckDBPyConnection, kinds: list[str] | None = None,
               settings: dict | None = None, on_model=None) -> list[Recommendation]:
    """The recommendations of :func:`analyse` (which also stores what was withheld)."""
    return analyse(con, kinds, settings, on_model).recommendations
