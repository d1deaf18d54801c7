"""Each serving pod-hour's GPU cost, tokens and energy per model: ``serving_costs_hourly``, what unit costs sum.

:func:`rows_sql` is the one definition of a row (derived/unit_costs.py says the rules: the pod's GPU cost
from its allocation rows, else its resource's whole cost; split over its models by weighted tokens; the
input share by prefill time or the ``input_weight`` rule; energy from ``carbon_hourly``). Every row is a
function of its hour's inputs alone, so the table is kept **per UTC day**, in the transaction of the load
that changed it:

- a load that replaces serving counters (``serving_metrics_hourly``) marks the days of the rows it deletes
  and inserts (:func:`capture`, called by the runner for every batch);
- the allocation's carbon step (``carbon.recompute``, which every allocation passes through, for every
  resource-day whose bills, metrics or workloads a load touched, or all of them after a settings change)
  hands its days to :func:`follow`, which recomputes them with the pending serving days;
- the runner's :func:`apply` after the allocation recomputes what serving-only loads marked.

The rows are computed with the ``[unit_costs]`` settings stored beside them (:func:`configure`, run before
a job's loads like ``carbon.configure``, recomputes the whole table when they change) and the formula
version :data:`FORMULA`. A reader asking for those settings sums stored rows (:func:`relation`); one asking
for others (``unit_costs(settings=...)``), or a warehouse whose table was never filled (upgraded, no load
since), gets the same SQL computed live: one definition, two places it runs, the same rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import duckdb

from gpufinops.derived.allocation_sql import decimal_divide_sql, decimal_share_sql
from gpufinops.derived.spec import Change, Touched
from gpufinops.kernel.options import Settings, option
from gpufinops.warehouse.queries.fragments import GPU_USAGE
from gpufinops.warehouse.queries.fragments import filters as _filters

US_PER_DAY = 86_400_000_000
NO_CARBON = "no measured GPU power in this warehouse: energy and emissions are withheld, not estimated (docs/carbon.md)"
FORMULA = 1  # bump when rows_sql changes what a row holds: the next configure or load recomputes every row
DAYS = "_gpufinops_serving_cost_days"
COLUMNS = (
    "hour",
    "server",
    "model",
    "namespace",
    "pod",
    "team",
    "basis",
    "input_tokens",
    "output_tokens",
    "requests",
    "prefill_seconds",
    "decode_seconds",
    "gpu_cost_usd",
    "input_cost_usd",
    "kwh",
    "kg_co2e",
)


def _input_weight(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1000:
        raise ValueError(f"{key}: must be a number from 0 to 1000, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class UnitCostSettings(Settings):
    """The ``[unit_costs]`` config section (``kernel.options``: each key declared once)."""

    split: Literal["compute", "weight"] = option("compute", "how a server's GPU cost is split among its models")
    input_weight: float = option(0.25, "an input token's cost as a share of an output token's", check=_input_weight)

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> UnitCostSettings:
        """Validated settings; a ValueError names the key and the allowed values."""
        return cls.parse(section, "unit_costs")


def carbon_relation(con: duckdb.DuckDBPyConnection) -> tuple[str, str | None]:
    """(SQL of a relation (hour, resource_id, namespace, pod, kwh, kg_co2e), why it holds no energy or None).

    The one read of ``carbon_hourly``: its rows, which the unit costs sum per pod-resource-hour (a pod's GPUs
    and slices on one resource), and per resource-hour for the rows of no pod (a resource without allocation)."""
    measured = con.execute("SELECT count(kwh) FROM carbon_hourly").fetchall()[0][0]
    return ("SELECT hour, resource_id, namespace, pod, kwh, kg_co2e FROM carbon_hourly"), (
        None if measured else NO_CARBON
    )


def _pod_hours_sql(carbon: str, input_weight: str, split: str) -> str:
    """Per hour, server, model, namespace and pod: tokens, requests, GPU cost, input cost share, energy.

    Set-based, in few passes and one join of the big relations: the serving rows are grouped once per model;
    the allocation rows (idle remainders excluded) and ``carbon_hourly``'s rows are summed in one
    aggregation per pod-resource-hour; a second aggregation, over those sums and the serving rows together,
    gives each serving pod-hour its allocated cost, team, energy and token totals (no join: the pod-hours
    without serving rows drop out). Only the pod-hours left without allocation take the whole-resource
    path, and the pod-hours are joined to their serving rows once. The placeholders ``{where}`` (serving
    rows, ``s.hour``) and ``{where_a}`` / ``{where_c}`` (the same window on allocation and carbon rows) are
    the caller's."""
    same_pod = "{a}.hour = {b}.hour AND {a}.pod = {b}.pod AND {a}.namespace IS NOT DISTINCT FROM {b}.namespace"
    return f"""
    WITH serving AS MATERIALIZED (
        SELECT hour, server, model, namespace, pod, any_value(host) AS host, sum(input_tokens) AS i,
               sum(output_tokens) AS o, sum(requests) AS r, sum(prefill_seconds) AS p, sum(decode_seconds) AS d
        FROM serving_metrics_hourly s WHERE {{where}} GROUP BY hour, server, model, namespace, pod),
    pod_resources AS MATERIALIZED (  -- per pod-resource-hour: the allocated cost and team, the energy beside it
        SELECT hour, namespace, pod, resource_id, sum(cost_usd) AS cost_usd, arg_max(team, cost_usd) AS team,
               sum(kwh) AS kwh, sum(kg_co2e) AS kg_co2e
        FROM (SELECT a.hour, a.namespace, a.pod, a.resource_id, a.cost_usd, a.team, NULL::DOUBLE AS kwh,
                     NULL::DOUBLE AS kg_co2e, 0 AS kind
              FROM gpu_allocation_hourly a WHERE a.basis <> 'unallocated' AND a.pod IS NOT NULL AND {{where_a}}
              UNION ALL
              SELECT c.hour, c.namespace, c.pod, c.resource_id, NULL, NULL, c.kwh, c.kg_co2e, 1 AS kind
              FROM ({carbon}) c WHERE c.pod IS NOT NULL AND {{where_c}})
        GROUP BY hour, namespace, pod, resource_id HAVING bool_or(kind = 0)),
    alloc AS (SELECT hour, namespace, pod, resource_id, cost_usd FROM pod_resources),
    pods AS MATERIALIZED (  -- per serving pod-hour: its token totals, allocated cost, team and energy
        SELECT hour, namespace, pod, any_value(host) AS host,
               sum(coalesce({input_weight} * i, 0) + coalesce(o, 0)) FILTER (WHERE serves) AS pod_tw,
               sum(coalesce(r, 0)) FILTER (WHERE serves) AS pod_r, count(*) FILTER (WHERE serves) AS pod_rows,
               sum(cost_usd) AS cost_usd, arg_max(team, cost_usd) AS team, sum(kwh) AS kwh,
               sum(kg_co2e) AS kg_co2e, bool_or(NOT serves) AS allocated
        FROM (SELECT hour, namespace, pod, host, i, o, r, NULL::DECIMAL(38, 15) AS cost_usd, NULL::VARCHAR AS team,
                     NULL::DOUBLE AS kwh, NULL::DOUBLE AS kg_co2e, true AS serves FROM serving
              UNION ALL
              SELECT hour, namespace, pod, NULL, NULL, NULL, NULL, cost_usd, team, kwh, kg_co2e, false
              FROM pod_resources)
        GROUP BY hour, namespace, pod HAVING bool_or(serves)),
    unplaced AS (SELECT hour, namespace, pod, host FROM pods WHERE NOT allocated),
    on_gpus AS (
        SELECT w.hour, w.namespace, w.pod, min(g.resource_id) AS resource_id
        FROM gpu_workloads_hourly w JOIN gpu_metrics_hourly g ON g.source = w.source AND g.hour = w.hour
             AND g.gpu_uuid = w.gpu_uuid AND g.mig_instance IS NOT DISTINCT FROM w.mig_instance
        SEMI JOIN unplaced u ON {same_pod.format(a="u", b="w")}
        WHERE g.resource_id IS NOT NULL AND w.pod IS NOT NULL GROUP BY ALL),
    on_hosts AS (
        SELECT g.hour, g.host, min(g.resource_id) AS resource_id FROM gpu_metrics_hourly g
        SEMI JOIN unplaced u ON u.hour = g.hour AND u.host = g.host
        WHERE g.resource_id IS NOT NULL AND g.host IS NOT NULL GROUP BY ALL),
    placed AS MATERIALIZED (
        SELECT p.hour, p.namespace, p.pod, coalesce(w.resource_id, h.resource_id) AS resource_id
        FROM unplaced p
        LEFT JOIN on_gpus w ON w.hour = p.hour AND w.pod = p.pod AND w.namespace IS NOT DISTINCT FROM p.namespace
        LEFT JOIN on_hosts h ON h.hour = p.hour AND h.host = p.host
        WHERE coalesce(w.resource_id, h.resource_id) IS NOT NULL),
    resource_hours AS (
        SELECT date_trunc('hour', c."ChargePeriodStart") AS hour, c."ResourceId" AS resource_id,
               sum(c."EffectiveCost") AS cost_usd, arg_max(c."x_Team", c."ChargePeriodStart") AS team
        FROM cost_line_items c
        WHERE c."ChargeCategory" = 'Usage' AND {GPU_USAGE} AND c."ResourceId" IN (SELECT resource_id FROM placed)
        GROUP BY ALL),
    whole AS (
        SELECT p.hour, p.resource_id, p.namespace, p.pod, rh.team,
               {decimal_divide_sql("rh.cost_usd", "count(*) OVER (PARTITION BY p.hour, p.resource_id)")} AS cost_usd,
               1.0 / count(*) OVER (PARTITION BY p.hour, p.resource_id) AS fraction
        FROM placed p JOIN resource_hours rh ON rh.hour = p.hour AND rh.resource_id = p.resource_id),
    whole_carbon AS (  -- the energy of the resource-hours charged whole: carbon_hourly's rows of no pod
        SELECT c.hour, c.resource_id, c.namespace, sum(c.kwh) AS kwh, sum(c.kg_co2e) AS kg_co2e
        FROM ({carbon}) c SEMI JOIN placed p ON p.hour = c.hour AND p.resource_id = c.resource_id
        WHERE c.pod IS NULL GROUP BY c.hour, c.resource_id, c.namespace),
    whole_cost AS (
        SELECT w.hour, w.namespace, w.pod, sum(w.cost_usd) AS cost_usd, arg_max(w.team, w.cost_usd) AS team,
               sum(c.kwh * w.fraction) AS kwh, sum(c.kg_co2e * w.fraction) AS kg_co2e
        FROM whole w LEFT JOIN whole_carbon c ON c.hour = w.hour AND c.resource_id = w.resource_id
        GROUP BY w.hour, w.namespace, w.pod),
    pod_cost AS (
        SELECT p.hour, p.namespace, p.pod, p.pod_tw, p.pod_r, p.pod_rows,
               CASE WHEN p.allocated THEN p.cost_usd ELSE wc.cost_usd END AS cost_usd,
               CASE WHEN p.allocated THEN p.team ELSE wc.team END AS team,
               CASE WHEN p.allocated THEN p.kwh ELSE wc.kwh END AS kwh,
               CASE WHEN p.allocated THEN p.kg_co2e ELSE wc.kg_co2e END AS kg_co2e,
               CASE WHEN p.allocated THEN 'allocation' WHEN wc.pod IS NOT NULL THEN 'whole_resource' END AS basis
        FROM pods p LEFT JOIN whole_cost wc ON {same_pod.format(a="wc", b="p")}),
    weighted AS (
        SELECT s.*, pc.cost_usd AS pod_cost, pc.team, pc.kwh AS pod_kwh, pc.kg_co2e AS pod_kg, pc.basis,
               coalesce({input_weight} * s.i, 0) + coalesce(s.o, 0) AS tw, pc.pod_tw, pc.pod_r, pc.pod_rows
        FROM serving s JOIN pod_cost pc ON {same_pod.format(a="pc", b="s")}),
    shared AS (
        SELECT *, CASE WHEN pod_tw > 0 THEN tw / pod_tw WHEN pod_r > 0 THEN coalesce(r, 0) / pod_r
                       ELSE 1.0 / pod_rows END AS model_share,
                  CASE WHEN {split!r} = 'compute' AND coalesce(p, 0) + coalesce(d, 0) > 0 THEN coalesce(p, 0) / (coalesce(p, 0) + coalesce(d, 0))
                       WHEN coalesce({input_weight} * i, 0) + coalesce(o, 0) > 0
                           THEN coalesce({input_weight} * i, 0) / (coalesce({input_weight} * i, 0) + coalesce(o, 0))
                       ELSE 0 END AS input_share
        FROM weighted)
    SELECT hour, server, model, namespace, pod, team, basis, i AS input_tokens, o AS output_tokens,
           r AS requests, p AS prefill_seconds, d AS decode_seconds,
           CASE WHEN model_share = 1 THEN pod_cost  -- the pod's only model: its cost as is, no DECIMAL product
                ELSE {decimal_share_sql("pod_cost", "model_share")} END AS gpu_cost_usd,
           {decimal_share_sql("pod_cost", "model_share * input_share")} AS input_cost_usd,
           pod_kwh * model_share AS kwh, pod_kg * model_share AS kg_co2e
    FROM shared"""


