"""Every pair of kinds that can meet on one shared node (models/plans.py): pod-level × pod-level on disjoint and
on the same GPUs (whole GPUs, MIG slices, time-sliced shares), and pod-level × each node-level kind. Each test
asserts the roles and that the total is the sum of the independent plans' savings, never a GPU-hour twice.

The first tests build the findings directly (the reconciliation is pure); the last ones go through the
warehouse (allocation over MIG slices and a time-sliced GPU, then the idle model) so the GPU units the plans
read are the ones the model writes.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from gpufinops.derived import allocation
from gpufinops.models import plans
from gpufinops.models import run as models_run
from gpufinops.models.recommendation import Recommendation, money
from gpufinops.warehouse import db
from tests.allocation_fleet import Fleet, GpuHour, Line, Work, hourly_lines

NODE = "i-shared"
NODE_COST = Decimal("16028.08")  # a p4d.24xlarge for a month: $21.957642 × 24 × 30.4375, rounded


def node(kind: str, savings: str, pattern: str | None = None, team: str = "ml-platform") -> Recommendation:
    return Recommendation(
        id=f"{kind}-{NODE}-{pattern or ''}",
        kind=kind,
        team=team,
        provider="aws",
        resource_id=NODE,
        workload=None,
        current={"monthly_cost_usd": NODE_COST},
        proposed={"action": kind},
        monthly_savings_usd=Decimal(savings),
        confidence=0.8,
        risk="",
        evidence={"pattern": pattern} if pattern else {},
    )


def pod(
    team: str, units: list[str], savings: str, kind: str = "idle_gpu", cost: str = "2003.51", name: str = ""
) -> Recommendation:
    """A finding on one team's pod on the node: the node's finding narrowed to the pod's GPU units."""
    return dataclasses.replace(
        node(kind, savings, team=team),
        id=f"{kind}-{team}-{name or '-'.join(units)}",
        workload=f"{team}/{name or 'pod'}",
        current={"monthly_cost_usd": Decimal(cost), "gpu_count": len(units)},
        proposed={"action": kind, "gpu_count": 0},
        evidence={"pattern": "allocated_idle" if kind == "idle_gpu" else "pod", "gpu_units": units},
    )


def roles(recs: list[Recommendation]) -> dict[str, str | None]:
    return {r.id: r.plan for r in recs}


UNITS = {
    "whole GPUs": (["GPU-0"], ["GPU-1"]),
    "MIG slices": (["GPU-0:1g.5gb/1"], ["GPU-0:1g.5gb/2"]),
    "time-sliced shares": (["GPU-0@research/notebook"], ["GPU-0@nlp/finetune"]),
}


@pytest.mark.parametrize("shape", list(UNITS))
def test_two_teams_pods_on_disjoint_units_of_one_node_are_two_primary_plans(shape):
    research_units, nlp_units = UNITS[shape]
    research, nlp = pod("research", research_units, "1670.84"), pod("nlp", nlp_units, "1169.59")
    out = plans.reconcile([nlp, research])
    assert roles(out) == {research.id: "primary", nlp.id: "primary"}
    assert research.plan_id != nlp.plan_id
    assert plans.total(out) == Decimal("1670.84") + Decimal("1169.59")
    for team, own in (("research", "1670.84"), ("nlp", "1169.59")):  # a team's scope: its own plan
        assert plans.total([r for r in out if r.team == team]) == Decimal(own)
    assert [r.id for r in out] == [research.id, nlp.id]  # largest plan first


@pytest.mark.parametrize("shape", list(UNITS))
def test_two_usage_findings_on_the_same_units_are_one_plan(shape):
    units = UNITS[shape][0]
    first, second = pod("research", units, "900", name="a"), pod("research", units, "400", name="b")
    out = plans.reconcile([first, second])
    assert roles(out) == {first.id: "primary", second.id: "alternative"}
    assert second.evidence["instead_of"] == [first.id] and first.plan_id == second.plan_id
    assert plans.total(out) == Decimal("900")


