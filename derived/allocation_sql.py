"""The SQL of the shared-GPU chargeback (``derived/allocation.py`` runs it; docs/sources/shared-gpus.md).

One statement turns a scope of (resource, UTC day) pairs into ``gpu_allocation_hourly`` rows:

1. **The GPU part of each resource-hour's bill**: the EffectiveCost of the resource's GPU usage
   lines that start in the hour (``ChargeCategory = 'Usage'``, a GPU count or model on the line),
   i.e. the whole GPU instance (SkyPilot prices a GPU instance as its accelerators: the vCPUs and
   memory come with them), split equally over its GPUs (``x_GpuCount``; more GPUs measured than
   billed: the measured count). An on-prem node bills one line set per GPU (``Tags.gpu_uuid``): each
   GPU carries its own lines.
2. **Units** of each GPU: the whole GPU, or its MIG slices weighted by the profile's compute slices
   over the model's maximum (``mig_weight = "compute"``: Koku's rule; ``"memory"``: memory slices;
   ``"max"``: the larger), scaled down when the slices' weights add up to more than the GPU.
3. **Workloads** of each unit by measured presence: a workload seen in ``samples`` of the unit's
   ``N`` sample times holds ``samples / N`` of it; when workloads overlap at one time (time-slicing,
   MPS), the occupied part of the unit (``occupied_samples / N``) is split by their measured SM
   activity (else utilisation) × presence when the source measured them per workload and they
   differ, else by presence alone (``method = "equal"``).
4. **The remainder** of each unit and GPU (idle time, unused slices, GPUs without metrics) is
   ``basis = "unallocated"``, owned by the resource's team (``unallocated = "show"``) or spread
   over the resource-day's namespaces in proportion to their GPU-hours (``"spread"``: Koku).
5. **Exact money**: each row's fraction of its resource-hour becomes an integer weight (1/7.2072e12) and
   the hour's cost, in units of 1e-15 USD (the ledger's scale), is divided by largest remainder: the
   rows of a resource-hour sum exactly to its GPU cost. The division never forms ``units · weight``
   (up to 10^38 · 7.2e12, past HUGEINT's 1.7e38): it splits ``units`` by the hour's total weight first,
   so every intermediate stays at most ``units`` (below 10^38 for a cost below the ledger's 10^23).

A resource-day is allocated when any GPU of the resource carried a workload on that day (a pod,
a namespace, or a process in nvidia-smi's compute-apps log); other resource-days keep their cost with
the resource's team and have no rows here.
"""

from __future__ import annotations

from dataclasses import dataclass

US_PER_HOUR = 3_600_000_000
US_PER_DAY = 86_400_000_000
# A row's fraction of its resource-hour as an integer: 720720 (divisible by every number up to 16: GPU
# counts, MIG slices, minutes of an hour) × 1e7, so the usual fractions are exact.
WEIGHT_SCALE = 720_720 * 10**7
COST_SCALE = 10**15  # DECIMAL(38, 15): cost in integer units of 1e-15 USD


@dataclass(frozen=True)
class MigGeometry:
    """A MIG-capable GPU family: compute slices, memory slices and the full profile's memory (GB)."""

    match: str  # lower-case substring of the GPU model name
    compute_slices: int
    memory_slices: int
    full_memory_gb: int


# Koku's GPU_MAX_SLICES_BY_MODEL (A30 4, A100 / H100 / H200 / B200 7, RTX PRO 6000 4, RTX PRO 5000 2),
# with NVIDIA's MIG user guide for the memory geometry (eight memory slices; A30 four).
MIG_GEOMETRY = (
    MigGeometry("a30", 4, 4, 24),
    MigGeometry("rtx pro 6000", 4, 4, 96),
    MigGeometry("rtx pro 5000", 2, 2, 48),
    MigGeometry("a100-40gb", 7, 8, 40),
    MigGeometry("a100", 7, 8, 80),
    MigGeometry("h100-pcie", 7, 8, 80),
    MigGeometry("h100 nvl", 7, 8, 94),
    MigGeometry("h100", 7, 8, 80),
    MigGeometry("gh200", 7, 8, 96),
    MigGeometry("h200", 7, 8, 141),
    MigGeometry("b200", 7, 8, 180),
)
DEFAULT_GEOMETRY = MigGeometry("", 7, 8, 80)


