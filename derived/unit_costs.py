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

Steps 1 to 4 give one row per pod-hour and model; they are computed when the data lands and stored in
``serving_costs_hourly`` (derived/serving_costs.py, which holds their SQL and keeps the table in step
with every load), so a read here is one aggregation of stored rows. Money stays DECIMAL(38, 15) to the
group's ``gpu_cost_usd``; the rates are DECIMAL(38, 6).
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.derived import serving_costs
from gpufinops.derived.serving_costs import NO_CARBON as NO_CARBON
from gpufinops.derived.serving_costs import US_PER_DAY
from gpufinops.derived.serving_costs import UnitCostSettings as UnitCostSettings
from gpufinops.derived.serving_costs import carbon_relation as carbon_relation
from gpufinops.warehouse.queries.fragments import filters as _filters
from gpufinops.warehouse.queries.fragments import frame as _frame

SPLITS = ("compute", "weight")
GROUPINGS = {"model": ("team", "namespace", "model"), "team": ("team",), "namespace": ("team", "namespace")}
TOTAL = "total"  # ``by=TOTAL``: one row per period over every team, namespace and model in the filters
PERIODS = ("day", "week", "month")
WHOLE = "window"  # ``period=WHOLE``: one row over the whole window  # ``day`` holds the period's first UTC day (a Monday for a week)
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


def tokens_by_resource(
    con: duckdb.DuckDBPyConnection, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """Per billed resource: the tokens and requests served on it in [start, end), each pod-hour's counted in
    proportion to the GPU cost it was charged on the resource (the models' $ per 1M tokens)."""
    carbon, _ = carbon_relation(con)
    inner, params = serving_costs.rows_sql(carbon, UnitCostSettings("weight", 0.25), serving_costs.between(start, end))
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
    whole_resource; NULL cost: no GPU resource found for the pod). ``settings`` None: those the warehouse's
    rows were computed with (the configured ``[unit_costs]``), else the defaults."""
    sql, params = serving_costs.relation(con, settings, start, end)
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
    period: str = "day",
) -> pl.DataFrame:
    """Per UTC ``period`` (day, ISO week from Monday, or calendar month; ``day`` is its first day;
    ``WHOLE``: over the whole window, ``day`` NULL) and ``by`` (model: team, namespace and model; namespace: team and namespace; team):
    COLUMNS, plus ``input_cost_usd``, ``output_cost_usd`` and ``cost_basis``. ``team`` / ``model`` filter.
    The rows summed are ``serving_costs_hourly``'s where it holds them for ``settings`` (None: the stored
    ones), else the same rows computed live (derived/serving_costs.py)."""
    if by not in GROUPINGS and by != TOTAL:
        raise ValueError(f"unit costs by {by!r}: must be one of {', '.join(GROUPINGS)}")
    inner, params = serving_costs.relation(con, settings, start, end)
    keep, keep_params = _filters(team, None, None, team_col="team")
    if model is not None:
        keep += " AND model = ?"
        keep_params.append(model)
    if period not in PERIODS and period != WHOLE:
        raise ValueError(f"unit costs per {period[:40]!r}: must be one of {', '.join(PERIODS)}")
    grouped = GROUPINGS.get(by, ())
    # the UTC day by integer arithmetic (a TIMESTAMPTZ cast to DATE goes through the session's time zone)
    utc_day = f"DATE '1970-01-01' + CAST(epoch_us(hour) // {US_PER_DAY} AS INTEGER)"
    if period in ("week", "month"):
        utc_day = f"CAST(date_trunc('{period}', {utc_day}) AS DATE)"
    day = "CAST(NULL AS DATE) AS day" if period == WHOLE else f"{utc_day} AS day"
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
           CAST(round(CAST(input_cost_usd AS DOUBLE) * 1e6 / {_shown("input_tokens")}, 6) AS DECIMAL(38, 6))
               AS usd_per_1m_input_tokens,
           CAST(round(CAST(gpu_cost_usd - input_cost_usd AS DOUBLE) * 1e6 / {_shown("output_tokens")}, 6)
               AS DECIMAL(38, 6)) AS usd_per_1m_output_tokens,
           CAST(round(CAST(gpu_cost_usd AS DOUBLE) * 1e3 / {_shown("requests")}, 6) AS DECIMAL(38, 6))
               AS usd_per_1k_requests,
           kwh, kg_co2e, input_cost_usd, gpu_cost_usd - input_cost_usd AS output_cost_usd, cost_basis
    FROM days ORDER BY day, team NULLS LAST, namespace NULLS LAST, model NULLS LAST"""
    return _frame(con, sql, params + keep_params)


def _shown(count: str) -> str:
    """SQL: ``count`` as a rate's divisor where the count shown beside the rate (rounded to a whole
    number) is at least 1, else NULL: $5 per 0.000001 tokens is $5·10^12 per million tokens, a rate that
    is no figure beside a count shown as 0 (and would not fit the rate's DECIMAL(38, 6))."""
    return f"CASE WHEN round({count}) >= 1 THEN {count} END"


def carbon_note(con: duckdb.DuckDBPyConnection) -> str | None:
    """Why kwh / kg_co2e are empty (None: they are computed)."""
    return carbon_relation(con)[1]
