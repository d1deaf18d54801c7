"""`gpufinops export {json,kueue,karpenter,skypilot}`: each resource's plan in a scheduler's own format.

``json`` is every recommendation object (the API's objects, ``plan`` saying which are alternatives).
The scheduler formats carry out only the plans (primary and step objects, open or accepted; see
:mod:`jobs.export.plan`), per target cluster (:mod:`jobs.export.clusters`): one Kueue configuration per
Kubernetes cluster, Karpenter NodePools for EKS clusters, SkyPilot overrides with shapes the cloud's
catalogue offers. The output is one multi-document YAML, each cluster's part opened by a
``# ==== cluster: <name>`` comment (``cluster=`` picks one), under a header stating the plan total
(``models.plans.total``, the number the dashboard, report and API show).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from gpufinops.jobs import files
from gpufinops.jobs.export import clusters as clusters_mod
from gpufinops.jobs.export import inventory as inventory_mod
from gpufinops.jobs.export import karpenter, kueue, plan, skypilot, yamlout
from gpufinops.jobs.export import settings as export_settings
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.kernel import providers
from gpufinops.models import plans
from gpufinops.warehouse import recommendation_read

FORMATS = ("json", "kueue", "karpenter", "skypilot", "storage")
WINDOW_DAYS = 14


class ExportError(ValueError):
    """A request the warehouse cannot answer (an unknown cluster): the message names what exists."""


@dataclass
class Fleet:
    """Everything an export reads, through one read-only connection."""

    objects: list[dict]
    clusters: clusters_mod.ClusterMap
    inventory: inventory_mod.Inventory
    plan: plan.FleetPlan


def load(con, *, team: str | None = None, settings: ExportSettings | None = None) -> Fleet:
    """The whole fleet's plan (a cluster's capacity is shared by every team), cut to ``team`` when given."""
    from gpufinops.warehouse import queries

    settings = settings or ExportSettings()
    recs = recommendation_read.load(con)
    tag_keys = settings.cluster_tag_keys
    if tag_keys == export_settings.DEFAULT_CLUSTER_TAG_KEYS:  # not configured: every registered provider's keys
        tag_keys = export_settings.default_cluster_tag_keys()
    resources = queries.export_gpu_resources(con, tag_keys=tag_keys, days=WINDOW_DAYS).to_dicts()
    hours = queries.export_gpu_hours(con, days=WINDOW_DAYS)
    cmap = clusters_mod.ClusterMap(
        resources,
        queries.export_onprem_node_groups(con, days=WINDOW_DAYS).to_dicts(),
        queries.export_team_namespaces(con, days=WINDOW_DAYS).to_dicts(),
    )
    inv = inventory_mod.load(con)
    fleet_plan = plan.build(recs, resources, hours, cmap, inv)
    if team is not None:
        recs, fleet_plan = [r for r in recs if r.get("team") == team], fleet_plan.scoped(team)
    return Fleet(recs, cmap, inv, fleet_plan)


def _money(value) -> str:
    return f"${float(value):,.2f}/month"


def _header(fmt: str, fleet: Fleet, team: str | None, shown: list[clusters_mod.Cluster]) -> list[str]:
    carried = plan.plan_objects(fleet.objects)
    left_out = [o for o in fleet.objects if o not in carried]
    scope = f" for team {team}" if team else ""
    lines = [
        f"gpufinops export {fmt}{scope}: each resource's plan, per target cluster",
        f"plan total: {_money(plans.total(carried))} (models.plans.total over {len(carried)} primary/step "
        f"object(s) of {len(fleet.plan.plans)} plan(s), open or accepted)",
    ]
    if left_out:
        alternatives = sum(1 for o in left_out if o.get("plan") == "alternative")
        lines.append(
            f"not carried: {len(left_out)} object(s) ({alternatives} alternative(s), never added; "
            "the rest dismissed, applied or without a plan)"
        )
    if any(o.get("plan") is None for o in fleet.objects):
        lines.append("some recommendations have no plan yet: run `gpufinops recommend` to reconcile them")
    for c in shown:
        lines.append(f"cluster {c.name} ({c.kind}): {_money(plans.total(_cluster_objects(fleet, c)))} of it")
    if len(shown) > 1 and any(p.before.cluster is not p.after.cluster for p in fleet.plan.plans if not p.problem):
        lines.append("(a plan that moves work between clusters counts in both)")
    return lines


def _cluster_objects(fleet: Fleet, cluster: clusters_mod.Cluster) -> list[dict]:
    seen: dict[str, dict] = {}
    for p in fleet.plan.plans_of(cluster):
        for o in p.objects:
            seen[o["id"]] = o
    return list(seen.values())


def _section(fmt: str, cluster: clusters_mod.Cluster, fleet: Fleet, settings: ExportSettings):
    if fmt == "kueue":
        docs, notes = kueue.cluster_documents(cluster, fleet.plan, fleet.clusters, settings)
        notes = kueue.capacity_notes(cluster) + notes
    else:
        docs, notes = karpenter.cluster_documents(cluster, fleet.plan, fleet.inventory, settings.node_class)
    return docs, notes + _workload_releases(cluster, fleet)


def _workload_releases(cluster: clusters_mod.Cluster, fleet: Fleet) -> list[str]:
    """Each team's own pod-level plans on this cluster's shared nodes: what they give back, and whose pool
    (the team billed for the node) holds those GPUs."""
    lines = []
    for p in fleet.plan.plans_of(cluster):
        if not p.workload_level:
            continue
        first = p.objects[0]
        lines.append(
            f"team {first.get('team') or '(none)'}: {first.get('workload') or first['id']} on "
            f"{p.before.resource_id}: {', '.join(p.ids)} ({_money(p.monthly_savings_usd)}) gives back "
            f"{p.before.gpus - p.after.gpus} whole GPU(s) of team {p.before.team or '(none)'}'s pool"
        )
    return lines


def _clusters(fleet: Fleet, wanted: str | None) -> list[clusters_mod.Cluster]:
    every = [c for c in fleet.clusters.all() if fleet.plan.of_cluster(c) or fleet.plan.plans_of(c)]
    if wanted is None:
        return every
    chosen = [c for c in every if c.matches(wanted)]
    if not chosen:
        known = ", ".join(c.name for c in every) or "none"
        raise ExportError(f"--cluster {wanted!r}: no such cluster in the data (known: {known})")
    return chosen


def render(
    con, fmt: str, *, team: str | None = None, cluster: str | None = None, settings: ExportSettings | None = None
) -> str:
    """The export in ``fmt`` for one team (None: every team) and one cluster (None: every cluster)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    settings = settings or ExportSettings()
    if fmt == "json":
        if cluster is not None:
            raise ExportError("--cluster applies to the kueue, karpenter and skypilot formats")
        return json.dumps(recommendation_read.load(con, team=team), indent=2) + "\n"
    if fmt == "storage":
        if cluster is not None:
            raise ExportError("--cluster applies to the kueue, karpenter and skypilot formats")
        from gpufinops.jobs.export import storage

        return storage.render(recommendation_read.load(con, team=team))
    fleet = load(con, team=team, settings=settings)
    shown = _clusters(fleet, cluster)
    if fmt == "skypilot":
        return _render_skypilot(fleet, team, shown)
    out = []
    for c in shown:
        if fmt == "karpenter" and karpenter.provisioner(c.provider) is None:
            kinds = " and ".join(s.cluster_kind for s in providers.registered() if s.karpenter is not None)
            out.append(f"# ==== cluster: {c.name} ({c.kind}): no NodePools, Karpenter provisions {kinds} only\n")
            continue
        docs, notes = _section(fmt, c, fleet, settings)
        head = [f"==== cluster: {c.name} ({c.kind}; label {clusters_mod.CLUSTER_LABEL}={c.label})"] + notes
        out.append(yamlout.section(head, docs, "nothing to export for this cluster"))
    for p in fleet.plan.unplaced():
        out.append(f"# not placed: {', '.join(p.ids)}: {p.problem}\n")
    return "".join(f"# {line}\n" for line in _header(fmt, fleet, team, shown)) + "".join(out)


def _render_skypilot(fleet: Fleet, team: str | None, shown: list[clusters_mod.Cluster]) -> str:
    tasks, notes = skypilot.documents(fleet.plan, fleet.inventory, {c.label for c in shown})
    out = []
    for c in shown:
        mine = [(doc, comments) for p, doc, comments in tasks if p.after.cluster is c]
        if mine:
            first, comments = mine[0]
            banner = [f"==== cluster: {c.name} ({c.kind}; label {clusters_mod.CLUSTER_LABEL}={c.label})"]
            out.append(yamlout.dump_all([(first, banner + comments)] + mine[1:]))
    head = "".join(f"# {line}\n" for line in _header("skypilot", fleet, team, shown) + notes)
    return head + ("".join(out) or "# nothing to export: no plan changes a task's resources\n")


def write(text: str, out: str | os.PathLike | None) -> None:
    """To ``out`` through the one file writer (jobs/files.py: never half-written), else stdout."""
    if out is None:
        print(text, end="")
        return
    files.write_text(out, text)
