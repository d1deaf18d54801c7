"""The warehouse's migrations, one frozen module per schema version.

Each ``vNNN_<what>.py`` holds the statements its version ran when it shipped, as literal SQL (never
generated from today's schemas), so an old warehouse is upgraded by exactly what a fresh one was built
with. A schema change is a new module at the end of ``_MODULES``; a shipped one is never edited
(tests/test_migrations.py: every old version, and real warehouse files made by old commits, migrated to
head equal a fresh warehouse; a fresh warehouse has the columns warehouse/schema.py declares).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from gpufinops.warehouse.migrations import (
    v001_foundation,
    v002_spot_interruption_bands,
    v003_gpu_processes,
    v004_prices_deliveries_jobs,
    v005_cost_daily,
    v006_attribution_hints,
    v007_alerts,
    v008_plans_onprem_comparison,
    v009_ingest_rejects,
    v010_gpu_allocation,
    v011_repair_v5_v6,
    v012_serving_metrics,
    v013_carbon,
    v014_storage,
    v015_stored_fits,
    v016_run_freshness,
    v017_serving_costs,
    v018_provider_columns,
    v019_profiling_fields,
)

_MODULES: tuple[ModuleType, ...] = (
    v001_foundation,
    v002_spot_interruption_bands,
    v003_gpu_processes,
    v004_prices_deliveries_jobs,
    v005_cost_daily,
    v006_attribution_hints,
    v007_alerts,
    v008_plans_onprem_comparison,
    v009_ingest_rejects,
    v010_gpu_allocation,
    v011_repair_v5_v6,
    v012_serving_metrics,
    v013_carbon,
    v014_storage,
    v015_stored_fits,
    v016_run_freshness,
    v017_serving_costs,
    v018_provider_columns,
    v019_profiling_fields,
)


def _statements(module: ModuleType) -> Callable[[], list[str]]:
    def statements() -> list[str]:
        return list(module.STATEMENTS)

    statements.__name__ = f"migration_{module.VERSION}"
    return statements


# Index i migrates version i to i + 1: each entry returns its version's statements.
MIGRATIONS: list[Callable[[], list[str]]] = [_statements(m) for m in _MODULES]
SCHEMA_VERSION = len(MIGRATIONS)
assert [m.VERSION for m in _MODULES] == list(range(1, SCHEMA_VERSION + 1)), "migrations out of order"
