"""Scoring recommendations against a generator's ground truth: precision, recall and the savings error.

Shared by both halves of ``gpufinops evaluate`` (:mod:`jobs.evaluate` for the demo fleets,
:mod:`jobs.eval_independent` for the second generator). A true saving is priced from the demo
generator's own tables (:mod:`simulator.demo_prices`), never from a model's formulas.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from gpufinops.models import registry
from gpufinops.models.recommendation import Recommendation
from gpufinops.simulator.demo_prices import AWS_ON_DEMAND_USD, GCP_PRICES
from gpufinops.simulator.demo_workloads import FLEET, GPU_HARDWARE, INSTANCE_GPUS

DAYS_PER_MONTH = Decimal("30.4375")
HEADROOM = Decimal("1.2")


def _price_table() -> dict[tuple[str, str, str], Decimal]:
    """(provider, region, instance type) -> on-demand $/h, from the generator's own tables."""
    prices = {("gcp", region, it): Decimal(p[0]) for (it, region), p in GCP_PRICES.items()}
    for region in ("us-east-1", "us-west-2"):
        prices.update({("aws", region, it): Decimal(p) for it, p in AWS_ON_DEMAND_USD.items()})
    return prices


def _cheapest(item: dict, region: str, fits) -> Decimal | None:
    prices = _price_table()
    options = [
        price
        for (provider, reg, it), price in prices.items()
        if provider == item["provider"]
        and reg == region
        and INSTANCE_GPUS[it][1] == item["gpu_count"]
        and fits(INSTANCE_GPUS[it][0])
    ]
    return min(options) if options else None


def _idle_cost(item: dict, month: Decimal, _region: str) -> Decimal | None:
    cost = item.get("idle_cost_usd")  # a truth written before shared nodes priced their pods names none
    return None if cost is None else Decimal(cost) * month


def _smaller_type(item: dict, month: Decimal, _region: str) -> Decimal | None:
    # billed whole: the smaller type's price, not a per-GPU share
    return Decimal(item["window_saving_usd"]) * month if "window_saving_usd" in item else None


def _cheaper(item: dict, month: Decimal, region: str, fits) -> Decimal | None:
    current = _price_table().get((item["provider"], region, item["instance_type"]))
    target = _cheapest(item, region, fits)
    if current is None or target is None:
        return None
    return Decimal(item["cost_usd"]) * month * (1 - target / current)


def _cheaper_gpu(item: dict, month: Decimal, region: str) -> Decimal | None:
    return _cheaper(item, month, region, lambda model: model in item["proposed_gpu_models"])


def _lower_precision(item: dict, month: Decimal, region: str) -> Decimal | None:
    need_mib = Decimal(str(item["mem_used_fp16_estimate_gib"])) * 1024 * HEADROOM
    return _cheaper(item, month, region, lambda model: GPU_HARDWARE[model].memory_total_mib >= need_mib)


def _generator_priced(_item: dict, _month: Decimal, _region: str) -> Decimal | None:
    return None  # the generator names the figure (monthly_savings_usd), read before any rule; else none


# How a planted finding's true monthly saving is priced: each scored kind's spec names one
# (its spec module, models/kinds/<kind>.py: ``truth=Scored(...)``).
TRUTHS: dict[str, Callable[[dict, Decimal, str], Decimal | None]] = {
    "idle_cost": _idle_cost,  # the planted idle hours' cost, a month
    "smaller_type": _smaller_type,  # the cheapest smaller type of the family that holds the busy GPUs
    "cheaper_gpu": _cheaper_gpu,  # the cheapest type of the same count with a GPU the truth proposes
    "lower_precision": _lower_precision,  # the cheapest type of the same count holding the FP16 memory
    "generator_priced": _generator_priced,  # the generator priced it (spot_mix, commitment)
}


def truth_rule(kind: str) -> Callable[[dict, Decimal, str], Decimal | None]:
    """The pricing rule of ``kind``'s truth (its spec's ``truth``); ValueError for a kind not scored."""
    truth = registry.spec(kind).truth
    if not isinstance(truth, registry.Scored):
        raise ValueError(f"{kind} is not scored by evaluate: {truth.reason}")
    if truth.truth not in TRUTHS:
        raise ValueError(f"{kind}: truth {truth.truth!r} is none of {', '.join(TRUTHS)}")
    return TRUTHS[truth.truth]


