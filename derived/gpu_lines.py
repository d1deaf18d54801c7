"""The GPU usage lines of a recompute's resource-days, read from the bill once.

The allocation (:mod:`derived.allocation`, in batches of resource-days) and the carbon rows that follow
it (:mod:`derived.carbon`) each need the bill's GPU usage lines of the resource-days they rebuild.
``cost_line_items`` is not ordered by time: a CUR's files are cut however the provider cut them (by
account, by resource, by size), so a scan bounded by a day range still reads nearly every row group,
and each batch and each carbon statement scanning the bill paid one full scan of it (a 10,000-GPU month:
50M line items, about fifty scans). One scan keeps the scope's GPU lines (one to a few per
resource-hour) in a temporary table that every later statement of the recompute reads instead.

The table holds the line items' own column names (the statements read it aliased as the bill was), only
the usage lines that carry a GPU (``ChargeCategory = 'Usage'``, a GPU count or model, a resource id),
and only the resource-days of the scope.
"""

from __future__ import annotations

import duckdb

from gpufinops.derived.allocation_sql import US_PER_DAY
from gpufinops.warehouse.queries.fragments import GPU_USAGE

LINES = "_gpufinops_gpu_lines"
# what the allocation and the carbon rows read of a line (derived/allocation_sql.py, derived/carbon.py)
COLUMNS = (
    "ResourceId",
    "ChargePeriodStart",
    "ProviderName",
    "RegionId",
    "x_Team",
    "x_InstanceType",
    "x_GpuCount",
    "ResourceName",
    "ServiceName",
    "EffectiveCost",
    "Tags",
)


def capture(con: duckdb.DuckDBPyConnection, scope: str) -> str:
    """Keep in :data:`LINES` the GPU usage lines of the (resource_id, day_n) pairs of the table ``scope``
    (replacing what it held); returns the table's name. One scan of ``cost_line_items``."""
    first, last = con.execute(f"SELECT min(day_n), max(day_n) FROM {scope}").fetchall()[0]
    columns = ", ".join(f'c."{name}"' for name in COLUMNS)
    if first is None:  # an empty scope: an empty table of the same columns
        con.execute(f"CREATE OR REPLACE TEMP TABLE {LINES} AS SELECT {columns} FROM cost_line_items c LIMIT 0")
        return LINES
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {LINES} AS
        SELECT {columns} FROM cost_line_items c
        SEMI JOIN (SELECT DISTINCT resource_id, day_n FROM {scope}) s
             ON s.resource_id = c."ResourceId" AND s.day_n = epoch_us(c."ChargePeriodStart") // {US_PER_DAY}
        WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE}
          AND c."ChargePeriodStart" >= make_timestamptz({int(first) * US_PER_DAY})
          AND c."ChargePeriodStart" < make_timestamptz({(int(last) + 1) * US_PER_DAY})""")
    return LINES


def drop(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"DROP TABLE IF EXISTS {LINES}")
