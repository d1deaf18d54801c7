"""Run every model of the registry over the warehouse and store what they recommend and what they withheld."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

import duckdb

from gpufinops.models import calibration, carbon_evidence, plans, registry, run_reads, token_costs
from gpufinops.models.features import ModelSettings
from gpufinops.models.recommendation import Recommendation, Withheld
from gpufinops.warehouse import recommendation_store


@dataclass
class ModelRun:
    recommendations: list[Recommendation] = field(default_factory=list)  # reconciled: one plan per resource
    withheld: list[Withheld] = field(default_factory=list)
    comparison: list[Recommendation] = field(default_factory=list)  # on-prem verdicts: facts, not recommendations

    @property
    def monthly_savings_usd(self) -> Decimal:
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
    for spec in registry.MODELS:
        spec.configure(section)
    known = registry.setting_keys()
    unknown = sorted(set(section or {}) - known)
    if unknown:
        raise ValueError(f"[models] {unknown[0]}: unknown key (known: {', '.join(sorted(known))})")


def parse_settings(section: dict | None) -> ModelSettings:
    """The whole `[models]` section parsed once (:func:`validate_settings`'s checks): each model's settings."""
    validate_settings(section)
    return ModelSettings(
        tuple((spec.settings_class(), spec.configure(section)) for spec in registry.MODELS if spec.settings)
    )


def analyse(
    con: duckdb.DuckDBPyConnection,
    kinds: list[str] | None = None,
    settings: ModelSettings | dict | None = None,
    on_model: Callable[[str, bool], object] | None = None,
) -> ModelRun:
    """Run every model, reconcile their candidates into one plan per resource, store the plans, the
    withheld findings and the on-prem comparison; return what ``kinds`` (default: all) found.

    Every model runs even when ``kinds`` names one: a plan is about all the candidates on a resource
    (a step is priced on what the primary leaves), so one kind alone cannot be planned. ``settings``
    (the `[models]` config section) configures each model (models/registry.py); ``on_model(kind, done)``
    is called before (``done`` False) and after (True) each model (a progress display)."""
    known = registry.KINDS  # read at the call: a kind registered after import runs too
    chosen = kinds or list(known)
    unknown = [k for k in chosen if k not in known]
    if unknown:
        raise ValueError(f"unknown recommendation kind(s) {', '.join(unknown)} (available: {', '.join(known)})")
    run = ModelRun()
    with run_reads.scope(con):  # what several models read is read once in this run, and dropped after it
        for spec in registry.MODELS:
            if on_model:
                on_model(spec.kind, False)
            found = spec.run(con, settings)
            if on_model:
                on_model(spec.kind, True)
            run.recommendations.extend(calibration.apply(found.recommendations))
            run.withheld.extend(found.withheld)
            run.comparison.extend(found.comparison)
    run.recommendations = plans.reconcile(token_costs.annotate(con, run.recommendations))
    carbon_evidence.annotate(con, run.recommendations)  # evidence.kg_co2e_month_saved (models/carbon_evidence.py)
    recommendation_store.store_recommendations(
        con, run.recommendations, list(known), registry.VERSIONS, withheld=run.withheld, comparison=run.comparison
    )
    if kinds:
        run.recommendations = [r for r in run.recommendations if r.kind in chosen]
        run.withheld = [w for w in run.withheld if w.kind in chosen]
    return run


def run_models(
    con: duckdb.DuckDBPyConnection,
    kinds: list[str] | None = None,
    settings: ModelSettings | dict | None = None,
    on_model: Callable[[str, bool], object] | None = None,
) -> list[Recommendation]:
    """The recommendations of :func:`analyse` (which also stores what was withheld)."""
    return analyse(con, kinds, settings, on_model).recommendations
