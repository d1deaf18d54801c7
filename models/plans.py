"""One plan per unit an action changes: the models' candidate actions reconciled, and the one total.

Each model proposes what it alone sees (release an idle GPU, fewer GPUs, a cheaper GPU, FP16, spot, a
commitment, a move on-prem). On one resource those candidates interact: a released GPU needs no
commitment; spot and a commitment and a repatriation are three ways to buy the *same* hours. So the
candidates of one resource become one plan (``plan_id``, shared by its objects):

* each kind's family is a fact of its spec (``models.registry``, ``family``: a kind the registry does
  not hold is refused, never guessed); actions fall in four families, applied in this order: **usage**
  (``idle_gpu``: release, schedule, scale to zero), **rightsize** (``gpu_count``, ``gpu_type``, ``quantization``: exclusive among
  themselves, the largest saving wins), **purchase** (``spot_mix``, ``commitment``, ``onprem_vs_cloud``
  repatriation: exclusive among themselves, the largest saving wins), **storage** (``storage_tier``,
  ``storage_orphan``, ``checkpoint_lifecycle``: a volume's, snapshot's or prefix's own plan);
* the first action of the plan is ``primary``, the later ones are ``step``s, each priced on the cost
  the steps before it leave (``monthly_savings_usd`` of a step is its *marginal* saving: its own saving
  × cost left ÷ the resource's cost — a commitment on the rightsized baseline, spot on the remaining
  on-demand hours); the standalone figure stays in the evidence;
* releasing a resource ends the plan (its kind's ``ends_plan`` patterns: an always-idle GPU's release):
  nothing else applies to a released resource;
* every other candidate is an ``alternative``: shown with its own saving, never added to a total; so is a
  candidate whose saving is conditional (``evidence.conditional``: packing other work onto spare GPUs).

The unit is what the action changes. A finding on the whole resource (node-level: release, schedule,
rightsize, spot, commitment) is planned per resource. A finding that names the GPU units it acts on
(pod-level, ``evidence.gpu_units``: a pod's GPU UUIDs, MIG slices or share of a time-sliced GPU, e.g.
``allocated_idle``) is planned per (resource, GPU units): findings on disjoint units of one node are
independent plans, each primary, each counted, each in its own team's scope; findings whose units overlap
are one plan, reconciled as above. A node-level plan and the pod-level plans on the same node never count a
GPU-hour twice:

* a node release (an ``ends_plan`` pattern) removes every GPU of the node: the node's pod-level findings
  become alternatives of it (``instead_of`` the release), never added;
* any other node-level plan is priced on what the pod-level plans leave: its primary's saving is its
  standalone saving less the GPU-hours the pods' releases already save, where the model measured them
  (``evidence.pod_overlap_monthly_usd``: a node's idle schedule and the pods idle in its idle hours), else
  its standalone saving × (the node's cost − the pod-level plans' counted savings) ÷ the node's cost; its
  ``evidence.priced_after`` names the pod-level actions.

:func:`total` is the one place a savings total is computed: the sum over ``primary`` and ``step``
objects whose stored status is still to act on (``open`` or ``accepted``): a dismissed or applied finding
is never in a total (:func:`left_out` lists those a decision took out). The CLI, the demo, the dashboard,
the weekly report, the API and the exports all call it (or its SQL twin ``COUNTED_SQL`` over the stored
recommendations), on objects read through the one read model (``warehouse.recommendation_read.VIEW``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gpufinops.models import registry
from gpufinops.models.recommendation import Recommendation, money, stable_id

ORDER = registry.FAMILIES  # usage, rightsize, purchase, storage: each kind's family is a fact of its spec
COUNTED = ("primary", "step")
OUTSTANDING = ("open", "accepted")  # statuses a total counts: dismissed and applied findings never add up
COUNTED_SQL = "plan IN ('primary', 'step') AND status IN ('open', 'accepted')"  # the same rule in SQL
ZERO = Decimal(0)


def family(kind: str) -> str:
    """The plan family of ``kind`` (its spec's ``family``); ValueError for a kind the registry does not hold."""
    return registry.spec(kind).family


def plan_key(rec: Recommendation) -> tuple[str | None, str | None, str | None]:
    """What one plan is about: the resource; on a resource teams share (its kind's ``plan_per_team_on``: an
    on-prem node group), one team's work on it."""
    if rec.provider in registry.spec(rec.kind).plan_per_team_on:
        return rec.provider, rec.resource_id, rec.workload or rec.team
    return rec.provider, rec.resource_id or rec.id, None


def _cost(rec: Recommendation) -> Decimal:
    return Decimal(str((rec.current or {}).get("monthly_cost_usd") or 0))


def _best(recs: list[Recommendation]) -> Recommendation | None:
    return max(recs, key=lambda r: (r.monthly_savings_usd, r.id), default=None)


def gpu_units(rec: Recommendation) -> frozenset[str]:
    """The GPU units a pod-level finding's action changes (``evidence.gpu_units``: GPU UUIDs, MIG slices, a
    pod's share of a time-sliced GPU); empty for a finding on the whole resource (node-level)."""
    units = (rec.evidence or {}).get("gpu_units") or ()
    return frozenset(str(u) for u in units) if isinstance(units, list | tuple) else frozenset()


def _node(rec: Recommendation) -> tuple[str | None, str | None]:
    return rec.provider, rec.resource_id or rec.id


def _workload_groups(pods: list[Recommendation]) -> list[list[Recommendation]]:
    """Pod-level findings grouped into plans: one group per node and connected set of GPU units (findings
    whose units overlap act on the same GPUs; disjoint units are independent plans)."""
    groups: list[tuple[tuple, set[str], list[Recommendation]]] = []
    for rec in sorted(pods, key=lambda r: r.id):
        units, node = set(gpu_units(rec)), _node(rec)
        touching = [g for g in groups if g[0] == node and g[1] & units]
        merged = (node, units.union(*(g[1] for g in touching)), [rec] + [m for g in touching for m in g[2]])
        groups = [g for g in groups if all(g is not t for t in touching)] + [merged]
    return [members for _, _, members in groups]


def _chain(members: list[Recommendation]) -> list[Recommendation]:
    """The plan's actions in family order: the largest of each family; a release ends it."""
    by_family: dict[str, list[Recommendation]] = defaultdict(list)
    for rec in members:
        if not (rec.evidence or {}).get("conditional"):  # e.g. packing: a saving only if other work moves in
            by_family[family(rec.kind)].append(rec)
    chain = [b for b in (_best(by_family[f]) for f in ORDER) if b is not None]
    if chain and _releases(chain[0]):
        chain = chain[:1]  # a released resource has nothing left to rightsize or buy differently
    return chain


def _releases(rec: Recommendation) -> bool:
    return (rec.evidence or {}).get("pattern") in registry.spec(rec.kind).ends_plan


def _price(members: list[Recommendation], chain: list[Recommendation], plan_id: str, before=()) -> None:
    """Roles and marginal savings: the first action ``primary``, the later ones ``step``s priced on the cost
    the actions before them leave. ``before``: pod-level actions on the node's GPUs, priced first (a node-level
    plan is priced on what they leave)."""
    base = max((_cost(r) for r in chain), default=ZERO)
    left = max(ZERO, base - sum((r.monthly_savings_usd for r in before), ZERO))
    chosen = {id(r) for r in chain}
    for position, rec in enumerate(chain):
        standalone = rec.monthly_savings_usd
        rec.evidence = {**(rec.evidence or {}), "standalone_monthly_savings_usd": standalone}
        rec.plan = "primary" if position == 0 else "step"
        after = [r.id for r in before] + [r.id for r in chain[:position]]
        overlap = rec.evidence.get("pod_overlap_monthly_usd")
        if position == 0 and before and isinstance(overlap, dict):  # the GPU-hours both would save, measured
            shared = sum((Decimal(str(overlap.get(r.id) or 0)) for r in before), ZERO)
            rec.monthly_savings_usd = money(max(ZERO, standalone - shared))
            rec.evidence["priced_after"] = after
        elif after:
            share = (left / base) if base > 0 else ZERO
            rec.monthly_savings_usd = money(max(ZERO, standalone * share))
            rec.evidence["priced_after"] = after
        if position:
            _after(rec, chain[position - 1])
        left = max(ZERO, left - rec.monthly_savings_usd)
        rec.plan_id = plan_id
    for rec in members:
        if id(rec) not in chosen:
            _alternative(
                rec, plan_id, [r.id for r in chain if family(r.kind) == family(rec.kind)] or [r.id for r in chain[:1]]
            )


def _alternative(rec: Recommendation, plan_id: str, instead_of: list[str]) -> None:
    rec.plan, rec.plan_id = "alternative", plan_id
    rec.evidence = {
        **(rec.evidence or {}),
        "standalone_monthly_savings_usd": rec.monthly_savings_usd,
        "instead_of": instead_of,
    }


def reconcile(recs: Iterable[Recommendation]) -> list[Recommendation]:
    """The candidates with ``plan``, ``plan_id`` and marginal savings set; order: largest plan first.

    A plan's unit is what its actions change. Node-level findings (on the whole resource) make one plan per
    resource (per team's work on a shared on-prem group). Pod-level findings (``evidence.gpu_units``) make one
    plan per node and set of GPU units they act on: two teams' idle GPUs on one node are two plans. Between
    the two: a node release (its kind's ``ends_plan``) removes every GPU of the node, so the node's pod-level
    findings are its alternatives; any other node-level plan is priced on the cost its pod-level plans leave."""
    out = list(recs)
    nodes: dict[tuple, list[Recommendation]] = defaultdict(list)
    pods: list[Recommendation] = []
    for rec in out:
        if gpu_units(rec):
            pods.append(rec)
        else:
            nodes[plan_key(rec)].append(rec)
    chains = {key: _chain(members) for key, members in nodes.items()}
    released = {
        _node(chain[0]): (stable_id("plan", *[k or "" for k in key]), chain[0])
        for key, chain in chains.items()
        if chain and _releases(chain[0])
    }
    priced: dict[tuple, list[Recommendation]] = defaultdict(list)  # node -> pod-level actions counted on it
    for members in _workload_groups(pods):
        node = _node(members[0])
        if node in released:
            node_plan, release = released[node]
            for rec in members:
                _alternative(rec, node_plan, [release.id])
            continue
        units = sorted(set().union(*(gpu_units(r) for r in members)))
        chain = _chain(members)
        _price(members, chain, stable_id("plan", *[k or "" for k in node], *units))
        priced[node] += chain
    for key, members in nodes.items():
        chain = chains[key]
        before = [] if not chain or _releases(chain[0]) else _pods_of(priced[_node(chain[0])], key)
        _price(members, chain, stable_id("plan", *[k or "" for k in key]), before)
    plan_order: dict[str | None, Decimal] = {}
    for rec in out:
        if rec.plan in COUNTED:
            plan_order[rec.plan_id] = plan_order.get(rec.plan_id, ZERO) + rec.monthly_savings_usd
    return sorted(
        out,
        key=lambda r: (
            -plan_order.get(r.plan_id, ZERO),
            r.plan_id or "",
            _ROLE[r.plan or "primary"],
            -r.monthly_savings_usd,
            r.id,
        ),
    )


def _pods_of(actions: list[Recommendation], key: tuple) -> list[Recommendation]:
    """The pod-level actions a node-level plan keyed ``key`` is priced after: on a resource whose plans are
    per team (an on-prem group), only that team's."""
    if key[2] is None:
        return actions
    return [r for r in actions if key[2] in (r.workload, r.team)]


_ROLE = {"primary": 0, "step": 1, "alternative": 2}
SHAPE = ("instance_type", "gpu_model", "gpu_count")


def _after(step: Recommendation, before: Recommendation) -> None:
    """A step applies to what the action before it leaves: spot or a commitment after a rightsize buys the
    rightsized shape, not the old one (its current and proposed say so)."""
    if family(before.kind) != "rightsize" or family(step.kind) != "purchase":
        return
    shape = {k: before.proposed[k] for k in SHAPE if before.proposed.get(k) is not None}
    if not shape:
        return
    step.current = {
        **step.current,
        **shape,
        "monthly_cost_usd": before.proposed.get("monthly_cost_usd", step.current.get("monthly_cost_usd")),
    }
    if step.proposed.get("provider", step.provider) == step.provider:  # not a move off the cloud
        step.proposed = {**step.proposed, **shape}
    action = step.proposed.get("action")
    if action:
        step.proposed = {
            **step.proposed,
            "action": f"{action}, on {shape.get('instance_type', 'it')} after: "
            f"{before.proposed.get('action', before.kind)}",
        }


def _get(rec: Recommendation | dict[str, Any], key: str, default: Any = None) -> Any:
    return rec.get(key, default) if isinstance(rec, dict) else getattr(rec, key, default)


def counted(rec: Recommendation | dict[str, Any], statuses: tuple[str, ...] = OUTSTANDING) -> bool:
    """In a total: a primary or step object whose status is one of ``statuses`` (open or accepted)."""
    return _get(rec, "plan") in COUNTED and (_get(rec, "status") or "open") in statuses


def left_out(recs: Iterable[Recommendation | dict[str, Any]]) -> list[Recommendation | dict[str, Any]]:
    """The primary and step objects a decision took out of the total (dismissed or applied)."""
    return [r for r in recs if _get(r, "plan") in COUNTED and not counted(r)]


def total(recs: Iterable[Recommendation | dict[str, Any]], statuses: tuple[str, ...] = OUTSTANDING) -> Decimal:
    """The monthly savings of a set of recommendations: primary and step objects only, each once, of the
    findings still to act on (``statuses``: open and accepted; the dashboard's "realised" figure passes
    ``("applied",)``)."""
    out = ZERO
    for rec in recs:
        if counted(rec, statuses):
            value = rec.get("monthly_savings_usd") if isinstance(rec, dict) else rec.monthly_savings_usd
            out += Decimal(str(value or 0))
    return money(out)
