"""Energy and emissions per GPU-hour: ``carbon_hourly``, kept in step with allocation (docs/carbon.md).

For each resource-hour the GPUs' measured draw (``gpu_metrics_hourly.power_mean_w``: DCGM
``POWER_USAGE``, nvidia-smi ``power.draw``, CloudWatch) is the GPU energy; the node's non-GPU draw is
added by a stated model (on-prem: the source's ``host_power_w``; ``[carbon.node_watts]`` per instance
type; else ``node_fraction`` of the GPU energy); facility energy is that × PUE (on-prem: the source's
``pue``; clouds: the published figure, derived/carbon_data.py); emissions are facility energy × the
grid intensity of the bill's region (codecarbon's tables).

Rows: one per ``gpu_allocation_hourly`` row where the resource-hour is allocated (a GPU's energy split
by the row's share; the energy of spread idle shares split over the spread rows), else one per
resource-hour (namespace and pod NULL). The rows of a resource-hour sum to its measured energy. A row
whose GPU has no power measurement has NULL energy and ``energy_basis = 'withheld'``: counted and shown,
never guessed.

The table is a pure function of the warehouse and the stored ``[carbon]`` settings. It is rebuilt for
the same resource-days, in the same transaction, as the allocation (``allocation.recompute`` calls
:func:`recompute` with its scope), so bills, metrics and restatements in any order give the same rows;
a change of the settings (or of the vendored codecarbon version) recomputes all of it (:func:`configure`).
"""

from __future__ import annotations

import contextlib
import logging
import os

import duckdb

from gpufinops.derived import batching, carbon_data, gpu_lines, serving_costs
from gpufinops.derived.allocation_sql import US_PER_DAY, US_PER_HOUR
from gpufinops.derived.carbon_settings import CarbonSettings, store, stored
from gpufinops.derived.spec import Touched
from gpufinops.warehouse.queries.fragments import GPU_USAGE, provider_code

log = logging.getLogger(__name__)

LOOKUP, NODE_WATTS, SCOPE = "_gpufinops_carbon_lookup", "_gpufinops_carbon_node_watts", "_gpufinops_carbon_scope"
BATCH_TABLES = "_gpufinops_carbon"  # the batches' temp tables are named after it (derived/batching.py)
# resource-days a statement: one statement over a 10,000-GPU month's 97,500 resource-days took 38.2 CPU s for
# its 6.84M rows, twenty batches of 5,000 took 15.9 (bench_month's warehouse, the same rows)
BATCH_RESOURCE_DAYS = 5000


def settings_of(con: duckdb.DuckDBPyConnection) -> CarbonSettings:
    return stored(con) or CarbonSettings()


def _within(column: str, days: tuple[int, int] | None) -> str:
    """A range on ``column`` covering the scope's days, so the tables' zone maps skip the rest."""
    if days is None:
        return "TRUE"
    return (
        f"{column} >= make_timestamptz({int(days[0]) * US_PER_DAY}) "
        f"AND {column} < make_timestamptz({(int(days[1]) + 1) * US_PER_DAY})"
    )


def _lines_sql(scope: str, lines: str, days: tuple[int, int] | None = None) -> str:
    """Per billed GPU resource-hour: provider, region, team, instance type, GPU count, on-prem energy model
    (``lines``: the scope's GPU usage lines, :func:`derived.gpu_lines.capture`)."""
    return f"""
  SELECT c."ResourceId" AS resource_id, epoch_us(c."ChargePeriodStart") // {US_PER_HOUR} AS hour_n,
         any_value(c."ProviderName") AS provider, arg_max(c."RegionId", abs(c."EffectiveCost")) AS region,
         arg_max(c."x_Team", abs(c."EffectiveCost")) AS team, any_value(c."x_InstanceType") AS instance_type,
         max(c."x_GpuCount") AS billed_gpus,
         max(TRY_CAST(json_extract_string(c."Tags", '$.pue') AS DOUBLE)) AS onprem_pue,
         max(TRY_CAST(json_extract_string(c."Tags", '$.host_w_per_gpu') AS DOUBLE)) AS onprem_host_w
  FROM {lines} c SEMI JOIN {scope} s ON s.resource_id = c."ResourceId"
       AND s.day_n = epoch_us(c."ChargePeriodStart") // {US_PER_DAY}
  WHERE {_within('c."ChargePeriodStart"', days)}
  GROUP BY 1, 2"""


