"""Unit costs of inference: $ per 1M input tokens, per 1M output tokens and per 1,000 requests.

One builder, :func:`unit_costs`, that the CLI (``gpufinops unit-costs``), the API (``/v1/unit-costs``),
the dashboard, the weekly report and the models call. From ``serving_metrics_hourly`` (what each serving
pod's counters grew by) and the GPU cost the pod was charged with:

1. **The pod's GPU cost in the hour**: its rows of ``gpu_allocation_hourly`` (the shared-GPU chargeback:
   its share of every GPU or MIG slice it ran on, idle remainders excluded), with the team the allocation
   gives it. A pod-hour without allocation rows (no bill allocated yet, or metrics without workload
   labels) is placed on the resource its GPUs' metrics name (``gpu_workloads_hourly``), else on the
   resource of its host's GPU metrics, and charged that **whole resource's** GPU cost of the hour (its GPU
   usage lines starting in the hour), split equally over the serving pods placed on it; its team is the
   resource's. The GPU-hours' attribution to resources is the one the GPU metrics already carry.
2. **Per model**: a pod-hour serving several models splits its cost by their weighted tokens
   (``input_weight`` × input + output; no tokens: by requests; none: equally).
3. **Input vs output** (``[unit_costs] split``): ``"compute"`` (default) gives input tokens the share
   of the cost the server spent in prefill, ``prefill_seconds / (prefill_seconds + decode_seconds)``,
   where the server exports those times (vLLM, TGI), and the ``input_weight`` rule where it does not;
   ``"weight"`` always uses the rule: input share = w·I / (w·I + O), ``input_weight`` w (default 0.25:
   one input token costs a quarter of one output token). $ per 1,000 requests uses the whole cost.
4. **Energy and emissions**: kWh and kg CO2e of the same pod-resource-hours from ``carbon_hourly``
   (:func:`carbon_relation`, the one place that reads it), scaled like the cost; NULL for hours without a
   power measurement (withheld there too).

Money stays DECIMAL(38, 15) to the group's ``gpu_cost_usd``; the rates are DECIMAL(38, 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import duckdb
import polars as pl

from gpufinops.warehouse.options import Settings, option
from gpufinops.warehouse.queries.fragments import GPU_USAGE
from gpufinops.warehouse.queries.fragments import filters as _filters
from gpufinops.warehouse.queries.fragments import frame as _frame

SPLITS = ("compute", "weight")
US_PER_DAY = 86_400_000_000
GROUPINGS = {"model": ("team", "namespace", "model"), "team": ("team",), "namespace": ("team", "namespace")}
COLUMNS = (
    "day",
    "team",
    "namespace",
    "model",
    "gpu_cost_usd",
    "input_tokens",
    "output_tokens",
    "requests",
    "usd_per_1m_input_tokens",
    "usd_per_1m_output_tokens",
    "usd_per_1k_requests",
    "kwh",
    "kg_co2e",
)
NO_CARBON = "no measured GPU power in this warehouse: energy and emissions are withheld, not estimated (docs/carbon.md)"


def _input_weight(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1000:
        raise ValueError(f"{key}: must be a number from 0 to 1000, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class UnitCostSettings(Settings):
    """The ``[unit_costs]`` config section (``warehouse.options``: each key declared once)."""

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
               CAST(rh.cost_usd / count(*) OVER (PARTITION BY p.hour, p.resource_id) AS DECIMAL(38, 15)) AS cost_usd,
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
                ELSE CAST(pod_cost * CAST(round(model_share, 12) AS DECIMAL(18, 12)) AS DECIMAL(38, 15)) END
               AS gpu_cost_usd,
           CAST(pod_cost * CAST(round(model_share * input_share, 12) AS DECIMAL(18, 12)) AS DECIMAL(38, 15))
               AS input_cost_usd,
           pod_kwh * model_share AS kwh, pod_kg * model_share AS kg_co2e
    FROM shared"""


def _inner_sql(
    carbon: str, input_weight: str, split: str, start: datetime | None, end: datetime | None
) -> tuple[str, list]:
    """:func:`_pod_hours_sql` over [start, end) (its serving, allocation and carbon rows), and its parameters."""
    sql, params = _pod_hours_sql(carbon, input_weight, split), list[object]()
    for placeholder, column in (("{where}", "s.hour"), ("{where_a}", "a.hour"), ("{where_c}", "c.hour")):
        where, more = _filters(None, start, end, time_col=column)  # (in the order the placeholders appear)
        sql, params = sql.replace(placeholder, where), params + more
    return sql, params