def test_a_pod_rightsize_on_the_same_gpus_is_a_step_priced_on_what_the_release_leaves():
    release = pod("nlp", ["GPU-1"], "1169.59", cost="2003.51")
    fp16 = pod("nlp", ["GPU-1"], "800", kind="quantization", cost="2003.51")
    out = plans.reconcile([fp16, release])
    assert roles(out) == {release.id: "primary", fp16.id: "step"}
    left = Decimal("2003.51") - Decimal("1169.59")
    assert fp16.monthly_savings_usd == money(Decimal("800") * left / Decimal("2003.51"))
    assert fp16.evidence["priced_after"] == [release.id]
    assert plans.total(out) == Decimal("1169.59") + fp16.monthly_savings_usd < Decimal("2003.51")


def test_overlapping_gpu_sets_join_one_plan_and_a_third_disjoint_one_stays_apart():
    wide = pod("research", ["GPU-0", "GPU-1"], "3000", name="wide")
    narrow = pod("nlp", ["GPU-1"], "1000", name="narrow")
    apart = pod("vision", ["GPU-2"], "500", name="apart")
    out = plans.reconcile([apart, narrow, wide])
    assert roles(out) == {wide.id: "primary", narrow.id: "alternative", apart.id: "primary"}
    assert wide.plan_id == narrow.plan_id != apart.plan_id
    assert plans.total(out) == Decimal("3500")


def test_the_same_gpu_uuid_on_two_nodes_is_two_plans():
    here, there = pod("research", ["GPU-0"], "100"), pod("research", ["GPU-0"], "200")
    there.id, there.resource_id = "elsewhere", "i-other"
    out = plans.reconcile([here, there])
    assert roles(out) == {here.id: "primary", there.id: "primary"}


@pytest.mark.parametrize("shape", list(UNITS))
def test_a_node_release_takes_the_pods_findings_as_its_alternatives(shape):
    research_units, nlp_units = UNITS[shape]
    release = node("idle_gpu", "15000", pattern="always_idle")
    research, nlp = pod("research", research_units, "1670.84"), pod("nlp", nlp_units, "1169.59")
    out = plans.reconcile([research, nlp, release])
    assert roles(out) == {release.id: "primary", research.id: "alternative", nlp.id: "alternative"}
    assert research.evidence["instead_of"] == [release.id] == nlp.evidence["instead_of"]
    assert research.plan_id == nlp.plan_id == release.plan_id
    assert plans.total(out) == Decimal("15000")  # the release already holds the pods' GPU-hours


NODE_LEVEL = [
    ("idle_gpu", "idle_off_hours"),
    ("idle_gpu", "idle_stretches"),
    ("gpu_count", None),
    ("gpu_type", None),
    ("quantization", None),
    ("spot_mix", None),
    ("commitment", None),
    ("onprem_vs_cloud", None),
]


@pytest.mark.parametrize("shape", list(UNITS))
@pytest.mark.parametrize(("kind", "pattern"), NODE_LEVEL)
def test_a_node_level_plan_beside_pod_plans_is_priced_on_what_they_leave(kind, pattern, shape):
    research_units, nlp_units = UNITS[shape]
    research, nlp = pod("research", research_units, "1670.84"), pod("nlp", nlp_units, "1169.59")
    whole = node(kind, "4000", pattern=pattern)
    out = plans.reconcile([whole, research, nlp])
    assert roles(out) == {whole.id: "primary", research.id: "primary", nlp.id: "primary"}
    assert len({whole.plan_id, research.plan_id, nlp.plan_id}) == 3
    left = NODE_COST - Decimal("1670.84") - Decimal("1169.59")
    assert whole.monthly_savings_usd == money(Decimal("4000") * left / NODE_COST)
    assert whole.evidence["standalone_monthly_savings_usd"] == Decimal("4000")
    assert sorted(whole.evidence["priced_after"]) == sorted([research.id, nlp.id])
    assert plans.total(out) == Decimal("1670.84") + Decimal("1169.59") + whole.monthly_savings_usd
    assert plans.total(out) <= NODE_COST
    assert plans.total([r for r in out if r.team == "ml-platform"]) == whole.monthly_savings_usd


