"""`gpufinops export focus --focus-version 1.3`: the cost lines as FOCUS 1.3, shared GPU lines split.

FOCUS 1.3's split cost allocation: a cost line (the *origin charge*) whose GPU-hours were shared
(its resource-hour has rows in ``gpu_allocation_hourly``) is replaced by its *allocated charges*,
one per allocation row of that resource-hour: the pod, namespace, MIG slice or process that held
the GPU, and the unallocated (idle) share as a row of its own. Every other line is written as in
1.2, with the 1.3 columns added (``HostProviderName`` and ``ServiceProviderName`` are the
line's ProviderName; the Allocated* columns and ``ContractApplied`` null).

The split (docs: *FOCUS 1.3*):

* each allocated row's weight is its allocation row's cost over the resource-hour's GPU cost (the
  allocation's own exact split; where that cost is zero, its share of the hour), as an integer out
  of 10^12; an on-prem line that names its GPU (``Tags.gpu_uuid``) is split over that GPU's rows;
* every summable column (BilledCost, EffectiveCost, ListCost, ContractedCost,
  PricingCurrencyEffectiveCost, PricingQuantity, ConsumedQuantity, CommitmentDiscountQuantity) is
  divided in integer units of 1e-15 by largest remainder, so the allocated rows add up to the
  origin line's value exactly; unit prices, dimensions and Tags are the origin's;
* ``AllocatedMethodId`` is :data:`METHOD_ID` on every allocated row; ``AllocatedMethodDetails``
  is ``{"Elements": [{"AllocatedRatio": …, "x_Basis": …, "x_Method": …, "x_Share": …, …}]}``;
  ``AllocatedResourceId`` / ``AllocatedResourceName`` name the workload (null on the unallocated
  row, as the spec requires); ``AllocatedTags`` carry its ``team`` (and ``namespace``).
"""

from __future__ import annotations

from gpufinops.derived.allocation_sql import COST_SCALE, US_PER_HOUR, units_to_decimal
from gpufinops.warehouse import cost_schema
from gpufinops.warehouse.focus_spec import FOCUS_13_ADDED, FOCUS_13_COLUMNS
from gpufinops.warehouse.queries.fragments import gpu_usage

