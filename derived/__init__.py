"""The derived tables: what every load recomputes from the facts it changed (docs/architecture.md, *derived/*).

Each table is one :class:`~gpufinops.derived.spec.DerivedSpec` in :mod:`gpufinops.derived.registry`; the ingest
runner captures and applies them in the registry's order, inside the load's own transaction."""
