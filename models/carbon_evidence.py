"""``evidence.kg_co2e_month_saved``: the emissions a finding's change removes, from measured energy.

One function, :func:`annotate`, runs over every reconciled recommendation (``models.run.analyse``)
and fills the figure for each kind whose spec says its change frees GPU-hours (``carbon="idle_hours"`` or
``"gpu_hours"`` in its spec module, models/kinds/<kind>.py: ``REMOVES_GPU_HOURS``); the ``"pricing_only"`` kinds
(``PRICING_ONLY``) change what an hour costs, or storage, not how many GPU-hours run, and get none. The rule is
chosen by that fact, never by the kind's name. The figure is per month (30.4375 days), in kg CO2e, from ``carbon_hourly`` over the finding's window (``first_hour``/``last_hour``, else the
``window_days`` up to the resource's last measured hour):

* the idle hours (``carbon="idle_hours"``: the change releases the resource or schedules its GPUs off when idle,
  ``idle_gpu``): the measured energy of the idle hours the change stops — the resource's
  hours whose busiest GPU stayed below ``util_threshold_pct``; for a pod holding an idle GPU, the
  pod's own rows in those hours;
* for ``carbon="gpu_hours"``, what the finding proposes. Fewer GPUs of the same model (``gpu_count``): the measured energy of the GPUs given up (the least
  used ones, by their measured energy in the window);
* another GPU type or count (``gpu_type``, ``quantization``, a ``gpu_count`` move to another model):
  the measured energy × (1 − proposed GPUs × TDP / current GPUs × TDP) — the new GPUs are not
  measured yet, so their draw is scaled by the spec sheets (``gpu_specs.tdp_w``); negative when the
  move draws more;
* a pod's own change on a shared node (any other kind whose finding names its pod and the GPU units it acts on,
  ``evidence.gpu_units``: holding memory idle, a stalled job, an input-bound or FP32 trainer): the measured energy
  of the pod's own rows × the share of the pod's cost the change saves (its GPU-hours are what the dollars price).

Each figure carries ``kg_co2e_month_saved_basis`` saying which rule made it; a finding whose
resource has no measured energy gets ``None`` and the basis says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb

from gpufinops.models import registry
from gpufinops.models.recommendation import Recommendation

# the built-in kinds of each side (a kind registered later is read from its spec by `annotate`); the storage
# kinds change volumes, snapshots and object classes, whose energy nothing measures
REMOVES_GPU_HOURS = frozenset(s.kind for s in registry.MODELS if s.carbon != registry.PRICING_ONLY)
PRICING_ONLY = frozenset(s.kind for s in registry.MODELS if s.carbon == registry.PRICING_ONLY)
DAYS_PER_MONTH = 30.4375


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


BATCH = "_gpufinops_carbon_findings"
# each finding's pod's measured kg over its window (a WHERE and GROUP BY to follow)
POD_KG = f"""
        SELECT b.i, sum(c.kg_co2e) FROM {BATCH} b
        JOIN carbon_hourly c ON c.resource_id = b.resource_id AND c.hour BETWEEN b.first AND b.last
             AND c.pod = b.pod AND c.namespace IS NOT DISTINCT FROM b.namespace AND c.energy_basis = 'measured'"""


def _tdp(tdps: dict[str, float], model: Any) -> float | None:
    return tdps.get(str(model).lower()) if model else None


def _windows(con: duckdb.DuckDBPyConnection, recs: list[Recommendation]) -> list[tuple]:
    """(index, resource, first, last, threshold, namespace, pod) of each finding with a window: its
    evidence's first/last hour, else ``window_days`` up to the resource's last measured hour."""
    resources = sorted({str(r.resource_id) for r in recs if r.resource_id})
    last_hours = dict(
        con.execute(
            "SELECT resource_id, max(hour) FROM carbon_hourly WHERE energy_basis = 'measured' "
            "AND list_contains(?::VARCHAR[], resource_id) GROUP BY 1",
            [resources],
        ).fetchall()
    )
    out = []
    for i, rec in enumerate(recs):
        first, last = _when(rec.evidence.get("first_hour")), _when(rec.evidence.get("last_hour"))
        days = rec.evidence.get("window_days")
        end = last_hours.get(str(rec.resource_id))
        if (first is None or last is None) and end is not None and isinstance(days, (int, float)) and days > 0:
            first, last = end - timedelta(days=float(days)) + timedelta(hours=1), end
        if first is None or last is None or not rec.resource_id:
            continue
        threshold = float(rec.evidence.get("util_threshold_pct") or 5.0)
        out.append(
            (i, str(rec.resource_id), first, last, threshold, rec.evidence.get("namespace"), rec.evidence.get("pod"))
        )
    return out


def _figures(con: duckdb.DuckDBPyConnection) -> dict[int, dict[str, Any]]:
    """Per finding of the batch table: measured kg and GPU kWh, idle-hour GPU kWh, the pod's idle kg,
    and each GPU's kWh (least first): four statements whatever the number of findings."""
    figures: dict[int, dict[str, Any]] = {}
    for i, kg, kwh in con.execute(f"""
        SELECT b.i, coalesce(sum(c.kg_co2e), 0), coalesce(sum(c.gpu_kwh), 0) FROM {BATCH} b
        JOIN carbon_hourly c ON c.resource_id = b.resource_id AND c.hour BETWEEN b.first AND b.last
             AND c.energy_basis = 'measured' GROUP BY 1""").fetchall():
        figures[i] = {
            "kg": float(kg),
            "gpu_kwh": float(kwh),
            "idle_kwh": 0.0,
            "pod_kg": 0.0,
            "pod_all_kg": 0.0,
            "gpus": [],
        }
    _add(
        figures,
        "idle_kwh",
        con.execute(f"""
        SELECT i, sum(power_w) / 1000.0 FROM (
          SELECT b.i, m.hour, b.threshold, sum(m.power_mean_w) AS power_w, max(m.util_max) AS util_max
          FROM {BATCH} b JOIN gpu_metrics_hourly m ON m.resource_id = b.resource_id
               AND m.hour BETWEEN b.first AND b.last AND m.mig_instance IS NULL
          GROUP BY 1, 2, 3) WHERE util_max < threshold GROUP BY 1""").fetchall(),
    )
    idle_hours = """
        JOIN (SELECT resource_id, hour, gpu_uuid, max(util_max) AS util_max FROM gpu_metrics_hourly GROUP BY 1, 2, 3) m
             ON m.resource_id = c.resource_id AND m.hour = c.hour AND m.gpu_uuid = c.gpu_uuid
        WHERE b.pod IS NOT NULL AND m.util_max < b.threshold GROUP BY 1"""
    _add(figures, "pod_kg", con.execute(POD_KG + idle_hours).fetchall())
    _add(figures, "pod_all_kg", con.execute(POD_KG + " WHERE b.pod IS NOT NULL GROUP BY 1").fetchall())
    for i, _, kwh in con.execute(f"""
        SELECT b.i, m.gpu_uuid, sum(m.power_mean_w) / 1000.0 AS kwh FROM {BATCH} b
        JOIN gpu_metrics_hourly m ON m.resource_id = b.resource_id AND m.hour BETWEEN b.first AND b.last
             AND m.mig_instance IS NULL AND m.power_mean_w IS NOT NULL
        GROUP BY 1, 2 ORDER BY 1, 3, 2""").fetchall():
        if i in figures:
            figures[i]["gpus"].append(float(kwh))
    return figures