def _case(model: str, attribute: str) -> str:
    whens = " ".join(f"WHEN {model} LIKE '%{g.match}%' THEN {getattr(g, attribute)}" for g in MIG_GEOMETRY)
    return f"(CASE {whens} ELSE {getattr(DEFAULT_GEOMETRY, attribute)} END)"


def slice_weight_sql(mig: str, model: str, mode: str) -> str:
    """SQL: a MIG slice's share of its GPU from its profile (``3g.40gb/2`` → 3/7 by compute)."""
    lowered = f"lower(coalesce({model}, ''))"
    compute = f"TRY_CAST(regexp_extract({mig}, '(\\d+)g\\.', 1) AS DOUBLE) / {_case(lowered, 'compute_slices')}"
    memory_gb = f"TRY_CAST(regexp_extract({mig}, 'g\\.(\\d+)gb', 1) AS DOUBLE)"
    slice_gb = f"({_case(lowered, 'full_memory_gb')} / {_case(lowered, 'memory_slices')})"
    memory = f"least(1.0, greatest(1.0, round({memory_gb} / {slice_gb})) / {_case(lowered, 'memory_slices')})"
    chosen = {
        "compute": compute,
        "memory": f"coalesce({memory}, {compute})",
        "max": f"greatest(coalesce({memory}, 0), {compute})",
    }[mode]
    return f"coalesce({chosen}, 1.0 / {_case(lowered, 'compute_slices')})"


