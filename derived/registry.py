"""The derived tables, in the order a load applies them: one ``DerivedSpec`` each (derived/spec.py).

The ingest runner (ingest/core/runner.py) and the ingest job (jobs/ingest_run.py) loop over :func:`specs` and
name no table: a new derived table is one module and one entry here (docs/architecture.md, *Add a derived
table*). A table later in the order may read what an earlier one wrote in the same load: the cost rollup first,
then the GPU-hours' attribution, the shared-GPU chargeback that reads it (and rebuilds the carbon rows of the
same resource-days), the serving pod-hours' costs last.
"""

from __future__ import annotations

import duckdb

from gpufinops.derived import allocation, attribution, carbon, rollups, serving_costs
from gpufinops.derived.spec import Change, DerivedSpec, Touched

# ---- the cost rollup: cost_daily, rebuilt for the loading source ---------------------------------------


def _rollup_apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    if "cost_line_items" in touched.tables:
        rollups.refresh_cost_daily(con, touched.source)  # the daily rollup moves with the line items
    return 0


# ---- the GPU-hours' attribution (resource_id, team of the metrics), either side arriving first ---------


def _attribution(touched: Touched) -> attribution.Touched:
    return touched.note("attribution", attribution.Touched)


def _attribution_capture(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    notes = _attribution(touched)
    if change.table == "cost_line_items" and change.where is not None:
        notes.cost_sources.add(change.source)  # the resources whose GPU-hours this load may re-attribute
        attribution.capture_cost_ids(con, change.where, change.params)
    elif change.table == "attribution_rules":
        attribution.capture_rule_hosts(con, change.source, notes)
    elif change.table in attribution.ATTRIBUTED_TABLES and change.inserted:
        notes.metric_slices.append((change.table, change.source, change.slice_expr, list(change.slices)))


def _attribution_apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return attribution.apply(con, _attribution(touched))


# ---- the shared-GPU chargeback (gpu_allocation_hourly) and the carbon rows of its resource-days ----------


def _allocation_capture(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    if change.where is None or (change.inserted and change.table != "cost_line_items"):
        return  # the metrics' resource-hours are read after attribution resolved them (allocation.apply)
    allocation.capture(con, change.table, change.where, change.params)  # what the rows pay for / measure


def _allocation_apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return allocation.apply(con, _attribution(touched))  # the [allocation] settings the warehouse stores


def _carbon_apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return 0  # rebuilt by the allocation's apply, for the same resource-days (carbon.recompute)


# ---- each serving pod-hour's cost and energy per model (serving_costs_hourly) ---------------------------


def _serving_capture(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    if change.where is not None:
        serving_costs.capture(con, change.table, change.where, change.params)  # and the days they served in


def _serving_apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return serving_costs.apply(con)  # the days the allocation did not redo


BUILT_IN: tuple[DerivedSpec, ...] = (
    DerivedSpec(
        name="cost_daily",
        follows=("cost_line_items",),
        apply=_rollup_apply,
        doc="cost per UTC day, source, provider, team, service and GPU model",
    ),
    DerivedSpec(
        name="attribution",
        follows=("cost_line_items", "attribution_rules", *attribution.ATTRIBUTED_TABLES),
        capture=_attribution_capture,
        apply=_attribution_apply,
        doc="each GPU-hour's resource_id and team, resolved from its hints, the rules and the bill",
    ),
    DerivedSpec(
        name="gpu_allocation_hourly",
        follows=("cost_line_items", "gpu_metrics_hourly", "gpu_workloads_hourly"),
        capture=_allocation_capture,
        apply=_allocation_apply,
        section="allocation",
        configure=allocation.configure,
        doc="each shared GPU resource-hour's cost divided among what ran on it",
    ),
    DerivedSpec(
        name="carbon_hourly",
        follows=("gpu_allocation_hourly",),
        apply=_carbon_apply,
        section="carbon",
        configure=carbon.configure,
        doc="energy and emissions per allocated GPU-hour",
    ),
    DerivedSpec(
        name="serving_costs_hourly",
        follows=("serving_metrics_hourly",),
        capture=_serving_capture,
        apply=_serving_apply,
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