def _add(figures: dict[int, dict[str, Any]], key: str, rows: list[tuple]) -> None:
    """Each (finding, figure) row's figure under ``key``, for the findings the first statement found."""
    for i, value in rows:
        if i in figures:
            figures[i][key] = float(value or 0)


def saved(
    rec: Recommendation, figures: dict[str, Any] | None, days: float, tdps: dict[str, float]
) -> tuple[float | None, str]:
    """(kg CO2e a month the finding's change removes, the rule that made the figure)."""
    if figures is None or figures["gpu_kwh"] <= 0:
        return None, "no measured energy for the resource in the finding's window"
    kg = figures["kg"]
    per_gpu_kwh = kg / figures["gpu_kwh"]  # node model, PUE and grid intensity of the resource's rows
    cur, new = rec.current or {}, rec.proposed or {}
    frees_idle_hours = registry.spec(rec.kind).carbon == registry.IDLE_HOURS
    if frees_idle_hours and rec.evidence.get("pod"):
        removed, basis = figures["pod_kg"], "measured energy of the pod's idle GPU-hours"
    elif frees_idle_hours:
        removed, basis = figures["idle_kwh"] * per_gpu_kwh, "measured energy of the idle hours"
    elif rec.evidence.get("pod") and rec.evidence.get("gpu_units"):
        share = _saved_share(rec)
        if share is None:
            return None, "no monthly cost of the pod to say what share of its GPU-hours the change saves"
        removed, basis = (
            figures["pod_all_kg"] * share,
            f"measured energy of the pod's rows x the share saved {share:.3f}",
        )
    else:
        c_count, p_count = int(cur.get("gpu_count") or 0), int(new.get("gpu_count") or 0)
        same_model = str(cur.get("gpu_model") or "").lower() == str(new.get("gpu_model") or "").lower()
        if same_model and p_count == c_count:
            return 0.0, "the change keeps the same GPUs running"
        if same_model and 0 <= p_count < c_count:
            removed = sum(figures["gpus"][: c_count - p_count]) * per_gpu_kwh
            basis = f"measured energy of the {c_count - p_count} least-used GPUs given up"
        else:
            c_tdp, p_tdp = _tdp(tdps, cur.get("gpu_model")), _tdp(tdps, new.get("gpu_model"))
            if not c_tdp or not p_tdp or not c_count:
                return None, "no TDP in gpu_specs to scale the proposed GPUs' draw"
            ratio = (p_count * p_tdp) / (c_count * c_tdp)
            removed, basis = kg * (1 - ratio), f"measured energy x (1 - proposed/current GPU TDP {ratio:.3f})"
    return round(removed / days * DAYS_PER_MONTH, 3), basis