def compute_sql(
    scope: str,
    *,
    lines: str,
    mig_weight: str,
    spread: bool,
    mps_hosts: list[str],
    days: tuple[int, int] | None = None,
    grain: str = "day",
) -> str:
    """SELECT of gpu_allocation_hourly rows for the pairs in ``scope``: ``grain = "day"``, (resource_id,
    day_n) pairs, each resource-day allocated when a workload ran on it; ``"hour"``, (resource_id,
    hour_n) pairs of resource-days the caller knows to be allocated (the hours a load changed on a
    resource-day whose other hours stand). ``lines``: a table of the scope's GPU usage lines, read from the
    bill once for every batch (:func:`derived.gpu_lines.capture`). ``days`` (first, last day number)
    bounds the scans so that the tables' zone maps skip other days.

    The string keys (resource, GPU, slice, source) are joined once; every later step joins and groups
    on integer ids (``rh_id`` a resource-hour, ``gpu_id`` a GPU-hour, ``unit_id`` a GPU's or slice's hour)."""
    if grain not in ("day", "hour") or (spread and grain == "hour"):
        raise ValueError(f"allocation: no {grain!r} grain{' with spread' if spread else ''}")
    mps = " OR ".join(f"s.host GLOB '{pattern}'" for pattern in mps_hosts) or "false"
    per = US_PER_DAY if grain == "day" else US_PER_HOUR
    key = "day_n" if grain == "day" else "hour_n"
    grain_n = f"epoch_us({{}}) // {per}"  # a timestamp's day or hour number, as the scope holds it
    hour = f"epoch_us({{}}) // {US_PER_HOUR}"

    def within(column: str) -> str:
        if days is None:
            return "TRUE"
        return (
            f"{column} >= make_timestamptz({int(days[0]) * US_PER_DAY}) "
            f"AND {column} < make_timestamptz({(int(days[1]) + 1) * US_PER_DAY})"
        )

    # day grain: a resource-day is allocated when a workload ran on it; hour grain: the caller checked
    allocated = (
        "FROM lines l SEMI JOIN days d ON d.resource_id = l.resource_id AND d.day_n = l.hour_n // 24"
        if grain == "day"
        else "FROM lines l"
    )
    billed = "CASE WHEN rh.onprem THEN rh.onprem_gpus ELSE coalesce(rh.billed_gpus, 0) END"
    return f"""
WITH scope AS (SELECT DISTINCT resource_id, {key} FROM {scope}),
lines AS (
  SELECT c."ResourceId" AS resource_id, {hour.format('c."ChargePeriodStart"')} AS hour_n,
         c."ProviderName" AS provider, c."x_Team" AS team, c."x_GpuCount" AS gpu_count,
         c."ResourceName" AS resource_name, c."EffectiveCost" AS cost, c."ServiceName" AS service,
         CASE WHEN c."ProviderName" = 'onprem' THEN json_extract_string(c."Tags", '$.gpu_uuid') END AS line_gpu
  FROM {lines} c SEMI JOIN scope s ON s.resource_id = c."ResourceId"
       AND s.{key} = {grain_n.format('c."ChargePeriodStart"')}
  WHERE {within('c."ChargePeriodStart"')}),
gm0 AS (  -- the measured GPU-hours (and slices) of the scope, each numbered: gm_id
  SELECT row_number() OVER () AS gm_id, m.resource_id, {hour.format("m.hour")} AS hour_n, m.gpu_uuid, m.mig_instance,
         m.source, m.host, m.gpu_model, m.samples
  FROM gpu_metrics_hourly m SEMI JOIN scope s ON s.resource_id = m.resource_id AND s.{key} = {grain_n.format("m.hour")}
  WHERE m.gpu_uuid IS NOT NULL AND {within("m.hour")}),
wl0 AS (  -- their workloads: the wide stream, joined once on the string keys and then on gm_id only
  SELECT g.gm_id, w.namespace, w.pod, w.container, w.process, w.samples, w.occupied_samples, w.sharing,
         coalesce(w.sm_active_mean, w.util_mean / 100) AS measure
  FROM gpu_workloads_hourly w JOIN gm0 g ON g.source = w.source AND g.hour_n = {hour.format("w.hour")}
       AND g.gpu_uuid = w.gpu_uuid AND g.mig_instance IS NOT DISTINCT FROM w.mig_instance
  WHERE w.samples > 0 AND {within("w.hour")}),
gm_work AS (  -- per GPU-hour (or slice) of a source: its workloads together (occupied: times any was on it)
  SELECT gm_id, sum(samples) AS sum_samples,
         least(coalesce(max(occupied_samples), sum(samples)), sum(samples)) AS occupied_seen,
         bool_or(sharing = 'mps') AS mps_flag, bool_or(sharing IS NOT NULL) AS shared_flag, count(*) AS workloads,
         count(measure) AS measured, max(measure) - min(measure) AS measure_spread,
         sum(samples * measure) AS measure_total
  FROM wl0 GROUP BY 1),
days AS (SELECT DISTINCT g.resource_id, g.hour_n // 24 AS day_n FROM gm_work x JOIN gm0 g USING (gm_id)),
rh AS (  -- the allocated resource-hours: their GPU cost (also in integer units of 1e-15 USD) and owner
  SELECT row_number() OVER () AS rh_id, *, cost < 0 AS negative,
         CAST(floor(abs(cost)) AS HUGEINT) * {COST_SCALE}
           + CAST((abs(cost) - floor(abs(cost))) * {COST_SCALE} AS HUGEINT) AS units
  FROM (
    SELECT resource_id, hour_n, any_value(provider) AS provider, arg_max(service, (abs(cost), service)) AS service,
           sum(cost) AS cost, arg_max(team, (abs(cost), team)) AS owner_team, max(gpu_count) AS billed_gpus,
           count(DISTINCT resource_name) FILTER (WHERE provider = 'onprem') AS onprem_gpus,
           bool_or(provider = 'onprem') AS onprem
    {allocated}
    GROUP BY 1, 2)),
onprem_gpu AS (  -- an on-prem GPU's own lines
  SELECT r.rh_id, l.line_gpu AS gpu_uuid, sum(l.cost) AS cost, arg_max(l.team, (abs(l.cost), l.team)) AS team
  FROM lines l JOIN rh r USING (resource_id, hour_n) WHERE l.line_gpu IS NOT NULL GROUP BY 1, 2),
gm AS (
  SELECT r.rh_id, g.* EXCLUDE (resource_id, hour_n), x.gm_id IS NOT NULL AS worked
  FROM gm0 g JOIN rh r USING (resource_id, hour_n) LEFT JOIN gm_work x USING (gm_id)),
chosen AS (  -- one source per GPU-hour: one that saw workloads, then the first by name
  SELECT rh_id, gpu_uuid, arg_min(source, ((NOT worked), source)) AS source
  FROM (SELECT rh_id, gpu_uuid, source, bool_or(worked) AS worked FROM gm GROUP BY ALL) GROUP BY 1, 2),
gpus AS (
  SELECT row_number() OVER () AS gpu_id, * FROM (
    SELECT g.rh_id, g.gpu_uuid, any_value(g.source) AS source, bool_or(g.mig_instance IS NOT NULL) AS mig
    FROM gm g SEMI JOIN chosen c ON c.rh_id = g.rh_id AND c.gpu_uuid = g.gpu_uuid AND c.source = g.source
    GROUP BY 1, 2)),
measured_gpus AS (SELECT rh_id, count(*) AS gpus FROM gpus GROUP BY 1),
pieces AS (  -- each measured GPU's fraction of the resource-hour's cost, and its owning team
  SELECT g.gpu_id, g.rh_id,
         CASE WHEN rh.onprem AND rh.cost <> 0 THEN coalesce(CAST(o.cost / rh.cost AS DOUBLE), 0)
              ELSE 1.0 / greatest({billed}, mg.gpus) END AS piece,
         coalesce(o.team, rh.owner_team) AS owner_team
  FROM gpus g JOIN rh USING (rh_id) JOIN measured_gpus mg USING (rh_id)
  LEFT JOIN onprem_gpu o ON o.rh_id = g.rh_id AND o.gpu_uuid = g.gpu_uuid),
piece_totals AS (SELECT rh_id, sum(piece) AS pieces FROM pieces GROUP BY 1),
units_raw AS (  -- a unit: a GPU's or slice's hour of the chosen source (unit_id: its gm_id)
  SELECT g.gm_id AS unit_id, p.gpu_id, p.rh_id, g.gpu_uuid, g.mig_instance, g.source, g.host, g.samples,
         CASE WHEN g.mig_instance IS NULL THEN 1.0 ELSE {slice_weight_sql("g.mig_instance", "g.gpu_model", mig_weight)} END
             AS raw_weight
  FROM gm g JOIN gpus p ON p.rh_id = g.rh_id AND p.gpu_uuid = g.gpu_uuid AND p.source = g.source
  WHERE (g.mig_instance IS NOT NULL) = p.mig),
gpu_weight AS (SELECT gpu_id, sum(raw_weight) AS total FROM units_raw GROUP BY 1),
units AS (
  SELECT u.*, u.raw_weight / greatest(1.0, t.total) AS weight, p.piece, p.owner_team
  FROM units_raw u JOIN gpu_weight t USING (gpu_id) JOIN pieces p USING (gpu_id)),
unit_n AS (  -- N: the unit's own sample times in the hour (its gpu_metrics_hourly row)
  SELECT x.*, u.rh_id, u.gpu_id, u.gpu_uuid, u.source, u.piece, u.owner_team, u.weight, u.host, u.mig_instance,
         greatest(coalesce(nullif(u.samples, 0), x.occupied_seen), 1) AS n_samples,
         x.shared_flag OR x.sum_samples > x.occupied_seen AS shared
  FROM gm_work x JOIN units u ON u.unit_id = x.gm_id),
unit_state AS (
  SELECT s.gm_id AS unit_id, s.rh_id, s.gpu_id, s.host, s.gpu_uuid, s.mig_instance, s.source, s.piece, s.owner_team,
         s.sum_samples, s.measure_total,
         s.weight * least(s.occupied_seen, s.n_samples) / s.n_samples AS used,
         s.shared AND s.workloads > 1 AND s.measured = s.workloads AND s.measure_spread > 1e-9
             AND s.measure_total > 0 AS by_measure,
         CASE WHEN s.mig_instance IS NOT NULL THEN 'mig' WHEN s.shared AND (s.mps_flag OR {mps}) THEN 'mps'
              WHEN s.shared THEN 'timeslice' ELSE 'whole' END AS basis,
         s.shared, s.mig_instance IS NOT NULL AS is_slice
  FROM unit_n s),
work_rows AS (
  SELECT s.rh_id, s.host, s.gpu_uuid, s.mig_instance, w.namespace, w.pod, w.container, w.process, s.source,
         s.used * CASE WHEN s.by_measure THEN w.samples * w.measure / s.measure_total
                       ELSE w.samples / s.sum_samples END AS share,
         s.basis,
         CASE WHEN s.by_measure THEN 'measured' WHEN s.shared THEN 'equal' WHEN s.is_slice THEN 'slices'
              ELSE 'presence' END AS method,
         s.piece, s.owner_team
  FROM wl0 w JOIN unit_state s ON s.unit_id = w.gm_id),
idle_rows AS (  -- each unit's time without a workload, and a MIG GPU's slices no instance holds
  SELECT u.rh_id, u.host, u.gpu_uuid, u.mig_instance, u.source, u.weight - coalesce(s.used, 0) AS share,
         u.piece, u.owner_team
  FROM units u LEFT JOIN unit_state s USING (unit_id)
  UNION ALL
  SELECT rh_id, any_value(host), any_value(gpu_uuid), NULL, any_value(source), 1.0 - sum(weight),
         any_value(piece), any_value(owner_team)
  FROM units WHERE mig_instance IS NOT NULL GROUP BY rh_id, gpu_id),
priced AS (
  SELECT r.* EXCLUDE (piece), r.piece * r.share AS fraction FROM (
    SELECT * FROM work_rows
    UNION ALL BY NAME
    SELECT *, 'unallocated' AS basis, 'idle' AS method FROM idle_rows WHERE share > 1e-12) r
  UNION ALL BY NAME  -- the GPUs billed but not measured in the hour (all of them when none was)
  SELECT rh.rh_id, greatest({billed}, coalesce(mg.gpus, 0), 1) - coalesce(mg.gpus, 0) AS share,
         'unallocated' AS basis, 'unmeasured' AS method, 1.0 - coalesce(pt.pieces, 0) AS fraction,
         rh.owner_team
  FROM rh LEFT JOIN measured_gpus mg USING (rh_id) LEFT JOIN piece_totals pt USING (rh_id)
  WHERE 1.0 - coalesce(pt.pieces, 0) > 1e-12),
teamed AS (
  SELECT p.*, coalesce(nt.value, p.owner_team) AS team
  FROM priced p LEFT JOIN attribution_rules nt ON nt.kind = 'namespace_teams' AND nt.source = p.source
       AND nt.key = p.namespace AND p.basis <> 'unallocated'),
{_spread_sql() if spread else "final AS (SELECT * FROM teamed)"},
numbered AS (  -- rid: a row id for this statement; tiebreak: the row's content, so ties break the same every run
  SELECT row_number() OVER () AS rid,
         hash(gpu_uuid, mig_instance, namespace, pod, container, process, basis, method, team, source) AS tiebreak, *
  FROM final),
weights AS (  -- the money step runs on narrow rows: a row id, its resource-hour, its integer weight
  SELECT rid, tiebreak, rh_id, CAST(round(greatest(fraction, 0) * {WEIGHT_SCALE}) AS HUGEINT) AS w FROM numbered),
totals AS (SELECT rh_id, sum(w) AS wt FROM weights GROUP BY 1),
quotients AS (  -- units · w / wt as (units // wt) · w + (units % wt) · w / wt: no product past HUGEINT
  SELECT w.rid, w.tiebreak, w.rh_id, w.w, t.wt, rh.units // t.wt AS whole, rh.units % t.wt AS part
  FROM weights w JOIN totals t USING (rh_id) JOIN rh USING (rh_id)),
based AS (
  SELECT rid, tiebreak, rh_id, whole * w + (part * w) // wt AS base, (part * w) % wt AS remainder FROM quotients),
leftover AS (SELECT b.rh_id, any_value(rh.units) - sum(b.base) AS leftover FROM based b JOIN rh USING (rh_id) GROUP BY 1),
ranked AS (  -- largest remainder: the units integer division leaves go to the rows it shortchanged most
  SELECT rid, row_number() OVER (PARTITION BY rh_id ORDER BY remainder DESC, tiebreak) AS rank
  FROM based WHERE remainder > 0),
amounts AS (
  SELECT b.rid, b.base + CASE WHEN r.rank <= l.leftover THEN 1 ELSE 0 END AS amount
  FROM based b JOIN leftover l USING (rh_id) LEFT JOIN ranked r USING (rid))
SELECT make_timestamptz(rh.hour_n * {US_PER_HOUR}) AS hour, rh.resource_id, rh.provider, n.host, n.gpu_uuid,
       n.mig_instance, n.namespace, n.pod, n.container, n.process, n.team, round(n.share, 12) AS share,
       (CASE WHEN rh.negative THEN -1 ELSE 1 END) * ({units_to_decimal("a.amount")}) AS cost_usd,
       n.basis, n.method, n.source, n.owner_team, rh.service
FROM numbered n JOIN amounts a USING (rid) JOIN rh USING (rh_id)
"""