def rows_sql(carbon: str, settings: UnitCostSettings, window: Callable[[str], tuple[str, list]]) -> tuple[str, list]:
    """The rows (:data:`COLUMNS`) of the hours ``window(column)`` keeps (a WHERE clause on a TIMESTAMPTZ
    column and its parameters), applied alike to the serving, allocation and carbon rows; and the parameters."""
    sql = _pod_hours_sql(carbon, repr(float(settings.input_weight)), settings.split)
    params = list[object]()
    for placeholder, column in (("{where}", "s.hour"), ("{where_a}", "a.hour"), ("{where_c}", "c.hour")):
        where, more = window(column)  # (in the order the placeholders appear)
        sql, params = sql.replace(placeholder, where), params + more
    return sql, params


def between(start: datetime | None, end: datetime | None) -> Callable[[str], tuple[str, list]]:
    """The window [start, end) (either end open when None)."""
    return lambda column: _filters(None, start, end, time_col=column)


def _on_days(lo: int, hi: int) -> Callable[[str], tuple[str, list]]:
    """The window of the UTC days in the table :data:`DAYS` (``lo`` to ``hi`` bound it, for the zone maps)."""

    def where(column: str) -> tuple[str, list]:
        return (
            f"{column} >= make_timestamptz({lo * US_PER_DAY}) AND {column} < make_timestamptz({(hi + 1) * US_PER_DAY}) "
            f"AND epoch_us({column}) // {US_PER_DAY} IN (SELECT day_n FROM {DAYS})"
        ), []

    return where


