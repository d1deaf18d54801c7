"""One plan per resource: the models' candidate actions on one resource reconciled, and the one total.

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

:func:`total` is the one place a savings total is computed: the sum over ``primary`` and ``step``
objects whose stored status is still to act on (``open`` or ``accepted``): a dismissed or applied finding
is never in a total (:func:`left_out` lists those a decision took out). The CLI, the demo, the dashboard,
the weekly report, the API and the exports all call it (or its SQL twin ``COUNTED_SQL`` over the stored
recommendations), on objects read through the one read model (``warehouse.queries.RECOMMENDATION_VIEW``).
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


def reconcile(recs: Iterable[Recommendation]) -> list[Recommendation]:
    """The candidates with ``plan``, ``plan_id`` and marginal savings set; order: largest plan first."""
    groups: dict[tuple, list[Recommendation]] = defaultdict(list)
    for rec in recs:
        groups[plan_key(rec)].append(rec)
    out: list[Recommendation] = []
    for key, members in groups.items():
        plan_id = stable_id("plan", *[k or "" for k in key])
        by_family: dict[str, list[Recommendation]] = defaultdict(list)
        for rec in members:
            if not (rec.evidence or {}).get("conditional"):  # e.g. packing: a saving only if other work moves in
                by_family[family(rec.kind)].append(rec)
        chain = [b for b in (_best(by_family[f]) for f in ORDER) if b is not None]
        if chain and (chain[0].evidence or {}).get("pattern") in registry.spec(chain[0].kind).ends_plan:
            chain = chain[:1]  # a released resource has nothing left to rightsize or buy differently
        base = max((_cost(r) for r in chain), default=ZERO)
        left = base
        chosen = {id(r) for r in chain}
        for position, rec in enumerate(chain):
            standalone = rec.monthly_savings_usd
            rec.evidence = {**(rec.evidence or {}), "standalone_monthly_savings_usd": standalone}
            if position == 0:
                rec.plan = "primary"
            else:
                rec.plan = "step"
                share = (left / base) if base > 0 else ZERO
                rec.monthly_savings_usd = money(max(ZERO, standalone * share))
                rec.evidence["priced_after"] = [r.id for r in chain[:position]]
                _after(rec, chain[position - 1])
            left = max(ZERO, left - rec.monthly_savings_usd)
            rec.plan_id = plan_id
        for rec in members:
            if id(rec) not in chosen:
                rec.plan, rec.plan_id = "alternative", plan_id
                rec.evidence = {
                    **(rec.evidence or {}),
                    "standalone_monthly_savings_usd": rec.monthly_savings_usd,
                    "instead_of": [r.id for r in chain if family(r.kind) == family(rec.kind)]
                    or [r.id for r in chain[:1]],
                }
            out.append(rec)
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
