"""Where one resource's GPUs run (:class:`Placement`), and what each export action does to it.

Each recommendation kind's spec names its export action (``export``, models/kinds/<kind>.py); the
scheduler exports (:mod:`jobs.export.plan`) apply a resource's plan objects in order, each through the
action its kind names. A kind whose action is not in :data:`ACTIONS` is refused, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpufinops.jobs.export.clusters import Cluster, ClusterMap
from gpufinops.models import registry
from gpufinops.models.recommendation import provider_code


def spot_share(proposed: dict[str, Any]) -> float | None:
    try:
        share = float(proposed["spot_share"])
    except (KeyError, TypeError, ValueError):
        return 1.0 if proposed.get("pricing") == "spot" else None
    return min(max(share, 0.0), 1.0) if share == share else None


@dataclass(frozen=True)
class Placement:
    """One resource's GPUs: where they run, how many, how much of them on spot."""

    resource_id: str | None
    team: str | None
    cluster: Cluster | None
    gpu_model: str | None
    gpus: int
    spot_share: float = 0.0
    instance_type: str | None = None
    released: bool = False
    schedule: str | None = None  # e.g. scheduled_off_hours: stopped nights and weekends
    committed: bool = False
    replicas: int | None = None


Action = Callable[[Placement, dict[str, Any], ClusterMap], tuple[Placement, str | None]]


def _release_or_schedule(state: Placement, rec: dict[str, Any], _clusters: ClusterMap) -> tuple[Placement, str | None]:
    new = rec.get("proposed") or {}
    if new.get("gpu_count") == 0 or new.get("state") == "released":
        return replace(state, gpus=0, released=True), None
    return replace(state, schedule=new.get("state")), None


def _resize(state: Placement, rec: dict[str, Any], _clusters: ClusterMap) -> tuple[Placement, str | None]:
    new = rec.get("proposed") or {}
    count = new.get("gpu_count")
    return replace(
        state,
        gpu_model=new.get("gpu_model") or state.gpu_model,
        gpus=state.gpus if count is None else int(count),
        instance_type=new.get("instance_type") or state.instance_type,
    ), None


def _spot_share(state: Placement, rec: dict[str, Any], _clusters: ClusterMap) -> tuple[Placement, str | None]:
    share = spot_share(rec.get("proposed") or {})
    replicas = (rec.get("evidence") or {}).get("replicas")
    return replace(
        state,
        spot_share=state.spot_share if share is None else share,
        replicas=int(replicas) if isinstance(replicas, (int, float)) else state.replicas,
    ), None


def _commit(state: Placement, _rec: dict[str, Any], _clusters: ClusterMap) -> tuple[Placement, str | None]:
    return replace(state, committed=True), None


def _move_onprem(state: Placement, rec: dict[str, Any], clusters: ClusterMap) -> tuple[Placement, str | None]:
    new = rec.get("proposed") or {}
    if provider_code(new.get("provider")) != "onprem":  # a verdict that keeps the work where it is
        return state, None
    target = clusters.onprem(new.get("cluster"))
    count = new.get("gpu_count")
    moved = replace(
        state,
        cluster=target,
        gpu_model=new.get("gpu_model") or state.gpu_model,
        gpus=state.gpus if count is None else int(count),
        spot_share=0.0,
        instance_type=new.get("instance_type"),
        committed=False,
    )
    problem = (
        None
        if target
        else (f"on-prem cluster {new.get('cluster')!r} has no cost lines in the window: its capacity is unknown")
    )
    return moved, problem


def _no_capacity(state: Placement, _rec: dict[str, Any], _clusters: ClusterMap) -> tuple[Placement, str | None]:
    return state, None


# The storage actions: the storage export (jobs/export/storage.py, its WRITERS) writes each as what the
# clouds take; none changes GPU capacity.
STORAGE_ACTIONS = ("retier_volume", "delete_orphan", "lifecycle_rule")

# What each spec's `export` (docs/architecture.md, *Add a model kind*) does to a resource's placement.
ACTIONS: dict[str, Action] = {
    "release_or_schedule": _release_or_schedule,
    "resize": _resize,
    "spot_share": _spot_share,
    "commit": _commit,
    "move_onprem": _move_onprem,
    **dict.fromkeys(STORAGE_ACTIONS, _no_capacity),
    # a change inside the workload (loader workers, mixed precision, batching): its capacity stays as it is
    "tune_workload": _no_capacity,
}


def action(kind: str) -> Action:
    """The export action of ``kind``, from its spec; ValueError for an unregistered kind or an action this
    module does not know (never ignored: a plan object the export cannot carry out is a bug)."""
    name = registry.spec(kind).export
    if name not in ACTIONS:
        raise ValueError(f"{kind}: export action {name!r} is none of {', '.join(ACTIONS)}")
    return ACTIONS[name]


def apply(state: Placement, rec: dict[str, Any], clusters: ClusterMap) -> tuple[Placement, str | None]:
    return action(rec["kind"])(state, rec, clusters)
