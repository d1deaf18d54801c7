"""The busy-waste kinds' findings (rules: models/busy_rules.py; inputs: models/busy_profile.py): one per
pod that shows its kind's pattern, priced from what the cost allocation charged the pod for the hours
that show it (the bill's cost per GPU-hour), with a small hourly profile as evidence and the pod's GPU
UUIDs / MIG slices (so pod-level findings on disjoint GPUs of a node are plans of their own). A resource
whose source exports none of the fields a kind reads is withheld, naming the fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import polars as pl

from gpufinops.models import busy_rules as rules
from gpufinops.models.busy_profile import BusyInputs
from gpufinops.models.recommendation import Findings, Withheld, money, on_resource, pod_workload

DAYS_PER_MONTH = Decimal("30.4375")
PROFILE_HOURS = 24  # the evidence's hourly profile: the pod's last day
SPARK = "▁▂▃▄▅▆▇█"
NO_PROFILING_SOURCES = {"nvidia_smi_csv": "nvidia-smi", "cloudwatch_gpu": "CloudWatch"}


@dataclass(frozen=True)
class Pattern:
    """What one kind reads, how it marks a pod's hours, and what it says."""

    kind: str
    fields: dict[str, str]  # gpu_metrics_hourly column -> the DCGM field it comes from
    action: str
    risk: str
    releases: bool = False  # its action gives the pod's GPUs back (the scheduler exports release them)


def withheld(kind: str, hours: pl.DataFrame, fields: dict[str, str]) -> list[Withheld]:
    """The resources none of whose hours carry one of ``fields``: nothing to diagnose from."""
    if hours.is_empty():
        return []
    per = hours.group_by("resource_id").agg(
        *[pl.col(c).is_not_null().any().alias(c) for c in fields],
        pl.len().alias("hours"),
        *[pl.col(c).drop_nulls().first() for c in ("team", "provider", "source", "source_type")],
    )
    out = []
    for row in per.sort("resource_id").iter_rows(named=True):
        missing = [field for column, field in fields.items() if not row[column]]
        if not missing:
            continue
        source = NO_PROFILING_SOURCES.get(row["source_type"] or "")
        how = (
            f"{source} cannot provide them: add a DCGM exporter"
            if source
            else "list them in the DCGM exporter's counters file (-f)"
        )
        out.append(
            Withheld.of(
                kind,
                row,
                "no_profiling_fields",
                f"{row['hours']} GPU-hours from {row['source']} carry no {', '.join(missing)}; {how}",
            )
        )
    return out


def profile(rows: pl.DataFrame) -> dict:
    """The pod's last PROFILE_HOURS hours as a line of bars (one per hour, the engine's activity) and a small
    hourly table a person can read (the dashboard draws it over time: a list of records with an hour)."""
    last = rows.tail(PROFILE_HOURS)
    engine = [e for e in last["engine"].to_list()]
    bars = "".join(" " if e is None else SPARK[min(len(SPARK) - 1, int(e * len(SPARK)))] for e in engine)
    table = [
        {
            "hour": r["hour"],
            "engine_pct": _pct(r["engine"]),
            "tensor_pct": _pct(r["tensor"]),
            "fp32_pct": _pct(r["fp32"]),
            "dram_pct": _pct(r["dram"]),
            "idle_min": None if r["idle_minutes"] is None else round(r["idle_minutes"]),
            "dips": None if r["dips"] is None else round(r["dips"], 1),
            "mem_gib": round((r["mem_mib"] or 0) / 1024, 1),
        }
        for r in last.iter_rows(named=True)
    ]
    return {"engine_by_hour": bars, "hourly_profile": table}


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def findings(
    pattern: Pattern,
    inputs: BusyInputs,
    mark: Callable[[pl.DataFrame], pl.DataFrame],
    price: Callable[[pl.DataFrame], Decimal],
    extra: Callable[[pl.DataFrame, pl.DataFrame], dict],
) -> Findings:
    """``mark`` returns a pod's hours with ``hit`` (the pattern) and ``pod_hit`` (the pod carries it);
    ``price`` the saving over the hit hours; ``extra`` the kind's own evidence."""
    hours = inputs.hours
    held = withheld(pattern.kind, hours, pattern.fields)
    skipped = {w.resource_id for w in held}
    pods = rules.pod_hours(hours.filter(pl.col("pod").is_not_null() & ~pl.col("resource_id").is_in(list(skipped))))
    if pods.is_empty():
        return Findings([], held)
    marked = mark(pods)
    recs = []
    for (resource_id, namespace, pod), rows in marked.filter(pl.col("pod_hit")).group_by(
        *rules.KEY, maintain_order=True
    ):
        hits = rows.filter(pl.col("hit"))
        if hits.is_empty():
            continue
        if hits["priced_gpus"].sum() == 0:
            first = rows.row(0, named=True)
            held.append(
                Withheld.of(
                    pattern.kind,
                    {**first, "resource_id": resource_id},
                    "unpriced",
                    f"pod {namespace}/{pod} shows the pattern in {hits.height} hours, "
                    "but no bill allocates its node's cost yet",
                )
            )
            continue
        recs.append(_recommendation(pattern, rows, hits, price(hits), extra(rows, hits)))
    return Findings(sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), held)