METHOD_ID = "gpufinops-gpu-allocation-1"
RATIO_SCALE = 10**12  # an allocated row's weight: an integer out of 10^12 of its origin line
_FITS = "1e37"  # a HUGEINT holds 1.7e38: value units × weight total must stay below
FOCUS_COLUMNS = tuple(name for name, _, _ in FOCUS_13_COLUMNS)
EXTENSION_COLUMNS = tuple(f.name for f in cost_schema.COST_EXTENSIONS)
EXPORT_COLUMNS = FOCUS_COLUMNS + EXTENSION_COLUMNS
TIMESTAMPS = {name for name, spec_type, _ in FOCUS_13_COLUMNS if spec_type == "Date/Time"}
JSON_COLUMNS = {name for name, spec_type, _ in FOCUS_13_COLUMNS if spec_type == "JSON"}
SUMMABLE = (
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "PricingCurrencyEffectiveCost",
    "PricingQuantity",
    "ConsumedQuantity",
    "CommitmentDiscountQuantity",
)
ADDED = tuple(name for name, _, _ in FOCUS_13_ADDED)
UNALLOCATED = "(a.basis = 'unallocated' AND a.method <> 'spread')"  # spread: given to a namespace
# a merged row's attribute: the one value its allocation rows share, else null
_SAME = ", ".join(
    f"CASE WHEN count(DISTINCT coalesce(CAST(a.{c} AS VARCHAR), '')) = 1 THEN any_value(a.{c}) END AS {c}"
    for c in ("gpu_uuid", "mig_instance", "namespace", "pod", "container", "process", "host", "source", "method")
)
# the largest summable value of a line, in units of 1e-15 (as a DOUBLE: only compared against _FITS)
_BIG_UNITS = (
    "(greatest(" + ", ".join(f'coalesce(abs(CAST(s."{c}" AS DOUBLE)), 0)' for c in SUMMABLE) + f") * {COST_SCALE} + 1)"
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _units(value: str) -> str:
    """SQL: |value| (a DECIMAL(38, 15)) as an integer number of 1e-15, exactly (the allocation's form)."""
    return (
        f"CAST(floor(abs({value})) AS HUGEINT) * {COST_SCALE} "
        f"+ CAST((abs({value}) - floor(abs({value}))) * {COST_SCALE} AS HUGEINT)"
    )


def _unsplit_columns() -> str:
    out = []
    for name in FOCUS_COLUMNS + EXTENSION_COLUMNS:
        if name in ("HostProviderName", "ServiceProviderName"):
            out.append(f'b."ProviderName" AS {_q(name)}')
        elif name in ADDED:
            out.append(f"CAST(NULL AS VARCHAR) AS {_q(name)}")
        else:
            out.append(f"b.{_q(name)}")
    return ", ".join(out)


def _details() -> str:
    element = ", ".join(
        f"'{key}', {expr}"
        for key, expr in (
            ("AllocatedRatio", "CAST(x.w AS DOUBLE) / CAST(x.wt AS DOUBLE)"),
            ("x_Basis", "a.basis"),
            ("x_Method", "a.method"),
            ("x_Share", "a.share"),
            ("x_GpuUuid", "a.gpu_uuid"),
            ("x_MigInstance", "a.mig_instance"),
            ("x_Namespace", "a.namespace"),
            ("x_Pod", "a.pod"),
            ("x_Container", "a.container"),
            ("x_Process", "a.process"),
            ("x_Host", "a.host"),
            ("x_MetricsSource", "a.source"),
        )
    )
    # json_merge_patch onto {} drops the keys whose value is null (RFC 7386): no "x_Pod": null
    return f"json_object('Elements', json_array(json_merge_patch('{{}}', json_object({element}))))"


def _split_columns() -> str:
    unallocated = "(a.alloc_id = 0)"
    allocated: dict[str, str] = {
        "AllocatedMethodId": f"'{METHOD_ID}'",
        "AllocatedMethodDetails": f"CAST({_details()} AS VARCHAR)",
        "AllocatedResourceId": f"CASE WHEN {unallocated} THEN NULL ELSE nullif(concat_ws('/', a.gpu_uuid, "
        "a.mig_instance, a.namespace, a.pod, a.container, a.process), '') END",
        "AllocatedResourceName": f"CASE WHEN {unallocated} THEN NULL ELSE coalesce(a.pod, a.process, a.namespace, "
        "a.mig_instance, a.gpu_uuid) END",
        "AllocatedTags": "CAST(json_merge_patch('{}', json_object('team', a.team, 'namespace', a.namespace)) "
        "AS VARCHAR)",
        "ContractApplied": "CAST(NULL AS VARCHAR)",
        "HostProviderName": 's."ProviderName"',
        "ServiceProviderName": 's."ProviderName"',
    }
    out = []
    for name in FOCUS_COLUMNS + EXTENSION_COLUMNS:
        if name in allocated:
            out.append(f"{allocated[name]} AS {_q(name)}")
        elif name in SUMMABLE:
            k = SUMMABLE.index(name)
            sign = f"CASE WHEN s.{_q(name)} < 0 THEN -1 ELSE 1 END"
            out.append(
                f"CASE WHEN x.u{k} IS NULL THEN NULL ELSE {sign} * ({units_to_decimal(f'x.m{k}')}) END AS {_q(name)}"
            )
        else:
            out.append(f"s.{_q(name)}")
    return ", ".join(out)


def _money_steps() -> str:
    """CTEs ``q`` → ``x``: each summable column of each (line, allocation row) pair, largest remainder."""
    units = ", ".join(f"{_units(f's.{_q(c)}')} AS u{k}" for k, c in enumerate(SUMMABLE))
    quot = ", ".join(f"(u{k} * w) // wt AS b{k}" for k in range(len(SUMMABLE)))
    rem = ", ".join(f"u{k} * w - b{k} * wt AS r{k}" for k in range(len(SUMMABLE)))
    windows = ", ".join(
        f"u{k} - sum(b{k}) OVER (PARTITION BY line_id) AS left{k}, "
        f"row_number() OVER (PARTITION BY line_id ORDER BY r{k} DESC, alloc_id) AS rank{k}"
        for k in range(len(SUMMABLE))
    )
    amounts = ", ".join(
        f"b{k} + CASE WHEN r{k} > 0 AND rank{k} <= left{k} THEN 1 ELSE 0 END AS m{k}" for k in range(len(SUMMABLE))
    )
    return f"""
units AS (SELECT p.line_id, p.alloc_id, p.w, p.wt, {units} FROM fixed p JOIN shared s USING (line_id)),
q AS (SELECT *, {quot} FROM units),
r AS (SELECT *, {rem} FROM q),
ranked AS (SELECT *, {windows} FROM r),
x AS (SELECT line_id, alloc_id, w, wt, {", ".join(f"u{k}" for k in range(len(SUMMABLE)))}, {amounts} FROM ranked)"""


def select_sql(where: str) -> str:
    """The SELECT of the 1.3 dataset's rows (typed as the warehouse holds them) from the lines ``where`` picks."""
    hour = f'epoch_us(c."ChargePeriodStart") // {US_PER_HOUR}'
    line_gpu = """CASE WHEN c."ProviderName" = 'onprem' THEN json_extract_string(c."Tags", '$.gpu_uuid') END"""
    return f"""
WITH keys AS (SELECT DISTINCT resource_id, epoch_us(hour) // {US_PER_HOUR} AS hour_n FROM gpu_allocation_hourly),
base AS (
  SELECT c.*, k.hour_n AS _hour_n, {line_gpu} AS _line_gpu,
         coalesce(k.resource_id IS NOT NULL AND c."ChargeCategory" = 'Usage' AND {gpu_usage("c")}, FALSE) AS _shared
  FROM cost_line_items c LEFT JOIN keys k ON k.resource_id = c."ResourceId" AND k.hour_n = {hour}
  {where}),
shared AS (SELECT row_number() OVER () AS line_id, * FROM base WHERE _shared),
alloc AS (
  SELECT row_number() OVER () AS alloc_id, a.*, epoch_us(a.hour) // {US_PER_HOUR} AS hour_n
  FROM gpu_allocation_hourly a SEMI JOIN (SELECT DISTINCT "ResourceId", _hour_n FROM shared) s
       ON s."ResourceId" = a.resource_id AND s._hour_n = epoch_us(a.hour) // {US_PER_HOUR}),
by_gpu AS (  -- an on-prem line that names its GPU: that GPU's rows
  SELECT s.line_id, a.alloc_id FROM shared s JOIN alloc a
      ON a.resource_id = s."ResourceId" AND a.hour_n = s._hour_n AND a.gpu_uuid = s._line_gpu),
pairs AS (
  SELECT * FROM by_gpu
  UNION ALL
  SELECT s.line_id, a.alloc_id FROM shared s JOIN alloc a ON a.resource_id = s."ResourceId" AND a.hour_n = s._hour_n
  WHERE NOT EXISTS (SELECT 1 FROM by_gpu g WHERE g.line_id = s.line_id)),
parts AS (  -- a line's allocated rows: one per allocation row, its unallocated rows merged into one
  SELECT p.line_id, CASE WHEN {UNALLOCATED} THEN 0 ELSE p.alloc_id END AS alloc_id,
         any_value(a.basis) AS basis, arg_max(a.team, abs(a.cost_usd)) AS team, sum(a.share) AS share,
         sum({_units("a.cost_usd")}) AS c, sum(greatest(coalesce(a.share, 0), 0)) AS sh,
         {_SAME}
  FROM pairs p JOIN alloc a USING (alloc_id) GROUP BY 1, 2),
basis AS (SELECT line_id, alloc_id, c, sh FROM parts),
totals AS (
  SELECT b.*, sum(c) OVER (PARTITION BY line_id) AS ct, sum(sh) OVER (PARTITION BY line_id) AS st,
         count(*) OVER (PARTITION BY line_id) AS n
  FROM basis b),
weights AS (  -- exact (the allocation's own units) where every product fits in a HUGEINT, else out of 10^12
  SELECT t.line_id, t.alloc_id,
         CASE WHEN t.ct > 0 AND CAST(t.ct AS DOUBLE) * {_BIG_UNITS} < {_FITS} THEN t.c
              ELSE CAST(round(CASE WHEN t.ct > 0 THEN CAST(t.c AS DOUBLE) / CAST(t.ct AS DOUBLE)
                                   WHEN t.st > 0 THEN t.sh / t.st ELSE 1.0 / t.n END * {RATIO_SCALE}) AS HUGEINT)
         END AS w
  FROM totals t JOIN shared s USING (line_id)),
fixed AS (  -- a line whose weights all round to 0 is split equally
  SELECT line_id, alloc_id, CASE WHEN wt0 = 0 THEN 1 ELSE w END AS w,
         CASE WHEN wt0 = 0 THEN count(*) OVER (PARTITION BY line_id) ELSE wt0 END AS wt
  FROM (SELECT *, sum(w) OVER (PARTITION BY line_id) AS wt0 FROM weights)),
{_money_steps()}
SELECT {_unsplit_columns()} FROM base b WHERE NOT b._shared
UNION ALL
SELECT {_split_columns()} FROM x JOIN shared s USING (line_id) JOIN parts a USING (line_id, alloc_id)"""