def test_a_node_chain_after_pods_keeps_its_steps_on_the_cost_left():
    research = pod("research", ["GPU-0"], "1670.84")
    schedule = node("idle_gpu", "3000", pattern="idle_off_hours")
    commit = node("commitment", "2000")
    out = plans.reconcile([commit, schedule, research])
    assert roles(out) == {research.id: "primary", schedule.id: "primary", commit.id: "step"}
    left = NODE_COST - Decimal("1670.84")
    assert schedule.monthly_savings_usd == money(Decimal("3000") * left / NODE_COST)
    left -= schedule.monthly_savings_usd
    assert commit.monthly_savings_usd == money(Decimal("2000") * left / NODE_COST)
    assert commit.evidence["priced_after"] == [research.id, schedule.id]
    assert plans.total(out) == Decimal("1670.84") + schedule.monthly_savings_usd + commit.monthly_savings_usd


def test_a_dismissed_pod_finding_leaves_the_others_counted():
    research, nlp = pod("research", ["GPU-0"], "1670.84"), pod("nlp", ["GPU-1"], "1169.59")
    out = plans.reconcile([research, nlp])
    rows = [{**r.to_dict(), "status": "dismissed" if r.team == "nlp" else "open"} for r in out]
    assert plans.total(rows) == Decimal("1670.84")


def test_a_finding_without_units_is_planned_on_its_resource_as_before():
    stored = pod("research", [], "100")  # a stored object from before findings named their GPU units
    commit = node("commitment", "200")
    plans.reconcile([stored, commit])
    assert (stored.plan, commit.plan) == ("primary", "step") and stored.plan_id == commit.plan_id


# Through the warehouse: allocation charges each pod its slice or share, the idle model names the units.


def _idle_pods(warehouse, fleet: Fleet) -> dict[str, Recommendation]:
    with db.writer(warehouse) as con:
        fleet.insert(con)
        allocation.reallocate_all(con, allocation.AllocationSettings())
        found = models_run.analyse(con, ["idle_gpu"])
    return {r.evidence["namespace"]: r for r in found.recommendations if r.evidence.get("pattern") == "allocated_idle"}


def _a100_day(fleet: Fleet, units: list[str | None], util: dict[str | None, float]) -> None:
    """A two-A100 node for a day ($96, $48 a GPU): ``GPU-a100`` as ``units`` (MIG slices or whole) and a
    busy ``GPU-busy`` (so the node itself is not idle: no node release takes the pods' findings)."""
    for hour, cost in enumerate(hourly_lines(Decimal("96"))):
        fleet.lines.append(Line(NODE, hour, cost, team="ml-platform", gpu_count=2))
        for mig in units:
            fleet.gpu_hours.append(GpuHour(NODE, hour, "GPU-a100", mig, util_max=util[mig]))
        fleet.gpu_hours.append(GpuHour(NODE, hour, "GPU-busy", util_max=85.0))
        fleet.work.append(Work(hour, "GPU-busy", "vision", "trainer-0", mem_mib=30000.0, util=85.0))


def _two_primary_plans(warehouse, fleet: Fleet) -> dict[str, Recommendation]:
    """The idle-pod findings of research and nlp sharing one GPU: a primary plan each, whose total is the
    sum of their savings."""
    found = _idle_pods(warehouse, fleet)
    assert set(found) == {"research", "nlp"}
    assert {r.plan for r in found.values()} == {"primary"}
    assert plans.total(found.values()) == sum(r.monthly_savings_usd for r in found.values())
    return found