def _power_sql(scope: str, days: tuple[int, int] | None = None) -> str:
    """Per GPU-hour: its measured draw, W. A MIG GPU's draw is the GPU's row (slices carry no draw of
    their own; where a source repeats the GPU's draw on each slice, the largest, never the sum); one
    source per GPU-hour (the first by name that measured it)."""
    return f"""
  SELECT resource_id, hour_n, gpu_uuid, arg_min(power_w, source) AS power_w, any_value(team) AS team
  FROM (SELECT m.resource_id, epoch_us(m.hour) // {US_PER_HOUR} AS hour_n, m.gpu_uuid, m.source,
               coalesce(max(m.power_mean_w) FILTER (WHERE m.mig_instance IS NULL), max(m.power_mean_w)) AS power_w,
               any_value(m.team) AS team
        FROM gpu_metrics_hourly m SEMI JOIN {scope} s ON s.resource_id = m.resource_id
             AND s.day_n = epoch_us(m.hour) // {US_PER_DAY}
        WHERE m.gpu_uuid IS NOT NULL AND m.resource_id IS NOT NULL AND {_within("m.hour", days)}
        GROUP BY 1, 2, 3, 4)
  GROUP BY 1, 2, 3"""


def rows_sql(scope: str, lines: str, settings: CarbonSettings, days: tuple[int, int] | None = None) -> str:
    """SELECT of carbon_hourly rows for the (resource_id, day_n) pairs in ``scope`` (``lines``: their GPU
    usage lines)."""
    fraction = repr(float(settings.node_fraction))
    embodied = (
        "NULL" if settings.embodied_kg_co2e_per_gpu_hour is None else repr(settings.embodied_kg_co2e_per_gpu_hour)
    )
    return f"""
WITH lines AS ({_lines_sql(scope, lines, days)}),
power AS ({_power_sql(scope, days)}),
alloc AS (
  SELECT a.*, epoch_us(a.hour) // {US_PER_HOUR} AS hour_n FROM gpu_allocation_hourly a
  SEMI JOIN {scope} s ON s.resource_id = a.resource_id AND s.day_n = epoch_us(a.hour) // {US_PER_DAY}
  WHERE {_within("a.hour", days)}),
rh_power AS (
  SELECT resource_id, hour_n, sum(power_w) / 1000.0 AS kwh, count(*) AS gpus, count(power_w) AS measured,
         any_value(team) AS team
  FROM power GROUP BY 1, 2),
alloc_rows AS (
  SELECT a.*, p.power_w,
         CASE WHEN a.gpu_uuid IS NOT NULL THEN p.power_w / 1000.0 * a.share END AS direct_kwh
  FROM alloc a LEFT JOIN power p ON p.resource_id = a.resource_id AND p.hour_n = a.hour_n AND p.gpu_uuid = a.gpu_uuid),
alloc_rh AS (
  SELECT resource_id, hour_n, coalesce(sum(direct_kwh), 0) AS direct,
         sum(share) FILTER (WHERE gpu_uuid IS NULL AND method = 'spread') AS spread_share
  FROM alloc_rows GROUP BY 1, 2),
allocated AS (
  SELECT a.hour_n, a.resource_id, a.provider, a.gpu_uuid, a.mig_instance, a.namespace, a.pod, a.team,
         a.share AS gpu_hours, a.basis AS allocation_basis,
         CASE WHEN a.gpu_uuid IS NOT NULL THEN a.direct_kwh
              WHEN a.method = 'spread' AND r.spread_share > 0 AND p.measured > 0
                THEN greatest(p.kwh - r.direct, 0) * a.share / r.spread_share END AS gpu_kwh
  FROM alloc_rows a JOIN alloc_rh r USING (resource_id, hour_n)
  LEFT JOIN rh_power p USING (resource_id, hour_n)),
resource_hours AS (
  SELECT resource_id, hour_n FROM power UNION SELECT resource_id, hour_n FROM lines
  EXCEPT SELECT resource_id, hour_n FROM alloc),
unallocated AS (
  SELECT h.hour_n, h.resource_id, l.provider, NULL::VARCHAR AS gpu_uuid, NULL::VARCHAR AS mig_instance,
         NULL::VARCHAR AS namespace, NULL::VARCHAR AS pod, coalesce(l.team, p.team) AS team,
         CAST(coalesce(p.gpus, l.billed_gpus, 0) AS DOUBLE) AS gpu_hours, 'resource' AS allocation_basis,
         CASE WHEN p.measured > 0 THEN p.kwh END AS gpu_kwh
  FROM resource_hours h LEFT JOIN lines l USING (resource_id, hour_n) LEFT JOIN rh_power p USING (resource_id, hour_n)),
joined AS (
  SELECT u.*, l.region, l.instance_type, l.billed_gpus, l.onprem_pue, l.onprem_host_w,
         nullif({provider_code("lower(coalesce(u.provider, ''))")}, '') AS provider_code
  FROM (SELECT * FROM allocated UNION ALL BY NAME SELECT * FROM unallocated) u
  LEFT JOIN lines l USING (resource_id, hour_n)),
energy AS (
  SELECT j.*, nw.watts AS node_w,
         CASE WHEN j.gpu_kwh IS NULL THEN NULL
              WHEN j.onprem_host_w IS NOT NULL THEN j.onprem_host_w * j.gpu_hours / 1000.0
              WHEN nw.watts IS NOT NULL THEN nw.watts / greatest(coalesce(j.billed_gpus, 1), 1) * j.gpu_hours / 1000.0
              ELSE j.gpu_kwh * {fraction} END AS node_kwh,
         CASE WHEN j.onprem_host_w IS NOT NULL THEN 'on-prem host power ' || j.onprem_host_w || ' W per GPU'
              WHEN nw.watts IS NOT NULL THEN 'configured node power ' || j.instance_type || ' ' || nw.watts || ' W'
              ELSE 'node power ' || {fraction} || ' × the GPU energy (node fraction)' END AS node_basis,
         coalesce(j.onprem_pue, k.pue) AS pue,
         CASE WHEN j.onprem_pue IS NOT NULL THEN 'onprem source pue' ELSE k.pue_source END AS pue_source,
         k.g AS grid_g_co2e_per_kwh, k.intensity_source
  FROM joined j
  LEFT JOIN {NODE_WATTS} nw ON nw.instance_type = j.instance_type
  LEFT JOIN {LOOKUP} k ON k.provider_code IS NOT DISTINCT FROM j.provider_code AND k.region IS NOT DISTINCT FROM j.region)
SELECT make_timestamptz(hour_n * {US_PER_HOUR}) AS hour, resource_id, provider, region, gpu_uuid, mig_instance,
       namespace, pod, team, gpu_hours, gpu_kwh, node_kwh, pue,
       (gpu_kwh + node_kwh) * pue AS kwh, grid_g_co2e_per_kwh,
       (gpu_kwh + node_kwh) * pue * grid_g_co2e_per_kwh / 1000.0 AS kg_co2e,
       gpu_hours * {embodied} AS embodied_kg_co2e,
       CASE WHEN gpu_kwh IS NULL THEN 'withheld' ELSE 'measured' END AS energy_basis,
       node_basis, pue_source, intensity_source, allocation_basis
FROM energy"""