def _saved_share(rec: Recommendation) -> float | None:
    """The share of a pod's GPU-hours its change saves: the finding's savings over the pod's cost (both monthly)."""
    cost = (rec.current or {}).get("monthly_cost_usd")
    try:
        cost_f = float(cost) if cost is not None else 0.0
    except (TypeError, ValueError):
        return None
    if cost_f <= 0:
        return None
    return min(1.0, max(0.0, float(rec.monthly_savings_usd) / cost_f))


def annotate(con: duckdb.DuckDBPyConnection, recs: list[Recommendation]) -> None:
    """Add ``kg_co2e_month_saved`` (and its basis) to the evidence of every finding that removes GPU-hours."""
    chosen = [r for r in recs if registry.spec(r.kind).carbon != registry.PRICING_ONLY]
    if not chosen:
        return
    windows = _windows(con, chosen)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {BATCH} (i INTEGER, resource_id VARCHAR, first TIMESTAMPTZ, "
        "last TIMESTAMPTZ, threshold DOUBLE, namespace VARCHAR, pod VARCHAR)"
    )
    if windows:
        con.executemany(f"INSERT INTO {BATCH} VALUES (?, ?, ?, ?, ?, ?, ?)", windows)
    figures = _figures(con)
    con.execute(f"DROP TABLE IF EXISTS {BATCH}")
    tdps = {str(m).lower(): float(t) for m, t in con.execute("SELECT gpu_model, tdp_w FROM gpu_specs").fetchall() if t}
    spans = {i: max((last - first).total_seconds() / 86400 + 1 / 24, 1 / 24) for i, _, first, last, *_ in windows}
    for i, rec in enumerate(chosen):
        value, basis = saved(rec, figures.get(i), spans.get(i, 1.0), tdps)
        rec.evidence["kg_co2e_month_saved"] = value
        rec.evidence["kg_co2e_month_saved_basis"] = basis
