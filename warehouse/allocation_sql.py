"""The SQL of the shared-GPU chargeback (``warehouse/allocation.py`` runs it; README *Shared GPUs*).

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
   rows of a resource-hour sum exactly to its GPU cost.

A resource-day is allocated when any GPU of the resource carried a workload on that day (a pod,
a namespace, or a process in nvidia-smi's compute-apps log); other resource-days keep their cost with
the resource's team and have no rows here.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_USAGE = "(c.\"x_GpuCount\" > 0 OR c.\"x_GpuModel\" IS NOT NULL)"
US_PER_HOUR = 3_600_000_000
US_PER_DAY = 86_400_000_000
# A row's fraction of its resource-hour as an integer: 720720 (divisible by every number up to 16: GPU
# counts, MIG slices, minutes of an hour) × 1e7, so the usual fractions are exact.
WEIGHT_SCALE = 720_720 * 10 ** 7
COST_SCALE = 10 ** 15     # DECIMAL(38, 15): cost in integer units of 1e-15 USD


@dataclass(frozen=True)
class MigGeometry:
    """A MIG-capable GPU family: compute slices, memory slices and the full profile's memory (GB)."""
    match: str           # lower-case substring of the GPU model name
    compute_slices: int
    memory_slices: int
    full_memory_gb: int