def units_to_decimal(units: str) -> str:
    """SQL: an integer number of 1e-15 USD as DECIMAL(38, 15), exactly."""
    # the unscaled value of 1e-15 at scale 15 is 1: the product is the integer itself at scale 15 (no rounding)
    return f"CAST(CAST({units} AS DECIMAL(38, 0)) * CAST(0.000000000000001 AS DECIMAL(16, 15)) AS DECIMAL(38, 15))"


def decimal_units_sql(cost: str) -> str:
    """SQL: the absolute value of a DECIMAL(38, 15) amount as an integer number of 1e-15 USD (HUGEINT, exact)."""
    whole = f"floor(abs({cost}))"
    return f"(CAST({whole} AS HUGEINT) * {COST_SCALE} + CAST((abs({cost}) - {whole}) * {COST_SCALE} AS HUGEINT))"


def decimal_share_sql(cost: str, share: str) -> str:
    """SQL: a DECIMAL(38, 15) amount times a DOUBLE share in [0, 1] taken to 15 decimals (a DOUBLE's own
    precision), rounded half away from zero to the ledger's 15, for any amount the ledger holds (below
    10^23): the product is formed as ``units // 10^15 · k + (units % 10^15 · k) / 10^15``, every term at
    most ``units``. DuckDB's ``DECIMAL(38, 15) × DECIMAL(18, 12)`` is a DECIMAL(38, 27) that overflowed from
    about $1.7·10^11, and a share to 12 decimals was off by up to $0.5 on $10^12."""
    units = decimal_units_sql(cost)
    scale = 10**15
    k = f"CAST(round({share} * {scale}) AS HUGEINT)"  # the share in units of 10^-15
    scaled = f"(({units}) // {scale} * {k} + (({units}) % {scale} * {k} + {scale // 2}) // {scale})"
    return f"(CASE WHEN {cost} < 0 THEN -1 ELSE 1 END * {units_to_decimal(scaled)})"


