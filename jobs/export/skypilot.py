"""SkyPilot task resource overrides: per resource plan that changes what a task asks for, its
``resources`` block (merge it into the workload's task YAML; ``sky launch task.yaml`` reads it).

* ``infra``: ``<cloud>/<region>`` (the provider spec's SkyPilot cloud: ``aws``, ``gcp``, ``azure``) where the
  plan leaves the work, ``k8s`` for an on-prem cluster (the comment names it: add its kubeconfig context as ``k8s/<context>`` when you
  have several);
* ``accelerators``: ``NAME:COUNT`` with SkyPilot's accelerator name, and only a shape the cloud's
  catalogue offers (the shipped inventory's whole-GPU types: AWS has ``A10G:1/4/8`` through g5, no
  ``A10G:2``): a count it lacks is raised to the smallest shape that holds it, and the comment says so;
  on Kubernetes the count must fit on one node of the cluster (a pod does not span nodes);
* ``instance_type``: the plan's type when the catalogue has it with exactly those GPUs (never on
  Kubernetes, never a GCP N1 host with attached GPUs, which SkyPilot builds from ``accelerators``);
* ``use_spot`` from the plan's spot share; a service that keeps part of its replicas on-demand gets
  SkyServe's ``service.replica_policy.base_ondemand_fallback_replicas``.

Task names are unique: the workload's name, else the team and workload, else with the resource's
own name. A plan that changes no task resource (a commitment, an off-hours schedule, a release) is
listed in the header instead.
"""

from __future__ import annotations

from typing import Any

from gpufinops.jobs.export.inventory import Inventory, skypilot_name
from gpufinops.jobs.export.names import UniqueNames
from gpufinops.jobs.export.plan import FleetPlan, Placement, ResourcePlan
from gpufinops.kernel import providers
from gpufinops.kernel.provider_spec import SkyPilot

KUBERNETES = "k8s"  # SkyPilot's infra for a Kubernetes cluster: a task's GPUs must fit on one node


def _sky(provider: str) -> SkyPilot | None:
    """How SkyPilot names a provider (its spec's ``skypilot``), or None: no catalogue."""
    spec = providers.spec(provider)
    return spec.skypilot if spec is not None else None


def _short(resource_id: str | None) -> str:
    return (resource_id or "").rstrip("/").rsplit("/", 1)[-1]


def accelerators(after: Placement, inventory: Inventory) -> tuple[str | None, str | None, list[str]]:
    """(NAME:COUNT, instance type, notes) for where the plan leaves a resource, or (None, None, why)."""
    cluster, count = after.cluster, after.gpus
    if cluster is None or not after.gpu_model or count <= 0:
        return None, None, ["released or without GPUs: nothing for a task to request"]
    sky = _sky(cluster.provider)
    if sky is None:
        return None, None, [f"SkyPilot has no catalogue here for provider {cluster.provider}"]
    if sky.cloud == KUBERNETES:
        name, per_node = skypilot_name(after.gpu_model), cluster.max_gpus_per_node(after.gpu_model)
        if count > per_node:
            return (
                None,
                None,
                [
                    f"{name}:{count} does not fit on one {cluster.name} node "
                    f"({per_node or 'no'} {after.gpu_model} GPUs per node): split the work"
                ],
            )
        return f"{name}:{count}", None, []
    itype = inventory.get(cluster.provider, after.instance_type)
    name = itype.skypilot if itype else skypilot_name(after.gpu_model)
    shapes = sorted(inventory.skypilot_shapes(cluster.provider).get(name, ()))
    notes = []
    if count not in shapes:
        bigger = [n for n in shapes if n >= count]
        if not bigger:
            return (
                None,
                None,
                [
                    f"{name}:{count} is no {cluster.provider.upper()} shape "
                    f"(offered: {', '.join(f'{name}:{n}' for n in shapes) or 'none'})"
                ],
            )
        notes.append(
            f"{name}:{count} is no {cluster.provider.upper()} shape: asking for {name}:{bigger[0]}, "
            "the smallest that holds it"
        )
        count = bigger[0]
    kept_type = itype.name if itype is not None and not itype.attached and itype.gpus == count else None
    return f"{name}:{count}", kept_type, notes