def _lookups(con: duckdb.DuckDBPyConnection, lines: str, settings: CarbonSettings) -> None:
    """The (provider, region) pairs of the scope's bills with their PUE and grid intensity, resolved in
    Python from the vendored tables (a few rows), and the node-watts table."""
    code = provider_code("lower(coalesce(\"ProviderName\", ''))")
    pairs = con.execute(f'SELECT DISTINCT {code}, "RegionId" FROM {lines}').fetchall()
    # metrics with no bill: no provider, no region (a NULL ProviderName's code is '')
    pairs = sorted({(p or "", r) for p, r in pairs} | {("", None)}, key=lambda pr: (pr[0], pr[1] or ""))
    grid, pue = dict(settings.grid), dict(settings.pue)
    rows = []
    for provider, region in pairs:
        found = carbon_data.intensity(provider, region, grid, settings.default_grid_g_co2e_per_kwh)
        value, source = carbon_data.pue(provider, pue, settings.default_pue)
        rows.append((provider or None, region, found.g_co2e_per_kwh, found.source, value, source))
    rows = [(p if p else None, r, g, s, v, ps) for p, r, g, s, v, ps in rows]
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {LOOKUP} (provider_code VARCHAR, region VARCHAR, g DOUBLE, "
        "intensity_source VARCHAR, pue DOUBLE, pue_source VARCHAR)"
    )
    con.executemany(f"INSERT INTO {LOOKUP} VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {NODE_WATTS} (instance_type VARCHAR, watts DOUBLE)")
    if settings.node_watts:
        con.executemany(f"INSERT INTO {NODE_WATTS} VALUES (?, ?)", list(settings.node_watts))