def _recommendation(pattern: Pattern, rows: pl.DataFrame, hits: pl.DataFrame, saving: Decimal, extra: dict):
    first, last = rows["hour"].min(), rows["hour"].max()
    assert isinstance(first, datetime) and isinstance(last, datetime)
    window_days = Decimal(str(((last - first).total_seconds() / 3600 + 1) / 24))
    monthly_savings = money(saving / window_days * DAYS_PER_MONTH)
    cost = Decimal(str(rows["cost"].sum()))
    monthly_cost = money(cost / window_days * DAYS_PER_MONTH)
    row = rows.row(rows.height - 1, named=True)
    gpus = sorted({u for us in rows["gpu_uuids"].to_list() for u in us})
    slices = sorted({m for ms in rows["mig_instances"].to_list() for m in ms})
    units = sorted({u for us in rows["gpu_units"].to_list() for u in us})
    current = {
        "instance_type": row["instance_type"],
        "gpu_model": row["gpu_model"],
        "gpu_count": len(gpus),
        "pricing": {"Dynamic": "spot", "Committed": "committed"}.get(row["pricing_category"] or "", "on_demand"),
        "monthly_cost_usd": monthly_cost,
    }
    proposed = {
        **current,
        "action": pattern.action,
        "monthly_cost_usd": max(Decimal(0), monthly_cost - monthly_savings),
        **({"gpu_count": 0, "state": "released"} if pattern.releases else {}),
    }
    evidence = {
        "pattern": pattern.kind,
        "namespace": row["namespace"],
        "pod": row["pod"],
        "container": row["container"],
        "gpu_uuids": gpus,
        "mig_instances": slices,
        "gpu_units": units,
        "hours_measured": rows.height,
        "hours_showing_it": hits.height,
        "cost_of_those_hours_usd": money(Decimal(str(hits["cost"].sum()))),
        "saving_in_window_usd": money(saving),
        "window_days": round(float(window_days), 2),
        "metrics_source": row["source"],
        "first_hour": first,
        "last_hour": last,
        **extra,
        **profile(rows),
    }
    confidence = round(min(1.0, hits.height / max(rows.height, 1) + 0.3) * min(1.0, float(window_days) / 1), 3)
    return on_resource(
        pattern.kind,
        row,
        (row["namespace"], row["pod"]),
        pod_workload(row),
        current=current,
        proposed=proposed,
        monthly_savings_usd=monthly_savings,
        confidence=min(confidence, 0.95),
        risk=pattern.risk,
        evidence=evidence,
    )