def task(plan: ResourcePlan, inventory: Inventory) -> tuple[dict[str, Any] | None, list[str]]:
    """The task's ``resources`` (and ``service``) for one plan, with the comment lines."""
    after = plan.after
    shape, itype, notes = accelerators(after, inventory)
    cluster = after.cluster
    if shape is None or cluster is None:  # accelerators() gives no shape without a cluster
        return None, notes
    sky = _sky(cluster.provider)
    on_kubernetes = sky is None or sky.cloud == KUBERNETES  # accelerators() gave a shape: sky is declared
    resources: dict[str, Any] = {
        "infra": KUBERNETES if on_kubernetes or sky is None else f"{sky.cloud}/{cluster.region}",
        "accelerators": shape,
    }
    if itype:
        resources["instance_type"] = itype
    doc: dict[str, Any] = {"resources": resources}
    if not on_kubernetes:
        resources["use_spot"] = after.spot_share > 0
        replicas = after.replicas or 0
        if 0 < after.spot_share < 1 and replicas > 1:
            fallback = max(1, round((1 - after.spot_share) * replicas))
            doc["service"] = {"replica_policy": {"base_ondemand_fallback_replicas": fallback}}
    else:
        notes.append(
            f"on-prem cluster {cluster.name}: use its kubeconfig context (infra: k8s/<context>) if you have several"
        )
    return doc, notes


def documents(
    fleet: FleetPlan, inventory: Inventory, wanted: set[str] | None = None
) -> tuple[list[tuple[ResourcePlan, dict[str, Any], list[str]]], list[str]]:
    """Every task override (with its plan) whose plan leaves its work on a cluster labelled in ``wanted``
    (None: any), and the header notes on plans that change no task resource."""
    candidates, header = [], []
    for plan in fleet.plans:
        target = plan.after.cluster or plan.before.cluster
        kinds = ", ".join(f"{o['id']} ({o['kind']}, {o.get('plan')})" for o in plan.objects)
        if plan.problem and plan.after.cluster is None:
            header.append(f"not exported: {kinds}: {plan.problem}")
            continue
        if wanted is not None and (target is None or target.label not in wanted):
            continue
        if not plan.resizes:
            header.append(f"no task resource changes: {kinds}")
            continue
        doc, notes = task(plan, inventory)
        if doc is None:
            header.append(f"no task: {kinds}: {'; '.join(notes)}")
            continue
        candidates.append((plan, doc, notes, kinds))
    merged: dict[tuple, list] = {}
    for plan, doc, notes, kinds in candidates:  # a service's replicas, planned alike: one task
        workload = plan.objects[0].get("workload")
        key = (plan.after.team, workload, repr(doc)) if workload else (plan.plan_id,)
        merged.setdefault(key, []).append((plan, doc, notes, kinds))
    groups = list(merged.values())
    workloads = [g[0][0].objects[0].get("workload") or _short(g[0][0].before.resource_id) for g in groups]
    teamed = [f"{g[0][0].after.team or g[0][0].before.team or 'no-team'}-{w}" for g, w in zip(groups, workloads)]
    names, out = UniqueNames(), []
    for group, workload, with_team in zip(groups, workloads, teamed):
        plan, doc, notes, _ = group[0]
        text = workload if workloads.count(workload) == 1 else with_team
        if teamed.count(with_team) > 1:
            text = f"{with_team}-{_short(plan.before.resource_id)}"
        comments = []
        for member, _doc, _notes, kinds in group:
            before = member.before
            where = before.cluster.name if before.cluster else "an unknown cluster"
            comments += [
                f"team {member.after.team or before.team or '(none)'}, resource {before.resource_id} "
                f"({before.instance_type or '?'} on {where}), plan {member.plan_id}: "
                f"${float(member.monthly_savings_usd):,.2f}/month; carries {kinds}"
            ]
        out.append((plan, {"name": names(text, "task"), **doc}, comments + notes))
    return out, header