def recompute(con: duckdb.DuckDBPyConnection, scope: str, *, lines: str | None = None) -> int:
    """Replace the carbon rows of every (resource_id, day_n) in the table ``scope``; returns rows written.
    Runs inside the caller's transaction (the allocation's), after the allocation rows are written.
    ``lines``: a table of the scope's GPU usage lines the caller already read (else read here)."""
    settings = settings_of(con)
    first, last = con.execute(f"SELECT min(day_n), max(day_n) FROM {scope}").fetchall()[0]
    if first is None:
        return 0
    days = (int(first), int(last))
    con.execute(
        f"DELETE FROM carbon_hourly c WHERE {_within('c.hour', days)} AND EXISTS (SELECT 1 FROM {scope} s "
        f"WHERE s.resource_id = c.resource_id AND s.day_n = epoch_us(c.hour) // {US_PER_DAY})"
    )
    own_lines = lines is None
    lines = gpu_lines.capture(con, scope) if lines is None else lines
    _lookups(con, lines, settings)
    ordered = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    con.execute("SET preserve_insertion_order = false")  # row order means nothing here (as for the allocation)
    written = 0
    try:  # a resource-day's rows are its own: in batches, as the allocation (derived/batching.py)
        for part, part_days in batching.batches(con, scope, "day_n", BATCH_RESOURCE_DAYS, name=BATCH_TABLES):
            sql = rows_sql(part, lines, settings, part_days)
            written += int(con.execute(f"INSERT INTO carbon_hourly BY NAME {sql}").fetchall()[0][0])
    finally:  # (an aborted transaction refuses statements: the caller rolls it back)
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET preserve_insertion_order = {'true' if ordered else 'false'}")
    for table in (LOOKUP, NODE_WATTS):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    if own_lines:
        gpu_lines.drop(con)
    serving_costs.follow(con, scope)  # the serving pod-hours' costs and energy of those days follow
    return written


def recompute_all(con: duckdb.DuckDBPyConnection) -> int:
    """Recompute every resource-day the warehouse holds (a settings change, a repair)."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {SCOPE} AS
        SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_DAY} AS day_n FROM gpu_metrics_hourly
        WHERE resource_id IS NOT NULL
        UNION SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_DAY} FROM gpu_allocation_hourly
        UNION SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_DAY} FROM carbon_hourly
        UNION SELECT DISTINCT c."ResourceId", epoch_us(c."ChargePeriodStart") // {US_PER_DAY} FROM cost_line_items c
        WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE}""")
    written = recompute(con, SCOPE)
    con.execute(f"DROP TABLE IF EXISTS {SCOPE}")
    return written


def configure(warehouse_path: str | os.PathLike, settings: CarbonSettings, *, memory_limit: str | None = None) -> bool:
    """Store the configured settings; when they (or the codecarbon data version) changed, recompute the
    whole table in one transaction. Run before a job's loads, like ``allocation.configure``."""
    from gpufinops.warehouse import db

    with db.transaction(warehouse_path, memory_limit=memory_limit) as con:
        before = stored(con)
        changed = before != settings
        if changed:
            store(con, settings)
            if before is not None or _has_data(con):
                log.info("carbon: [carbon] settings or data version changed: recomputing carbon_hourly")
                recompute_all(con)
            else:
                changed = False
    return changed


def _has_data(con: duckdb.DuckDBPyConnection) -> bool:
    """Anything to compute from (a warehouse upgraded to this version computes its history at once)."""
    sql = "SELECT count(*) FROM (SELECT 1 FROM gpu_metrics_hourly UNION ALL SELECT 1 FROM carbon_hourly LIMIT 1)"
    return bool(con.execute(sql).fetchall()[0][0])


def apply_load(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return 0  # the registry's apply: rebuilt by the allocation's, for the same resource-days (recompute)