def test_two_teams_on_two_mig_slices_of_one_a100_are_two_plans_through_the_warehouse(warehouse):
    fleet = Fleet()
    slices = {"3g.20gb/1": "research", "3g.20gb/2": "nlp"}
    _a100_day(fleet, list(slices), dict.fromkeys(slices, 0.0))
    fleet.work += [
        Work(h, "GPU-a100", team, f"{team}-0", mig_instance=mig, mem_mib=8000.0)
        for mig, team in slices.items()
        for h in range(24)
    ]
    found = _two_primary_plans(warehouse, fleet)
    assert found["research"].evidence["gpu_units"] == ["GPU-a100:3g.20gb/1"]
    assert found["nlp"].evidence["gpu_units"] == ["GPU-a100:3g.20gb/2"]
    assert all(r.monthly_savings_usd > 0 for r in found.values())


def test_two_teams_on_one_time_sliced_gpu_are_two_plans_through_the_warehouse(warehouse):
    fleet = Fleet()
    _a100_day(fleet, [None], {None: 0.0})
    fleet.work += [
        Work(h, "GPU-a100", team, f"{team}-0", occupied=60, sharing="timeslice", mem_mib=9000.0)
        for team in ("research", "nlp")
        for h in range(24)
    ]
    found = _two_primary_plans(warehouse, fleet)
    assert found["research"].evidence["gpu_units"] == ["GPU-a100@research/research-0"]
    assert found["research"].evidence["gpu_sharing"] == ["timeslice"]
    total = plans.total(found.values())
    # the two shares add up to the GPU's month, never more: allocation split each hour between the pods
    assert total <= money(Decimal("48") * Decimal("30.4375")) + Decimal("0.01")


def test_a_node_schedule_beside_a_pod_idle_in_its_idle_hours_counts_each_gpu_hour_once(warehouse):
    """A two-GPU node ($4 an hour, $2 a GPU) idles nights and weekends (both GPUs at 0 %): a node-level
    schedule (idle_off_hours). Research's notebook holds GPU 0 idle every hour but weekday mornings (08-12
    UTC), so most of its idle hours are the node's too. The pod's release is counted whole; the node's
    schedule only for what the release does not already save: the total is every idle GPU-hour once."""
    fleet = Fleet()
    work_hours = {h for h in range(168) if h // 24 < 5 and 8 <= h % 24 < 19}  # START is a Monday
    mornings = {h for h in work_hours if h % 24 < 12}
    for hour in range(168):
        fleet.lines.append(Line(NODE, hour, Decimal(4), team="ml-platform", gpu_count=2))
        fleet.gpu_hours.append(GpuHour(NODE, hour, "GPU-0", util_max=70.0 if hour in mornings else 0.0))
        fleet.gpu_hours.append(GpuHour(NODE, hour, "GPU-1", util_max=80.0 if hour in work_hours else 0.0))
        fleet.work.append(Work(hour, "GPU-0", "research", "notebook-0", mem_mib=10240.0))
    with db.writer(warehouse) as con:
        fleet.insert(con)
        allocation.reallocate_all(con, allocation.AllocationSettings())
        found = models_run.analyse(con, ["idle_gpu"])
    by_pattern = {r.evidence["pattern"]: r for r in found.recommendations}
    assert set(by_pattern) == {"idle_off_hours", "allocated_idle"}
    schedule, notebook = by_pattern["idle_off_hours"], by_pattern["allocated_idle"]
    assert (schedule.plan, notebook.plan) == ("primary", "primary")
    month = Decimal("30.4375") / 7
    node_idle = 168 - len(work_hours)  # both GPUs idle: the schedule's hours
    pod_only = len(work_hours) - len(mornings)  # the notebook idle while GPU 1 works
    assert schedule.evidence["standalone_monthly_savings_usd"] == money(Decimal(4) * node_idle * month)
    assert notebook.monthly_savings_usd == money(Decimal(2) * (node_idle + pod_only) * month)
    assert schedule.evidence["pod_overlap_monthly_usd"] == {notebook.id: money(Decimal(2) * node_idle * month)}
    assert schedule.evidence["priced_after"] == [notebook.id]
    every_idle_gpu_hour_once = Decimal(4) * node_idle + Decimal(2) * pod_only
    assert abs(plans.total(found.recommendations) - every_idle_gpu_hour_once * month) <= Decimal("0.02")
