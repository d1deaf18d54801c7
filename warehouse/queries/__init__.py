"""Every query the models, the dashboard, the report and the API share, by subject.

Plain functions ``(con, filters) -> polars.DataFrame``: the heavy scans, rollups and joins run in
DuckDB SQL and hand their (small) result to polars through Arrow. Filters are bound parameters;
no caller's text is ever pasted into SQL. Money stays DECIMAL here; the pages cast to float for
charts only. The SQL fragments several queries share (what a GPU usage line is, a provider's code)
are defined once, in :mod:`warehouse.queries.fragments`. ``from warehouse import queries;
queries.<name>`` reaches every query.
"""

from __future__ import annotations

from gpufinops.warehouse.queries import fragments
from gpufinops.warehouse.queries.exports import (
    export_gpu_hours,
    export_gpu_resources,
    export_onprem_node_groups,
    export_team_namespaces,
)
from gpufinops.warehouse.queries.findings import (
    dashboard_recommendation,
    decisions_log,
    onprem_comparison,
    recommendation_by_id,
    savings_by_status,
    undelivered_recommendations,
    withheld_counts,
    withheld_findings,
)
from gpufinops.warehouse.queries.fragments import GPU_USAGE, provider_code
from gpufinops.warehouse.queries.gpu_usage import (
    fleet_utilisation,
    gpu_count_disagreements,
    gpu_hours_attribution,
    gpu_instance_inventory,
    gpu_memory_gib,
    gpu_resource_hours,
    idle_gpu_cost,
    resource_utilisation,
    team_gpu_capacity,
    unattributed_gpu_hours,
)
from gpufinops.warehouse.queries.health import (
    cost_data_version,
    dashboard_data_version,
    ingest_status,
    job_status,
    report_delivery_status,
)
from gpufinops.warehouse.queries.onprem import (
    cloud_gpu_offers,
    onprem_gpu_usage,
)
from gpufinops.warehouse.queries.purchasing import (
    commitment_prices,
    fleet_commitment_ratios,
    fleet_spot_ratios,
    spot_bands,
    spot_interruption,
    spot_mix_usage,
    spot_price_changes,
    spot_price_history,
    spot_series,
)
from gpufinops.warehouse.queries.rightsizing import (
    reference_prices_table,
    rightsizing_catalogue,
    rightsizing_gpus,
    rightsizing_resources,
)
from gpufinops.warehouse.queries.spend import (
    cost_teams,
    cost_totals,
    daily_cost_by_line_item,
    latest_charge_day,
    spend_daily,
)
from gpufinops.warehouse.recommendation_read import frame as recommendations  # the one read model's frame

# The helpers' names before the split (``from gpufinops.warehouse.queries import _frame``), for code not yet moved to fragments.
_frame, _filters = fragments.frame, fragments.filters

__all__ = [
    "GPU_USAGE",
    "cloud_gpu_offers",
    "commitment_prices",
    "cost_data_version",
    "cost_teams",
    "cost_totals",
    "daily_cost_by_line_item",
    "dashboard_data_version",
    "dashboard_recommendation",
    "decisions_log",
    "export_gpu_hours",
    "export_gpu_resources",
    "export_onprem_node_groups",
    "export_team_namespaces",
    "fleet_commitment_ratios",
    "fleet_spot_ratios",
    "fleet_utilisation",
    "gpu_count_disagreements",
    "gpu_hours_attribution",
    "gpu_instance_inventory",
    "gpu_memory_gib",
    "gpu_resource_hours",
    "idle_gpu_cost",
    "ingest_status",
    "job_status",
    "latest_charge_day",
    "onprem_comparison",
    "onprem_gpu_usage",
    "provider_code",
    "recommendation_by_id",
    "recommendations",
    "reference_prices_table",
    "report_delivery_status",
    "resource_utilisation",
    "rightsizing_catalogue",
    "rightsizing_gpus",
    "rightsizing_resources",
    "savings_by_status",
    "spend_daily",
    "spot_bands",
    "spot_interruption",
    "spot_mix_usage",
    "spot_price_changes",
    "spot_price_history",
    "spot_series",
    "team_gpu_capacity",
    "unattributed_gpu_hours",
    "undelivered_recommendations",
    "withheld_counts",
    "withheld_findings",
]
