"""The ``stalled_job`` alert rule: the owner of a job stalled right now hears of it through the alert
pipeline (Slack, e-mail, webhooks: jobs/alerts/), with what each stalled hour costs. The stall is the
``stalled_job`` kind's (models/busy_rules.py: steady work, then zero activity with memory held for longer
than its limit); a pod counts while its newest measured hour is still stalled."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import duckdb
import polars as pl

from gpufinops.models import busy_profile, busy_rules
from gpufinops.models.alert_records import Alert, AlertSettings, RuleOutcome

WINDOW_HOURS = 48  # the hours read: a stall and the work before it
CENT = Decimal("0.01")


def stalled_job_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now) -> RuleOutcome:
    outcome = RuleOutcome("stalled_job", ("stalled_job",))
    hours = busy_profile.read_hours(con, WINDOW_HOURS).filter(pl.col("pod").is_not_null())
    if hours.is_empty():
        return outcome
    marked = busy_rules.stalls(busy_rules.pod_hours(hours)).with_columns(pl.col("stalled").fill_null(False))
    newest = marked["hour"].max()
    for (resource_id, namespace, pod), rows in marked.group_by(*busy_rules.KEY, maintain_order=True):
        last = rows.row(rows.height - 1, named=True)
        if not last["stalled"] or last["hour"] != newest:
            continue
        stalled = rows.filter(pl.col("stalled"))
        priced = stalled.filter(pl.col("priced_gpus") > 0)
        per_hour = (
            (Decimal(str(priced["cost"].sum())) / priced.height).quantize(CENT, rounding=ROUND_HALF_UP)
            if priced.height
            else None
        )
        since = stalled["hour"].min()
        cost = f", ${per_hour}/h" if per_hour is not None else " (no bill allocates its node yet)"
        outcome.alerts.append(
            Alert(
                "stalled_job",
                f"{resource_id}/{namespace}/{pod}",
                since.isoformat(),
                f">{busy_rules.STALL_LIMIT_HOURS}h",
                "warning",
                title=f"Stalled job: {namespace}/{pod} at zero GPU activity for {stalled.height} h",
                summary=f"{namespace}/{pod} on {resource_id} did steady work, then held {len(last['gpu_uuids'])} GPU(s) "
                f"at zero activity since {since:%Y-%m-%d %H:%M} UTC ({stalled.height} h){cost}: stop it.",
                teams=(last["team"],) if last["team"] else (),
                value_usd=per_hour,
                details={
                    "resource_id": resource_id,
                    "namespace": namespace,
                    "pod": pod,
                    "gpu_uuids": list(last["gpu_uuids"]),
                    "stalled_hours": stalled.height,
                    "cost_per_stalled_hour_usd": float(per_hour) if per_hour is not None else None,
                },
            )
        )
    return outcome
