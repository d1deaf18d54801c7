"""The minute-level shape of a GPU's engine activity in each hour, rolled up beside the hourly means
(``rollup_sql.hourly_table``): what the busy-waste kinds (models/busy_profile.py) need and an hourly
mean hides.

Per (hour, GPU, MIG slice), from the samples whose engine activity is known
(``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, else ``DCGM_FI_PROF_SM_ACTIVE``):

* ``held_idle_minutes``: minutes the GPU held at least ``HELD_MIB`` of memory with the engine idle;
* ``idle_streak_minutes``: the hour's longest run of consecutive idle samples, in minutes;
* ``idle_dips``: the runs of idle samples that follow a busy sample and end in one (the engine dropped
  to idle and came back: a training loop waiting for its next batch);
* ``pcie_rx_idle_bps``: the host-to-device rate (``DCGM_FI_PROF_PCIE_RX_BYTES``) while idle.

A sample's minutes are the hour's 60 minutes shared by its samples (the exporter's interval is even); an
hour without engine samples gets NULLs: unknown, never zero.
"""

from __future__ import annotations

IDLE_BELOW = 0.05  # engine activity (0-1) under which a sample is idle
HELD_MIB = 1024.0  # memory a process holds when it has loaded anything (a CUDA context alone is ~300-500 MiB)
SHAPE_COLUMNS = ("pcie_rx_idle_bps", "held_idle_minutes", "idle_streak_minutes", "idle_dips")


def shape_sql(relation: str, hour_number: str) -> str:
    """SELECT (_hour_n, gpu_uuid, mig_instance, *SHAPE_COLUMNS) over a SAMPLE_SCHEMA relation;
    ``hour_number`` is the SQL of a sample's hour number (``rollup_sql.hour_number_sql('ts')``)."""
    key = "gpu_uuid, mig_instance, _hour_n"
    return f"""
WITH per_ts AS (
  SELECT gpu_uuid, mig_instance, ts, {hour_number} AS _hour_n, max(coalesce(gr_active, sm_active)) AS engine,
         max(mem_used_mib) AS mem, max(pcie_rx_bps) AS rx
  FROM {relation} WHERE gpu_uuid IS NOT NULL AND ts IS NOT NULL GROUP BY gpu_uuid, mig_instance, ts),
flagged AS (
  SELECT *, engine < {IDLE_BELOW} AS idle, count(*) OVER (PARTITION BY {key}) AS n
  FROM per_ts WHERE engine IS NOT NULL AND isfinite(engine)),
runs AS (
  SELECT *, sum(CASE WHEN idle IS DISTINCT FROM prev THEN 1 ELSE 0 END) OVER (PARTITION BY {key} ORDER BY ts) AS run
  FROM (SELECT *, lag(idle) OVER (PARTITION BY {key} ORDER BY ts) AS prev FROM flagged)),
idle_runs AS (
  SELECT {key}, run, count(*) AS length, any_value(n) AS n, bool_or(prev IS NOT NULL AND NOT prev) AS after_busy
  FROM runs WHERE idle GROUP BY {key}, run),
closed AS (  -- an idle run that a busy sample ends: the run after it exists
  SELECT r.gpu_uuid, r.mig_instance, r._hour_n, count(*) AS dips
  FROM idle_runs r SEMI JOIN runs b ON b.gpu_uuid = r.gpu_uuid AND b.mig_instance IS NOT DISTINCT FROM r.mig_instance
       AND b._hour_n = r._hour_n AND b.run = r.run + 1
  WHERE r.after_busy GROUP BY ALL),
per_hour AS (
  SELECT {key}, avg(rx) FILTER (WHERE idle) AS pcie_rx_idle_bps,
         60.0 * count(*) FILTER (WHERE idle AND mem >= {HELD_MIB}) / count(*) AS held_idle_minutes
  FROM flagged GROUP BY {key}),
streaks AS (SELECT {key}, max(60.0 * length / n) AS idle_streak_minutes FROM idle_runs GROUP BY {key})
SELECT h._hour_n, h.gpu_uuid, h.mig_instance, round(h.pcie_rx_idle_bps, 3) AS pcie_rx_idle_bps,
       round(h.held_idle_minutes, 6) AS held_idle_minutes, round(coalesce(s.idle_streak_minutes, 0), 6) AS idle_streak_minutes,
       CAST(coalesce(c.dips, 0) AS INTEGER) AS idle_dips
FROM per_hour h
LEFT JOIN streaks s ON s.gpu_uuid = h.gpu_uuid AND s.mig_instance IS NOT DISTINCT FROM h.mig_instance AND s._hour_n = h._hour_n
LEFT JOIN closed c ON c.gpu_uuid = h.gpu_uuid AND c.mig_instance IS NOT DISTINCT FROM h.mig_instance AND c._hour_n = h._hour_n"""
