"""The derived tables, in the order a load applies them: one ``DerivedSpec`` each (derived/spec.py).

The ingest runner (ingest/core/runner.py) and the ingest job (jobs/ingest_run.py) loop over :func:`specs` and
name no table: a new derived table is one module and one entry here (docs/architecture.md, *Add a derived
table*). A table later in the order may read what an earlier one wrote in the same load: the cost rollup first,
then the GPU-hours' attribution, the shared-GPU chargeback that reads it (and rebuilds the carbon rows of the
same resource-days), the serving pod-hours' costs last.
"""

from __future__ import annotations

from gpufinops.derived import allocation, attribution, carbon, rollups, serving_costs
from gpufinops.derived.spec import DerivedSpec

BUILT_IN: tuple[DerivedSpec, ...] = (
    DerivedSpec(
        name="cost_daily",
        follows=("cost_line_items",),
        apply=rollups.apply_load,
        doc="cost per UTC day, source, provider, team, service and GPU model",
    ),
    DerivedSpec(
        name="attribution",
        follows=("cost_line_items", "attribution_rules", *attribution.ATTRIBUTED_TABLES),
        capture=attribution.capture_change,
        apply=attribution.apply_load,
        doc="each GPU-hour's resource_id and team, resolved from its hints, the rules and the bill",
    ),
    DerivedSpec(
        name="gpu_allocation_hourly",
        follows=("cost_line_items", "gpu_metrics_hourly", "gpu_workloads_hourly"),
        capture=allocation.capture_change,
        apply=allocation.apply_load,
        section="allocation",
        configure=allocation.configure,
        doc="each shared GPU resource-hour's cost divided among what ran on it",
    ),
    DerivedSpec(
        name="carbon_hourly",
        follows=("gpu_allocation_hourly",),
        apply=carbon.apply_load,
        section="carbon",
        configure=carbon.configure,
        doc="energy and emissions per allocated GPU-hour",
    ),
    DerivedSpec(
        name="serving_costs_hourly",
        follows=("serving_metrics_hourly",),
        capture=serving_costs.capture_change,
        apply=serving_costs.apply_load,
        section="unit_costs",
        configure=serving_costs.configure,
        doc="each serving pod-hour's GPU cost, tokens and energy per model",
    ),
)

_specs: list[DerivedSpec] = list(BUILT_IN)


def specs() -> tuple[DerivedSpec, ...]:
    """Every derived table, in the order a load applies them."""
    return tuple(_specs)


def register(spec: DerivedSpec) -> DerivedSpec:
    """Add a derived table after the others (a plug-in's, a test's); its name must be new."""
    if any(s.name == spec.name for s in _specs):
        raise ValueError(f"derived table {spec.name}: already registered")
    _specs.append(spec)
    return spec


def unregister(name: str) -> None:
    _specs[:] = [s for s in _specs if s.name != name]


def configured() -> tuple[DerivedSpec, ...]:
    """The tables that declared a config section, in the order their settings are stored: the tables read by
    others last, so that a re-applied table's followers (re-applied with it) already hold their new settings."""
    return tuple(spec for spec in reversed(_specs) if spec.section is not None)