def truth_savings(item: dict, days: int, region: str) -> Decimal | None:
    """The true monthly saving of one planted finding (None when the truth names no figure)."""
    rule, month = truth_rule(item["kind"]), DAYS_PER_MONTH / Decimal(days)
    if item.get("monthly_savings_usd") is not None:  # the generator priced it (spot_mix, commitment)
        return Decimal(str(item["monthly_savings_usd"]))
    return rule(item, month, region)


def score(recs: list[Recommendation], truth: dict, kinds: set[str]) -> dict[str, dict[str, Any]]:
    """Per kind of ``kinds`` with ground truth: precision, recall and the savings error (each kind priced by
    its spec's truth rule, :func:`truth_rule`)."""
    regions = {m["resource_id"]: m for m in truth["machines"]}
    # commitments: truth, though not waste; a shared node's pods holding an idle GPU: planted, one per pod
    items = truth["planted"] + truth.get("commitments", []) + _idle_pods(truth)
    pod_nodes = {m["resource_id"] for m in truth["machines"] if m.get("idle_pod_hours")}
    out = {}
    for kind in sorted(kinds & {p["kind"] for p in items}):
        planted = {p["resource_id"]: p for p in items if p["kind"] == kind}
        members = {rid: p["resource_id"] for p in planted.values() for rid in p.get("resource_ids", [])}
        # a conditional finding (gpu_count's "pack other work onto it") claims no saving and is never in a
        # total: it is counted apart, not as a finding
        found = {
            members.get(_key(r, pod_nodes), _key(r, pod_nodes)): r
            for r in recs
            if r.kind == kind and not _conditional(r)
        }
        hits = set(planted) & set(found)
        truth_usd, found_usd = Decimal(0), Decimal(0)
        priced = True
        for rid in hits:
            machine = regions[planted[rid].get("node", rid)]
            t = truth_savings(planted[rid], truth["days"], planted[rid].get("region") or _region(machine, truth))
            if t is None:
                priced = False
                continue
            truth_usd += t
            # the model's own figure: a plan's step is re-priced after the steps before it
            found_usd += Decimal(
                str(found[rid].evidence.get("standalone_monthly_savings_usd", found[rid].monthly_savings_usd))
            )
        out[kind] = {
            "planted": len(planted),
            "found": len(found),
            "hits": len(hits),
            "precision": len(hits) / len(found) if found else (1.0 if not planted else 0.0),
            "recall": len(hits) / len(planted) if planted else 1.0,
            "truth_monthly_savings_usd": float(truth_usd) if priced else None,
            "found_monthly_savings_usd": float(found_usd) if priced else None,
            "savings_error": float((found_usd - truth_usd) / truth_usd) if priced and truth_usd else None,
            "missed": sorted(set(planted) - hits),
            "extra": sorted(set(found) - hits, key=str),
        }
    return out


def _idle_pods(truth: dict) -> list[dict]:
    """A shared node's pods that held their GPU idle (``idle_pod_hours``), as planted idle_gpu findings keyed
    ``"<node> <namespace>"`` and priced by the GPU-hours they held idle (``idle_pod_cost_usd``)."""
    return [
        {
            "kind": "idle_gpu",
            "resource_id": f"{m['resource_id']} {namespace}",
            "node": m["resource_id"],
            "idle_cost_usd": (m.get("idle_pod_cost_usd") or {}).get(namespace),
        }
        for m in truth["machines"]
        for namespace, hours in (m.get("idle_pod_hours") or {}).items()
        if hours
    ]


def _key(rec: Recommendation, pod_nodes: set[str]) -> str | None:
    """What a finding is scored as: its resource, or on a shared node the pod's ``"<node> <namespace>"``."""
    namespace = (rec.evidence or {}).get("namespace")
    return f"{rec.resource_id} {namespace}" if rec.resource_id in pod_nodes and namespace else rec.resource_id


def _conditional(rec) -> bool:
    return bool((getattr(rec, "evidence", None) or {}).get("conditional"))


def _region(machine: dict, truth: dict) -> str:
    rid = machine["resource_id"]
    if machine["provider"] == "gcp":
        return rid.split("/zones/")[1].split("/")[0].rsplit("-", 1)[0]
    return _aws_region(machine)


def _aws_region(machine: dict) -> str:
    """ground_truth.json names no region: the fleet's spec with the machine's attributes names its zone."""
    for spec in FLEET:
        if (spec.provider, spec.instance_type, spec.team, spec.workload, spec.pricing) == (
            machine["provider"],
            machine["instance_type"],
            machine["team"],
            machine["workload"],
            machine["pricing"],
        ):
            return spec.zone[:-1] if spec.provider == "aws" else spec.zone
    return ""
