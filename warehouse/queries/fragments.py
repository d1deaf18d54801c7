"""SQL fragments and helpers the warehouse's queries share, each defined once.

``GPU_USAGE`` is what makes a cost line a GPU line (a GPU count, or a GPU model, on the bill);
``provider_code`` maps a bill's ProviderName ("Amazon Web Services", "AWS", "Google Cloud", "Microsoft")
to the provider codes the catalogues use (aws, gcp, azure: ``kernel.providers``, the one mapping). ``frame`` runs a query into polars through Arrow;
``filters`` builds the team / time WHERE clause with bound parameters (no caller's text in SQL).
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.kernel import providers


def gpu_usage(alias: str | None = "c") -> str:
    """The predicate "this cost line carries a GPU", on the line items aliased ``alias`` (None: unaliased)."""
    prefix = f"{alias}." if alias else ""
    return f'({prefix}"x_GpuCount" > 0 OR {prefix}"x_GpuModel" IS NOT NULL)'


# The predicate on cost_line_items aliased ``c`` (the form nearly every query uses).
GPU_USAGE = gpu_usage("c")

# A billed resource's GPU usage line (what a GPU resource-hour sums), on cost_line_items aliased ``c``.
GPU_RESOURCE_USAGE = f"""c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE}"""


def resource_hour_columns(provider_as: str) -> str:
    """The SELECT columns of a billed resource-hour on the line items aliased ``c``, grouped by the first two:
    the resource and its hour, then its provider (named ``provider_as``), team, region, instance type and GPU model."""
    return f"""c."ResourceId" AS resource_id, date_trunc('hour', c."ChargePeriodStart") AS hour,
                   any_value(c."ProviderName") AS {provider_as}, any_value(c."x_Team") AS team,
                   any_value(c."RegionId") AS region, any_value(c."x_InstanceType") AS instance_type,
                   any_value(c."x_GpuModel") AS gpu_model"""


def provider_code(lowered: str) -> str:
    """The provider code of a lower-cased ProviderName expression (kernel/providers.py, the one mapping)."""
    return providers.provider_sql(lowered)


def frame(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    """The result of ``sql`` as a polars DataFrame (through Arrow)."""
    result = pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())
    assert isinstance(result, pl.DataFrame)  # an Arrow table converts to a DataFrame, never a Series
    return result


def filters(
    team: str | list[str] | None,
    start: datetime | None,
    end: datetime | None,
    team_col: str = 'c."x_Team"',
    time_col: str = 'c."ChargePeriodStart"',
) -> tuple[str, list]:
    """A WHERE clause (and its parameters) keeping ``team``'s rows in [start, end)."""
    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    if team is not None:
        teams = [team] if isinstance(team, str) else list(team)
        clauses.append(f"{team_col} IN (SELECT unnest(?::VARCHAR[]))")
        params.append(teams)
    if start is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(start)
    if end is not None:
        clauses.append(f"{time_col} < ?")
        params.append(end)
    return " AND ".join(clauses), params
