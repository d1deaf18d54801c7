"""Who used the GPUs and what it cost and emitted: the attribution rules, the GPU cost divided among
what ran on it, the energy and emissions on top of that division, and the settings each load computes them with.

Written by every load (``derived/attribution.py``, ``derived/allocation.py``, ``derived/carbon.py``).
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_groups import (
    KUBERNETES_WORKLOAD,
    POD,
    SERVING_COUNTERS,
    SERVING_KEY,
    settings_schema,
)
from gpufinops.warehouse.column_types import DECIMAL, UTC_TS

# v6: the attribution rules of each source (a metrics source's resource_map and namespace_teams, an
# on-prem source's host_teams), kept in the warehouse so that every load resolves with them.
ATTRIBUTION_RULES = pa.schema(
    [
        ("source", pa.string()),
        ("kind", pa.string()),
        ("key", pa.string()),
        ("value", pa.string()),
    ]
)

# v10: the GPU part of each billed resource-hour divided among what ran on it (derived/allocation.py);
# the rows of a (resource_id, hour) sum exactly to the EffectiveCost of its GPU usage lines.
GPU_ALLOCATION_HOURLY = pa.schema(
    [
        ("hour", UTC_TS),
        ("resource_id", pa.string()),
        ("provider", pa.string()),
        ("host", pa.string()),
        ("gpu_uuid", pa.string()),
        ("mig_instance", pa.string()),
        *KUBERNETES_WORKLOAD,
        ("process", pa.string()),
        ("team", pa.string()),
        ("share", pa.float64()),  # GPU-hours: the fraction of one GPU for the hour
        ("cost_usd", DECIMAL),
        ("basis", pa.string()),  # whole | mig | timeslice | mps | unallocated
        (
            "method",
            pa.string(),
        ),  # how the share was measured: presence | slices | measured | equal | idle | unmeasured | spread
        ("source", pa.string()),  # the metrics source the workload came from
        ("owner_team", pa.string()),  # the team the bill tags the resource (or on-prem GPU) with
        ("service", pa.string()),  # the resource's ServiceName on the bill
    ]
)

# v10: the [allocation] settings every load allocates with (kept in the warehouse like attribution_rules).
ALLOCATION_SETTINGS = settings_schema()

# v13: energy and emissions per allocated GPU-hour (derived/carbon.py; docs/carbon.md). The rows of a
# (resource_id, hour) sum to the resource's measured energy; hours without a power measurement are
# rows with energy_basis = 'withheld' and NULL energy, never a guess.
CARBON_HOURLY = pa.schema(
    [
        ("hour", UTC_TS),
        ("resource_id", pa.string()),
        ("provider", pa.string()),
        ("region", pa.string()),
        ("gpu_uuid", pa.string()),
        ("mig_instance", pa.string()),
        *POD,
        ("team", pa.string()),
        ("gpu_hours", pa.float64()),  # GPU-hours the row covers (its allocation share)
        ("gpu_kwh", pa.float64()),
        ("node_kwh", pa.float64()),
        ("pue", pa.float64()),
        ("kwh", pa.float64()),  # facility energy: (gpu_kwh + node_kwh) x pue
        ("grid_g_co2e_per_kwh", pa.float64()),
        ("kg_co2e", pa.float64()),
        ("embodied_kg_co2e", pa.float64()),  # optional ([carbon] embodied_kg_co2e_per_gpu_hour), not in kg_co2e
        ("energy_basis", pa.string()),  # measured | withheld
        ("node_basis", pa.string()),
        ("pue_source", pa.string()),
        ("intensity_source", pa.string()),
        ("allocation_basis", pa.string()),  # the gpu_allocation_hourly basis, or 'resource' (not allocated)
    ]
)

# v13: the [carbon] settings every load computes carbon_hourly with.
CARBON_SETTINGS = settings_schema()

# v17: each serving pod-hour's GPU cost, tokens and energy per model (derived/serving_costs.py), what the
# unit costs sum; kept in step with the allocation and the serving counters by every load, for the
# ``[unit_costs]`` settings stored beside it.
SERVING_COSTS_HOURLY = pa.schema(
    [
        *SERVING_KEY,
        ("team", pa.string()),
        ("basis", pa.string()),  # allocation | whole_resource | NULL (no GPU resource found)
        *SERVING_COUNTERS,
        ("gpu_cost_usd", DECIMAL),
        ("input_cost_usd", DECIMAL),
        ("kwh", pa.float64()),
        ("kg_co2e", pa.float64()),
    ]
)

# v17: the [unit_costs] settings (and formula version) serving_costs_hourly was computed with.
UNIT_COST_SETTINGS = settings_schema()