# Koku's GPU_MAX_SLICES_BY_MODEL (A30 4, A100 / H100 / H200 / B200 7, RTX PRO 6000 4, RTX PRO 5000 2),
# with NVIDIA's MIG user guide for the memory geometry (eight memory slices; A30 four).
MIG_GEOMETRY = (
    MigGeometry("a30", 4, 4, 24), MigGeometry("rtx pro 6000", 4, 4, 96), MigGeometry("rtx pro 5000", 2, 2, 48),
    MigGeometry("a100-40gb", 7, 8, 40), MigGeometry("a100", 7, 8, 80), MigGeometry("h100-pcie", 7, 8, 80),
    MigGeometry("h100 nvl", 7, 8, 94), MigGeometry("h100", 7, 8, 80), MigGeometry("gh200", 7, 8, 96),
    MigGeometry("h200", 7, 8, 141), MigGeometry("b200", 7, 8, 180),
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
    memory = (f"least(1.0, greatest(1.0, round({memory_gb} / {slice_gb})) / {_case(lowered, 'memory_slices')})")
    chosen = {"compute": compute, "memory": f"coalesce({memory}, {compute})",
              "max": f"greatest(coalesce({memory}, 0), {compute})"}[mode]
    return f"coalesce({chosen}, 1.0 / {_case(lowered, 'compute_slices')})"


def compute_sql(scope: str, *, mig_weight: str, spread: bool, mps_hosts: list[str]) -> str:
    """SELECT of gpu_allocation_hourly rows for the (resource_id, day_n) pairs in ``scope``."""
    mps = " OR ".join(f"u.host GLOB '{pattern}'" for pattern in mps_hosts) or "false"
    day = f"epoch_us({{}}) // {US_PER_DAY}"
    hour = f"epoch_us({{}}) // {US_PER_HOUR}"
    return f"""
WITH scope AS (SELECT DISTINCT resource_id, day_n FROM {scope}),
lines AS (
  SELECT c."ResourceId" AS resource_id, {hour.format('c."ChargePeriodStart"')} AS hour_n,
         c."ProviderName" AS provider, c."x_Team" AS team, c."x_GpuCount" AS gpu_count,
         c."ResourceName" AS resource_name, c."EffectiveCost" AS cost, c."ServiceName" AS service,
         CASE WHEN c."ProviderName" = 'onprem' THEN json_extract_string(c."Tags", '$.gpu_uuid') END AS line_gpu
  FROM cost_line_items c SEMI JOIN scope s ON s.resource_id = c."ResourceId"
       AND s.day_n = {day.format('c."ChargePeriodStart"')}
  WHERE c."ChargeCategory" = 'Usage' AND {GPU_USAGE}),
gm AS (
  SELECT m.resource_id, {hour.format('m.hour')} AS hour_n, m.gpu_uuid, m.mig_instance, m.source, m.host,
         m.gpu_model, m.samples
  FROM gpu_metrics_hourly m SEMI JOIN scope s ON s.resource_id = m.resource_id AND s.day_n = {day.format('m.hour')}
  WHERE m.gpu_uuid IS NOT NULL),
wl AS (
  SELECT g.resource_id, g.hour_n, w.gpu_uuid, w.mig_instance, w.source, w.namespace, w.pod, w.container, w.pid,
         w.process, w.samples, w.occupied_samples, w.sharing, coalesce(w.sm_active_mean, w.util_mean / 100) AS measure
  FROM gpu_workloads_hourly w JOIN gm g ON g.source = w.source AND g.hour_n = {hour.format('w.hour')}
       AND g.gpu_uuid = w.gpu_uuid AND g.mig_instance IS NOT DISTINCT FROM w.mig_instance
  WHERE w.samples > 0),
days AS (SELECT DISTINCT resource_id, hour_n // 24 AS day_n FROM wl),
rh AS (
  SELECT resource_id, hour_n, any_value(provider) AS provider, arg_max(service, (abs(cost), service)) AS service,
         sum(cost) AS cost,
         arg_max(team, (abs(cost), team)) AS owner_team, max(gpu_count) AS billed_gpus,
         count(DISTINCT resource_name) FILTER (WHERE provider = 'onprem') AS onprem_gpus,
         bool_or(provider = 'onprem') AS onprem
  FROM lines l SEMI JOIN days d ON d.resource_id = l.resource_id AND d.day_n = l.hour_n // 24
  GROUP BY 1, 2),
onprem_gpu AS (  -- an on-prem GPU's own lines
  SELECT resource_id, hour_n, line_gpu AS gpu_uuid, sum(cost) AS cost, arg_max(team, (abs(cost), team)) AS team
  FROM lines WHERE line_gpu IS NOT NULL GROUP BY 1, 2, 3),
has_work AS (SELECT DISTINCT resource_id, hour_n, gpu_uuid, source FROM wl),
gm_one AS (  -- one source per GPU-hour: the one that saw workloads, then by name
  SELECT g.* FROM (
    SELECT g.*, dense_rank() OVER (PARTITION BY g.resource_id, g.hour_n, g.gpu_uuid
                                   ORDER BY (h.source IS NULL), g.source) AS source_rank
    FROM gm g SEMI JOIN rh ON rh.resource_id = g.resource_id AND rh.hour_n = g.hour_n
    LEFT JOIN has_work h ON h.resource_id = g.resource_id AND h.hour_n = g.hour_n AND h.gpu_uuid = g.gpu_uuid
         AND h.source = g.source) g
  WHERE source_rank = 1),
gpus AS (
  SELECT resource_id, hour_n, gpu_uuid, bool_or(mig_instance IS NOT NULL) AS mig, any_value(host) AS host,
         any_value(source) AS source
  FROM gm_one GROUP BY 1, 2, 3),
units_raw AS (
  SELECT g.resource_id, g.hour_n, g.gpu_uuid, g.mig_instance, g.source, g.host, g.samples,
         CASE WHEN g.mig_instance IS NULL THEN 1.0 ELSE {slice_weight_sql('g.mig_instance', 'g.gpu_model', mig_weight)} END
             AS raw_weight
  FROM gm_one g JOIN gpus p USING (resource_id, hour_n, gpu_uuid)
  WHERE (g.mig_instance IS NOT NULL) = p.mig),
units AS (
  SELECT *, raw_weight / greatest(1.0, sum(raw_weight) OVER (PARTITION BY resource_id, hour_n, gpu_uuid)) AS weight
  FROM units_raw),
wu AS (
  SELECT w.*, u.weight, u.host, u.samples AS unit_samples,
         sum(w.samples) OVER up AS sum_samples, max(w.occupied_samples) OVER up AS occupied_raw,
         bool_or(w.sharing = 'mps') OVER up AS mps_flag, bool_or(w.sharing IS NOT NULL) OVER up AS shared_flag,
         count(*) OVER up AS workloads, count(w.measure) OVER up AS measured,
         max(w.measure) OVER up - min(w.measure) OVER up AS measure_spread,
         sum(w.samples * w.measure) OVER up AS measure_total
  FROM wl w JOIN units u ON u.resource_id = w.resource_id AND u.hour_n = w.hour_n AND u.gpu_uuid = w.gpu_uuid
       AND u.mig_instance IS NOT DISTINCT FROM w.mig_instance AND u.source = w.source
  WINDOW up AS (PARTITION BY w.resource_id, w.hour_n, w.gpu_uuid, w.mig_instance)),
wf AS (  -- occupied: sample times any workload was on the unit (Prometheus can not tell: the sum)
  SELECT *, least(coalesce(occupied_raw, sum_samples), sum_samples) AS occupied_seen FROM wu),
wn AS (  -- N: the unit's own sample times in the hour (its gpu_metrics_hourly row)
  SELECT *, greatest(coalesce(nullif(unit_samples, 0), occupied_seen), 1) AS n_samples FROM wf),
wshare AS (
  SELECT *, least(occupied_seen, n_samples) AS occupied, shared_flag OR sum_samples > occupied_seen AS shared,
         (shared_flag OR sum_samples > occupied_seen) AND workloads > 1 AND measured = workloads
             AND measure_spread > 1e-9 AND measure_total > 0 AS by_measure
  FROM wn),
work_rows AS (
  SELECT w.resource_id, w.hour_n, w.host, w.gpu_uuid, w.mig_instance, w.namespace, w.pod, w.container, w.process,
         w.source,
         w.weight * w.occupied / w.n_samples
             * CASE WHEN by_measure THEN w.samples * w.measure / w.measure_total ELSE w.samples / w.sum_samples END
             AS share,
         CASE WHEN w.mig_instance IS NOT NULL THEN 'mig'
              WHEN w.shared AND (w.mps_flag OR {mps.replace('u.host', 'w.host')}) THEN 'mps'
              WHEN w.shared THEN 'timeslice' ELSE 'whole' END AS basis,
         CASE WHEN by_measure THEN 'measured' WHEN w.shared THEN 'equal'
              WHEN w.mig_instance IS NOT NULL THEN 'slices' ELSE 'presence' END AS method
  FROM wshare w),
unit_used AS (
  SELECT resource_id, hour_n, gpu_uuid, mig_instance, source, any_value(weight * occupied / n_samples) AS used
  FROM wshare GROUP BY 1, 2, 3, 4, 5),
idle_rows AS (  -- each unit's time without a workload
  SELECT u.resource_id, u.hour_n, u.host, u.gpu_uuid, u.mig_instance, u.source,
         u.weight - coalesce(x.used, 0) AS share
  FROM units u LEFT JOIN unit_used x ON x.resource_id = u.resource_id AND x.hour_n = u.hour_n
       AND x.gpu_uuid = u.gpu_uuid AND x.mig_instance IS NOT DISTINCT FROM u.mig_instance AND x.source = u.source
  UNION ALL  -- a MIG GPU's slices that no instance holds
  SELECT resource_id, hour_n, any_value(host), gpu_uuid, NULL, any_value(source), 1.0 - sum(weight)
  FROM units WHERE mig_instance IS NOT NULL GROUP BY resource_id, hour_n, gpu_uuid),
gpu_rows AS (
  SELECT resource_id, hour_n, host, gpu_uuid, mig_instance, namespace, pod, container, process, source, share,
         basis, method FROM work_rows
  UNION ALL
  SELECT resource_id, hour_n, host, gpu_uuid, mig_instance, NULL, NULL, NULL, NULL, source, share,
         'unallocated', 'idle' FROM idle_rows WHERE share > 1e-12),
measured_gpus AS (SELECT resource_id, hour_n, count(*) AS gpus FROM gpus GROUP BY 1, 2),
pieces AS (  -- each measured GPU's fraction of the resource-hour's cost, and its owning team
  SELECT g.resource_id, g.hour_n, g.gpu_uuid,
         CASE WHEN rh.onprem AND rh.cost <> 0 THEN coalesce(CAST(o.cost / rh.cost AS DOUBLE), 0)
              ELSE 1.0 / greatest(CASE WHEN rh.onprem THEN rh.onprem_gpus ELSE coalesce(rh.billed_gpus, 0) END,
                                  mg.gpus) END AS piece,
         coalesce(o.team, rh.owner_team) AS owner_team
  FROM gpus g JOIN rh USING (resource_id, hour_n) JOIN measured_gpus mg USING (resource_id, hour_n)
  LEFT JOIN onprem_gpu o ON o.resource_id = g.resource_id AND o.hour_n = g.hour_n AND o.gpu_uuid = g.gpu_uuid),
priced AS (
  SELECT r.*, p.piece * r.share AS fraction, p.owner_team FROM gpu_rows r JOIN pieces p USING (resource_id, hour_n, gpu_uuid)
  UNION ALL  -- the GPUs billed but not measured in the hour (all of them when none was)
  SELECT rh.resource_id, rh.hour_n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         greatest(CASE WHEN rh.onprem THEN rh.onprem_gpus ELSE coalesce(rh.billed_gpus, 0) END,
                  coalesce(mg.gpus, 0), 1) - coalesce(mg.gpus, 0),
         'unallocated', 'unmeasured', 1.0 - coalesce(sum(p.piece), 0), rh.owner_team
  FROM rh LEFT JOIN measured_gpus mg USING (resource_id, hour_n) LEFT JOIN pieces p USING (resource_id, hour_n)
  GROUP BY rh.resource_id, rh.hour_n, rh.onprem, rh.onprem_gpus, rh.billed_gpus, mg.gpus, rh.owner_team
  HAVING 1.0 - coalesce(sum(p.piece), 0) > 1e-12),
teamed AS (
  SELECT p.*, coalesce(nt.value, p.owner_team) AS team
  FROM priced p LEFT JOIN attribution_rules nt ON nt.kind = 'namespace_teams' AND nt.source = p.source
       AND nt.key = p.namespace AND p.basis <> 'unallocated'),
{_spread_sql() if spread else "final AS (SELECT * FROM teamed)"},
money AS (
  SELECT f.*, rh.cost, rh.provider, rh.service,
         CAST(round(greatest(f.fraction, 0) * {WEIGHT_SCALE}) AS HUGEINT) AS w,
         CAST(floor(abs(rh.cost)) AS HUGEINT) * {COST_SCALE}
           + CAST((abs(rh.cost) - floor(abs(rh.cost))) * {COST_SCALE} AS HUGEINT) AS units,
         rh.cost < 0 AS negative
  FROM final f JOIN rh USING (resource_id, hour_n)),
split AS (
  SELECT *, (units * w) // sum(w) OVER h AS base, (units * w) % sum(w) OVER h AS remainder FROM money
  WINDOW h AS (PARTITION BY resource_id, hour_n)),
ranked AS (
  SELECT *, units - sum(base) OVER h AS leftover,
         row_number() OVER (PARTITION BY resource_id, hour_n ORDER BY remainder DESC, w DESC, gpu_uuid, mig_instance,
                            namespace, pod, container, process, basis, team, source) AS rank
  FROM split WINDOW h AS (PARTITION BY resource_id, hour_n)),
amounts AS (SELECT *, base + CASE WHEN rank <= leftover THEN 1 ELSE 0 END AS amount FROM ranked)
SELECT make_timestamptz(hour_n * {US_PER_HOUR}) AS hour, resource_id, provider, host, gpu_uuid, mig_instance,
       namespace, pod, container, process, team, round(share, 12) AS share,
       (CASE WHEN negative THEN -1 ELSE 1 END) * ({units_to_decimal('amount')}) AS cost_usd,
       basis, method, source, owner_team, service
FROM amounts"""


def units_to_decimal(units: str) -> str:
    """SQL: an integer number of 1e-15 USD as DECIMAL(38, 15), exactly."""
    return (f"CAST({units} // {COST_SCALE} AS DECIMAL(38, 15)) + CAST(CAST({units} % {COST_SCALE} AS BIGINT) "
            f"AS DECIMAL(18, 0)) * CAST(0.000000000000001 AS DECIMAL(16, 15))")


def _spread_sql() -> str:
    """Koku's rule: a resource-day's unallocated cost goes to its namespaces in proportion to the
    GPU-hours they held that day (hours in which no namespace ran included)."""
    return """
receivers AS (
  SELECT resource_id, hour_n // 24 AS day_n, namespace, team, sum(share) AS held
  FROM teamed WHERE basis <> 'unallocated' GROUP BY 1, 2, 3, 4),
receiver_totals AS (SELECT resource_id, day_n, sum(held) AS held_total FROM receivers GROUP BY 1, 2),
idle AS (
  SELECT resource_id, hour_n, sum(fraction) AS fraction, sum(share) AS share, any_value(owner_team) AS owner_team
  FROM teamed WHERE basis = 'unallocated' GROUP BY 1, 2),
final AS (
  SELECT * FROM teamed
  WHERE basis <> 'unallocated' OR NOT EXISTS (
      SELECT 1 FROM receiver_totals t WHERE t.resource_id = teamed.resource_id AND t.day_n = teamed.hour_n // 24
        AND t.held_total > 0)
  UNION ALL
  SELECT i.resource_id, i.hour_n, NULL, NULL, NULL, r.namespace, NULL, NULL, NULL, NULL,
         i.share * r.held / t.held_total, 'unallocated', 'spread', i.fraction * r.held / t.held_total,
         i.owner_team, r.team
  FROM idle i JOIN receiver_totals t ON t.resource_id = i.resource_id AND t.day_n = i.hour_n // 24
       JOIN receivers r ON r.resource_id = i.resource_id AND r.day_n = i.hour_n // 24
  WHERE t.held_total > 0)"""