def tokens_by_resource(
    con: duckdb.DuckDBPyConnection, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """Per billed resource: the tokens and requests served on it in [start, end), each pod-hour's counted in
    proportion to the GPU cost it was charged on the resource (the models' $ per 1M tokens)."""
    carbon, _ = carbon_relation(con)
    inner, params = _inner_sql(carbon, "0.25", "weight", start, end)
    head, _, _ = inner.rpartition("weighted AS (")
    sql = f"""{head}resource_share AS (
        SELECT hour, namespace, pod, resource_id,
               CAST(cost_usd AS DOUBLE) / nullif(sum(CAST(cost_usd AS DOUBLE)) OVER (PARTITION BY hour, namespace, pod), 0)
                   AS fraction
        FROM (SELECT hour, namespace, pod, resource_id, cost_usd FROM alloc
              UNION ALL SELECT hour, namespace, pod, resource_id, cost_usd FROM whole))
    SELECT r.resource_id, sum(s.i * r.fraction) AS input_tokens, sum(s.o * r.fraction) AS output_tokens,
           sum(s.r * r.fraction) AS requests, min(s.hour) AS first_hour, max(s.hour) AS last_hour
    FROM serving s JOIN resource_share r ON r.hour = s.hour AND r.pod = s.pod
         AND r.namespace IS NOT DISTINCT FROM s.namespace
    WHERE r.fraction IS NOT NULL GROUP BY r.resource_id ORDER BY r.resource_id"""
    return _frame(con, sql, params)


def pod_hours(
    con: duckdb.DuckDBPyConnection,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    settings: UnitCostSettings | None = None,
) -> pl.DataFrame:
    """Per hour, server, model and pod: tokens, requests and the GPU cost charged (``basis``: allocation |
    whole_resource; NULL cost: no GPU resource found for the pod)."""
    settings = settings or UnitCostSettings()
    carbon, _ = carbon_relation(con)
    sql, params = _inner_sql(carbon, repr(float(settings.input_weight)), settings.split, start, end)
    return _frame(con, sql + " ORDER BY hour, namespace, pod, server, model", params)


def unit_costs(
    con: duckdb.DuckDBPyConnection,
    *,
    by: str = "model",
    team: str | list[str] | None = None,
    model: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    settings: UnitCostSettings | None = None,
    per_day: bool = True,
) -> pl.DataFrame:
    """Per UTC day (``per_day=False``: over the whole window, ``day`` NULL) and ``by`` (model: team, namespace and model; namespace: team and namespace; team):
    COLUMNS, plus ``input_cost_usd``, ``output_cost_usd`` and ``cost_basis``. ``team`` / ``model`` filter."""
    if by not in GROUPINGS:
        raise ValueError(f"unit costs by {by!r}: must be one of {', '.join(GROUPINGS)}")
    settings = settings or UnitCostSettings()
    carbon, _ = carbon_relation(con)
    inner, params = _inner_sql(carbon, repr(float(settings.input_weight)), settings.split, start, end)
    keep, keep_params = _filters(team, None, None, team_col="team")
    if model is not None:
        keep += " AND model = ?"
        keep_params.append(model)
    grouped = GROUPINGS[by]
    # the UTC day by integer arithmetic (a TIMESTAMPTZ cast to DATE goes through the session's time zone)
    day = (
        f"DATE '1970-01-01' + CAST(epoch_us(hour) // {US_PER_DAY} AS INTEGER) AS day"
        if per_day
        else "CAST(NULL AS DATE) AS day"
    )
    shown = ", ".join(c if c in grouped else f"CAST(NULL AS VARCHAR) AS {c}" for c in ("team", "namespace", "model"))
    sql = f"""
    WITH rows AS ({inner}),
    kept AS (SELECT * FROM rows WHERE {keep}),
    days AS (
        SELECT {day}, {shown}, sum(gpu_cost_usd) AS gpu_cost_usd,
               sum(input_cost_usd) AS input_cost_usd, sum(input_tokens) AS input_tokens,
               sum(output_tokens) AS output_tokens, sum(requests) AS requests, sum(kwh) AS kwh,
               sum(kg_co2e) AS kg_co2e, CASE WHEN min(basis) = max(basis) THEN min(basis) ELSE min(basis) || ',' || max(basis) END
                   AS cost_basis
        FROM kept GROUP BY ALL)
    SELECT day, team, namespace, model, gpu_cost_usd, CAST(round(input_tokens) AS BIGINT) AS input_tokens,
           CAST(round(output_tokens) AS BIGINT) AS output_tokens, CAST(round(requests) AS BIGINT) AS requests,
           CAST(round(CAST(input_cost_usd AS DOUBLE) * 1e6 / nullif(input_tokens, 0), 6) AS DECIMAL(38, 6))
               AS usd_per_1m_input_tokens,
           CAST(round(CAST(gpu_cost_usd - input_cost_usd AS DOUBLE) * 1e6 / nullif(output_tokens, 0), 6)
               AS DECIMAL(38, 6)) AS usd_per_1m_output_tokens,
           CAST(round(CAST(gpu_cost_usd AS DOUBLE) * 1e3 / nullif(requests, 0), 6) AS DECIMAL(38, 6))
               AS usd_per_1k_requests,
           kwh, kg_co2e, input_cost_usd, gpu_cost_usd - input_cost_usd AS output_cost_usd, cost_basis
    FROM days ORDER BY day, team NULLS LAST, namespace NULLS LAST, model NULLS LAST"""
    return _frame(con, sql, params + keep_params)


def carbon_note(con: duckdb.DuckDBPyConnection) -> str | None:
    """Why kwh / kg_co2e are empty (None: they are computed)."""
    return carbon_relation(con)[1]