# ---- the stored rows -----------------------------------------------------------------------------


def stored(con: duckdb.DuckDBPyConnection) -> UnitCostSettings | None:
    """The settings serving_costs_hourly holds rows for (None: never filled, by an older formula, or a
    warehouse a read-only process opened before its upgrade to v17)."""
    try:
        rows = con.execute("SELECT value FROM unit_cost_settings WHERE key = 'settings'").fetchall()
    except duckdb.CatalogException:
        return None
    if not rows:
        return None
    raw = json.loads(rows[0][0])
    if raw.get("formula") != FORMULA:
        return None
    return UnitCostSettings(split=raw["split"], input_weight=float(raw["input_weight"]))


def _store(con: duckdb.DuckDBPyConnection, settings: UnitCostSettings) -> None:
    con.execute("DELETE FROM unit_cost_settings")
    value = {"split": settings.split, "input_weight": float(settings.input_weight), "formula": FORMULA}
    con.execute("INSERT INTO unit_cost_settings VALUES ('settings', ?)", [json.dumps(value, sort_keys=True)])


def relation(
    con: duckdb.DuckDBPyConnection,
    settings: UnitCostSettings | None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> tuple[str, list]:
    """SQL of the rows of [start, end) for ``settings`` (None: the stored ones, else the defaults), and its
    parameters: the stored rows where they were computed with those settings, else the same rows live."""
    have = stored(con)
    wanted = settings or have or UnitCostSettings()
    if have is not None and have == wanted:
        where, params = _filters(None, start, end, time_col="hour")
        return f"SELECT {', '.join(COLUMNS)} FROM serving_costs_hourly WHERE {where}", params
    return rows_sql(carbon_relation(con)[0], wanted, between(start, end))


def capture(con: duckdb.DuckDBPyConnection, table: str, where: str, params: list) -> None:
    """Remember the UTC days of ``table``'s rows matching ``where`` when it is the serving counters' table
    (the runner calls this before a batch's delete and after its insert, for every table)."""
    if table != "serving_metrics_hourly":
        return
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {DAYS} (day_n BIGINT)")
    con.execute(
        f"INSERT INTO {DAYS} SELECT DISTINCT epoch_us(hour) // {US_PER_DAY} FROM serving_metrics_hourly WHERE {where}",
        params,
    )


def follow(con: duckdb.DuckDBPyConnection, scope: str) -> int:
    """Recompute the days of the table ``scope`` (a ``day_n`` column: the resource-days the allocation and
    carbon just rebuilt) with the pending serving days; inside the caller's transaction."""
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {DAYS} (day_n BIGINT)")
    con.execute(f"INSERT INTO {DAYS} SELECT DISTINCT day_n FROM {scope}")
    return apply(con)


def apply(con: duckdb.DuckDBPyConnection) -> int:
    """Recompute the pending days (none pending: nothing); returns the rows written. The first time a
    warehouse computes any (no stored settings: new, or upgraded to v17), every day is computed."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [DAYS]).fetchall()[0][0]:
        return 0
    settings = stored(con)
    if settings is None:
        written = recompute_all(con, UnitCostSettings())
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {DAYS} AS SELECT DISTINCT day_n FROM {DAYS}")
        written = _recompute(con, settings)
    con.execute(f"DROP TABLE IF EXISTS {DAYS}")
    return written


def _recompute(con: duckdb.DuckDBPyConnection, settings: UnitCostSettings) -> int:
    lo, hi = con.execute(f"SELECT min(day_n), max(day_n) FROM {DAYS}").fetchall()[0]
    if lo is None:
        return 0
    window = _on_days(int(lo), int(hi))
    con.execute(f"DELETE FROM serving_costs_hourly WHERE {window('hour')[0]}")
    serving = f"SELECT count(*) FROM (SELECT 1 FROM serving_metrics_hourly s WHERE {window('s.hour')[0]} LIMIT 1)"
    if not con.execute(serving).fetchall()[0][0]:  # every row is a serving row's: a fleet that serves nothing
        return 0
    sql, params = rows_sql(carbon_relation(con)[0], settings, window)
    return int(con.execute(f"INSERT INTO serving_costs_hourly BY NAME {sql}", params).fetchall()[0][0])


def recompute_all(con: duckdb.DuckDBPyConnection, settings: UnitCostSettings | None = None) -> int:
    """Recompute the whole table with ``settings`` (None: the stored ones, else the defaults) and store them
    (a settings change, the first fill, a repair after the inputs were edited by hand)."""
    settings = settings or stored(con) or UnitCostSettings()
    con.execute("DELETE FROM serving_costs_hourly")
    _store(con, settings)
    if not con.execute("SELECT count(*) FROM (SELECT 1 FROM serving_metrics_hourly LIMIT 1)").fetchall()[0][0]:
        return 0  # every row is a serving row's: a fleet that serves nothing has none (the first fill: no scan)
    sql, params = rows_sql(carbon_relation(con)[0], settings, between(None, None))
    return int(con.execute(f"INSERT INTO serving_costs_hourly BY NAME {sql}", params).fetchall()[0][0])


def configure(
    warehouse_path: str | os.PathLike, settings: UnitCostSettings | None, *, memory_limit: str | None = None
) -> bool:
    """Store the configured settings (None: the defaults); when they (or :data:`FORMULA`) changed, recompute
    the whole table in one transaction. Run before a job's loads, like ``carbon.configure``."""
    from gpufinops.warehouse import db

    settings = settings or UnitCostSettings()

    with db.transaction(warehouse_path, memory_limit=memory_limit) as con:
        changed = stored(con) != settings
        if changed:
            recompute_all(con, settings)
    return changed


def capture_change(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    """The registry's capture: the days a batch of serving counters replaced and holds now."""
    if change.where is not None:
        capture(con, change.table, change.where, change.params)


def apply_load(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    return apply(con)  # the days the allocation did not redo