def decimal_divide_sql(cost: str, count: str) -> str:
    """SQL: a DECIMAL(38, 15) amount divided by a whole ``count`` ≥ 1, rounded half away from zero to the
    ledger's 15 decimals, exactly (DuckDB divides a DECIMAL in DOUBLE: $10^12 / 2 came back
    500000000000.000006643777536)."""
    units = decimal_units_sql(cost)
    n = f"CAST({count} AS HUGEINT)"
    return f"(CASE WHEN {cost} < 0 THEN -1 ELSE 1 END * {units_to_decimal(f'(({units}) + {n} // 2) // {n}')})"


def _spread_sql() -> str:
    """Koku's rule: a resource-day's unallocated cost goes to its namespaces in proportion to the
    GPU-hours they held that day (hours in which no namespace ran included)."""
    return """
teamed_days AS (SELECT t.*, rh.resource_id, rh.hour_n // 24 AS day_n FROM teamed t JOIN rh USING (rh_id)),
receivers AS (
  SELECT resource_id, day_n, namespace, team, sum(share) AS held
  FROM teamed_days WHERE basis <> 'unallocated' GROUP BY 1, 2, 3, 4),
receiver_totals AS (
  SELECT resource_id, day_n, sum(held) AS held_total FROM receivers GROUP BY 1, 2 HAVING sum(held) > 0),
idle AS (
  SELECT rh_id, any_value(resource_id) AS resource_id, any_value(day_n) AS day_n, sum(fraction) AS fraction,
         sum(share) AS share, any_value(owner_team) AS owner_team
  FROM teamed_days WHERE basis = 'unallocated' GROUP BY 1),
final AS (
  SELECT t.* EXCLUDE (resource_id, day_n) FROM teamed_days t
  WHERE t.basis <> 'unallocated' OR NOT EXISTS (
      SELECT 1 FROM receiver_totals r WHERE r.resource_id = t.resource_id AND r.day_n = t.day_n)
  UNION ALL BY NAME
  SELECT i.rh_id, r.namespace, i.share * r.held / t.held_total AS share, 'unallocated' AS basis, 'spread' AS method,
         i.fraction * r.held / t.held_total AS fraction, i.owner_team, r.team
  FROM idle i JOIN receiver_totals t ON t.resource_id = i.resource_id AND t.day_n = i.day_n
       JOIN receivers r ON r.resource_id = i.resource_id AND r.day_n = i.day_n)"""
