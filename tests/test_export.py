"""`gpufinops export`: every generated Kueue / Karpenter manifest validates against the real CRD
schemas (tests/data/k8s-crds, from kubernetes-sigs/kueue and kubernetes-sigs/karpenter), carries the
plan's spot/on-demand split per target cluster, passes the semantic checks (tests/export_checks.py),
and a broken manifest fails the same checks.

The recommendations are realistic findings of every kind, reconciled into plans (models.plans) and
stored through `store_recommendations` beside hourly GPU cost lines of two AWS regions, one Google
Cloud project and an on-prem cluster, so the export reads them exactly as it reads a model run's.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpufinops.models import plans
from gpufinops.warehouse import db, recommendation_store
from tests import cli_process, export_checks
from tests.feed_fleet import (
    AWS_EAST,
    AWS_WEST,
    FLEET,
    GCP_CENTRAL,
    ONPREM,
    ONPREM_GPUS_PER_NODE,
    realistic_recommendations,
)
from tests.k8s_crds import CRD_FILES, CRDS, crd_schemas, validate


def export(warehouse: Path, fmt: str, team: str | None = None, cluster: str | None = None) -> str:
    import gpufinops.jobs.export as exp

    with db.reader(warehouse) as con:
        return exp.render(con, fmt, team=team, cluster=cluster)


def docs_of(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


# --- tests ---------------------------------------------------------------------------------------


def test_the_crds_are_the_real_ones_with_their_licenses():
    for name in CRD_FILES.values():
        crd = yaml.safe_load((CRDS / name).read_text())
        assert crd["kind"] == "CustomResourceDefinition" and crd["apiVersion"] == "apiextensions.k8s.io/v1"
    for license_file in ("LICENSE-kueue", "LICENSE-karpenter"):
        assert "Apache License" in (CRDS / license_file).read_text()
    assert len(crd_schemas()) == 7  # Kueue v1beta1 + v1beta2 of three kinds, Karpenter v1 NodePool


def by_cluster(docs: list[dict]) -> dict[str, list[dict]]:
    """Documents grouped by the cluster name each carries (annotation gpufinops.io/cluster-name)."""
    out: dict[str, list[dict]] = {}
    for doc in docs:
        out.setdefault(doc["metadata"]["annotations"]["gpufinops.io/cluster-name"], []).append(doc)
    return out


def quotas(docs: list[dict], queue: str) -> dict[str, int]:
    [cq] = [d for d in docs if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == queue]
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    return {f["name"]: f["resources"][0]["nominalQuota"] for f in group["flavors"]}


def test_kueue_is_one_config_per_cluster_carrying_the_plan_within_capacity(feed_warehouse):
    schemas = crd_schemas()
    text = export(feed_warehouse, "kueue")
    docs = docs_of(text)
    for doc in docs:
        validate(doc, schemas)
    clusters = by_cluster(docs)
    assert set(clusters) == {AWS_EAST, AWS_WEST, GCP_CENTRAL, "dc1"}
    for name in clusters:
        assert f"# ==== cluster: {name} (" in text
    recs = realistic_recommendations()
    by_kind = {r.kind: r for r in recs}
    # the header states the one total: models.plans.total over the plan's objects
    assert f"# plan total: ${float(plans.total(plans.reconcile(recs))):,.2f}/month" in text

    east = clusters[AWS_EAST]
    assert {d["metadata"]["name"] for d in east if d["kind"] == "ClusterQueue"} == {
        "gpufinops-vision",
        "gpufinops-search",
    }
    vq = quotas(east, "gpufinops-vision")
    # two p4d (16 A100s): the idle one is released (-8), the training one moves to spot
    vision_a100 = sum(
        g for t, p, r, *_x, m, g, _pc, _c in FLEET if t == "vision" and r == "us-east-1" and m == "A100-40GB"
    )
    assert vq["aws-a100-40gb-spot"] == vision_a100 - by_kind["idle_gpu"].current["gpu_count"]
    assert "aws-a100-40gb-on-demand" not in vq  # nothing left on on-demand
    # the three L4 API replicas: two thirds to spot, the rest stays on-demand as the floor
    api = [r for r in recs if r.workload == "vision-api"]
    spot_l4 = round(sum(r.proposed["spot_share"] * r.current["gpu_count"] for r in api))
    assert 0 < spot_l4 < len(api)
    assert vq["aws-l4-spot"] == spot_l4 and vq["aws-l4-on-demand"] == len(api) - spot_l4
    assert list(vq)[:2] == ["aws-a100-40gb-spot", "aws-l4-spot"]  # Kueue tries spot flavors first
    # search: the quantized ranker moves to 4 L40S; the H100 node leaves for dc1: no AWS H100 quota left
    assert quotas(east, "gpufinops-search") == {"aws-l40s-on-demand": by_kind["quantization"].proposed["gpu_count"]}
    flavors = {d["metadata"]["name"]: d["spec"]["nodeLabels"] for d in east if d["kind"] == "ResourceFlavor"}
    assert flavors["aws-a100-40gb-spot"]["karpenter.sh/capacity-type"] == "spot"
    assert flavors["aws-l4-on-demand"]["karpenter.sh/capacity-type"] == "on-demand"
    # one cluster's flavors only: no GKE or on-prem flavor on the EKS cluster, one cohort per cluster
    assert all(k.startswith("karpenter.") for labels in flavors.values() for k in labels)
    assert {d["spec"]["cohortName"] for d in east if d["kind"] == "ClusterQueue"} == {
        "gpufinops-aws-us-east-1-111122223333"
    }

    # the Google Cloud project: the A100 serving node becomes an L4
    assert quotas(clusters[GCP_CENTRAL], "gpufinops-vision") == {
        "gcp-l4-on-demand": by_kind["gpu_type"].proposed["gpu_count"]
    }
    [gke_flavor] = [d for d in clusters[GCP_CENTRAL] if d["kind"] == "ResourceFlavor"]
    assert gke_flavor["spec"]["nodeLabels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"

    # nlp in us-west-2: no spot_mix finding, keeps today's split (the g5.12xlarge on spot); 8 -> 4 A10Gs
    nq = quotas(clusters[AWS_WEST], "gpufinops-nlp")
    nlp_spot = sum(g for t, *_r, g, pc, _c in FLEET if t == "nlp" and pc == "Dynamic")
    assert nq == {"aws-a10g-spot": nlp_spot, "aws-a10g-on-demand": by_kind["gpu_count"].proposed["gpu_count"]}

    # dc1 has 16 H100s, all busy today (search 8, nlp 8); the move of 8 more cannot add GPUs: every team's
    # quota is cut to fit, and the quotas together never exceed the node groups' GPUs
    capacity = len(ONPREM) * ONPREM_GPUS_PER_NODE
    dc1 = {
        q["metadata"]["name"]: quotas(clusters["dc1"], q["metadata"]["name"])["onprem-h100-sxm"]
        for q in clusters["dc1"]
        if q["kind"] == "ClusterQueue"
    }
    assert set(dc1) == {"gpufinops-search", "gpufinops-nlp"}
    assert sum(dc1.values()) == capacity and dc1["gpufinops-search"] > dc1["gpufinops-nlp"] > 0
    assert "cut to fit the cluster's 16 H100-SXM GPUs" in text
    [onprem_flavor] = [d for d in clusters["dc1"] if d["kind"] == "ResourceFlavor"]
    assert onprem_flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

    # no namespace is named by the data or the config: no LocalQueue anywhere, and the comment says why
    assert not [d for d in docs if d["kind"] == "LocalQueue"] and "unattributed" not in text
    assert "the data names no namespace for team vision" in text
    with db.reader(feed_warehouse) as con:
        onprem, _ = export_checks.onprem_facts(con)
        cloud = export_checks.cloud_capacity(con, json.loads(export(feed_warehouse, "json")), [])
    assert onprem == {("dc1", "h100-sxm"): capacity}
    limits = export_checks.nodepool_limits(docs_of(export(feed_warehouse, "karpenter")))
    assert export_checks.check_kueue(docs, {**cloud, **onprem}, limits, {}) == []
    assert export_checks.check_names(docs) == []


def test_karpenter_nodepools_validate_are_launchable_and_only_on_aws(feed_warehouse):
    schemas = crd_schemas()
    text = export(feed_warehouse, "karpenter")
    docs = docs_of(text)
    assert docs and all(d["kind"] == "NodePool" for d in docs)
    for doc in docs:
        validate(doc, schemas)
    assert export_checks.check_nodepools(docs, export_checks.inventory()) == []
    assert set(by_cluster(docs)) == {AWS_EAST, AWS_WEST}  # GKE and on-prem: no NodePools, and said so
    assert f"# ==== cluster: {GCP_CENTRAL} (GKE): no NodePools" in text and "# ==== cluster: dc1 (" in text
    pools = {d["metadata"]["name"]: d["spec"] for d in by_cluster(docs)[AWS_EAST]}

    def req(spec, key):
        return next(r["values"] for r in spec["template"]["spec"]["requirements"] if r["key"] == key)

    spot, on_demand = pools["gpufinops-vision-l4-spot"], pools["gpufinops-vision-l4-on-demand"]
    assert req(spot, "karpenter.sh/capacity-type") == ["spot"]
    assert req(on_demand, "karpenter.sh/capacity-type") == ["on-demand"]
    assert spot["weight"] > on_demand["weight"]  # spot first, on-demand once the spot limit is reached
    replicas = [r for r in realistic_recommendations() if r.workload == "vision-api"]
    assert spot["limits"]["nvidia.com/gpu"] + on_demand["limits"]["nvidia.com/gpu"] == len(replicas)
    assert spot["limits"]["nvidia.com/gpu"] > on_demand["limits"]["nvidia.com/gpu"] > 0
    assert req(spot, "node.kubernetes.io/instance-type") == ["g6.xlarge"]
    assert "gpufinops-vision-a100-40gb-on-demand" not in pools  # all of vision's A100 work goes to spot
    assert req(pools["gpufinops-vision-a100-40gb-spot"], "node.kubernetes.io/instance-type") == ["p4d.24xlarge"]
    assert pools["gpufinops-vision-a100-40gb-spot"]["limits"]["nvidia.com/gpu"] == 8
    assert req(pools["gpufinops-search-l40s-on-demand"], "node.kubernetes.io/instance-type") == ["g6e.12xlarge"]
    assert not any("h100" in name or "a100-80gb" in name for name in pools)  # GPUs that go away get no NodePool
    west = {d["metadata"]["name"]: d["spec"] for d in by_cluster(docs)[AWS_WEST]}
    assert req(west["gpufinops-nlp-a10g-on-demand"], "node.kubernetes.io/instance-type") == ["g5.12xlarge"]
    assert west["gpufinops-nlp-a10g-on-demand"]["limits"]["nvidia.com/gpu"] == 4
    assert all(
        p["template"]["metadata"]["labels"]["gpufinops.io/team"] in ("vision", "nlp", "search") for p in pools.values()
    )


def test_a_broken_manifest_fails_validation(feed_warehouse):
    """The check can fail: each breakage below is one the API server would refuse."""
    schemas = crd_schemas()
    docs = docs_of(export(feed_warehouse, "kueue")) + docs_of(export(feed_warehouse, "karpenter"))
    queue = next(d for d in docs if d["kind"] == "ClusterQueue")
    pool = next(d for d in docs if d["kind"] == "NodePool")
    flavor = next(d for d in docs if d["kind"] == "ResourceFlavor")

    bad_quota = json.loads(json.dumps(queue))
    bad_quota["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "eight"
    no_node_class = json.loads(json.dumps(pool))
    del no_node_class["spec"]["template"]["spec"]["nodeClassRef"]
    bad_operator = json.loads(json.dumps(pool))
    bad_operator["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Equals"
    heavy = json.loads(json.dumps(pool))
    heavy["spec"]["weight"] = 101
    bad_taints = json.loads(json.dumps(flavor))
    bad_taints["spec"]["nodeTaints"] = [{"key": "nvidia.com/gpu"}]  # no effect
    for broken in (bad_quota, no_node_class, bad_operator, heavy, bad_taints):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken, schemas)
    bad_name = json.loads(json.dumps(queue))
    bad_name["metadata"]["name"] = "Vision_Team"
    with pytest.raises(AssertionError):
        validate(bad_name, schemas)


def test_team_scoping_skypilot_and_json(feed_warehouse):
    vision = docs_of(export(feed_warehouse, "kueue", team="vision"))
    assert {d["metadata"]["name"] for d in vision if d["kind"] == "ClusterQueue"} == {"gpufinops-vision"}
    assert set(by_cluster(vision)) == {AWS_EAST, GCP_CENTRAL}
    # a team's share of a full cluster is the same with or without --team: the other teams still count
    everyone = docs_of(export(feed_warehouse, "kueue", cluster="dc1"))
    assert (
        quotas(docs_of(export(feed_warehouse, "kueue", "nlp", "dc1")), "gpufinops-nlp")
        == quotas(everyone, "gpufinops-nlp")
        == {"onprem-h100-sxm": 5}
    )
    assert "nlp" not in export(feed_warehouse, "karpenter", team="vision")

    objects = json.loads(export(feed_warehouse, "json", team="nlp"))
    assert {o["team"] for o in objects} == {"nlp"}
    assert {o["kind"] for o in objects} == {"gpu_count", "commitment"}
    assert all(isinstance(o["monthly_savings_usd"], float) and isinstance(o["proposed"], dict) for o in objects)
    assert {o["plan"] for o in objects} == {"primary"}

    text = export(feed_warehouse, "skypilot")
    tasks = docs_of(text)
    with db.reader(feed_warehouse) as con:
        _, per_node = export_checks.onprem_facts(con)
    assert export_checks.check_skypilot(tasks, export_checks.inventory(), per_node) == []
    sky = {d["name"]: d["resources"] for d in tasks}
    assert len(sky) == len(tasks)
    recs = {r.kind: r for r in realistic_recommendations()}
    assert sky["vision-serving"] == {
        "infra": "gcp/us-central1",
        "accelerators": "L4:1",
        "instance_type": "g2-standard-8",
        "use_spot": False,
    }
    assert sky["vision-train"] == {
        "infra": "aws/us-east-1",
        "accelerators": "A100:8",
        "instance_type": "p4d.24xlarge",
        "use_spot": True,
    }
    [service] = [d for d in tasks if d["name"] == "vision-api"]  # three replicas planned alike: one task
    assert service["resources"]["use_spot"] is True and service["resources"]["accelerators"] == "L4:1"
    assert service["service"]["replica_policy"]["base_ondemand_fallback_replicas"] == 1  # a third of 3 replicas
    assert sky["search-ranker"]["accelerators"] == f"L40S:{recs['quantization'].proposed['gpu_count']}"
    # the repatriated H100 node: SkyPilot's Kubernetes cloud, accelerators only, no made-up instance type
    assert sky["search-embed"] == {"infra": "k8s", "accelerators": "H100:8"}
    assert sky["nlp-finetune"]["accelerators"] == "A10G:4" and sky["nlp-finetune"]["infra"] == "aws/us-west-2"
    assert "i-0vision0001" not in text.split("---", 1)[1]  # released: nothing for a task to request
    assert "no task: " in text and "no resource: nothing to place on a cluster" in text  # the team-wide commitment
    assert "cloud" not in {k for r in sky.values() for k in r}


def test_dismissed_and_alternative_findings_leave_the_manifests(feed_warehouse):
    spot_id = next(r.id for r in realistic_recommendations() if r.workload == "vision-train")
    with db.writer(feed_warehouse) as con:
        recommendation_store.record_decision(con, spot_id, "dismiss", "our jobs do not checkpoint", "test")
    names = list(quotas(docs_of(export(feed_warehouse, "kueue", "vision", AWS_EAST)), "gpufinops-vision"))
    assert "aws-a100-40gb-spot" not in names and "aws-a100-40gb-on-demand" in names
    with db.writer(feed_warehouse) as con:  # an exclusive alternative is shown, never carried out
        con.execute("UPDATE recommendations SET status = 'open', plan = 'alternative' WHERE id = ?", [spot_id])
    text = export(feed_warehouse, "kueue", "vision", AWS_EAST)
    assert "aws-a100-40gb-spot" not in list(quotas(docs_of(text), "gpufinops-vision"))
    assert "1 alternative(s), never added" in text


def test_export_command_writes_a_file_picks_a_cluster_and_validates(feed_warehouse, tmp_path):
    out = tmp_path / "kueue.yaml"
    result = cli_process.run("--db", str(feed_warehouse), "export", "kueue", "--team", "search", "--out", str(out))
    assert result.returncode == 0, result.stderr
    schemas = crd_schemas()
    docs = docs_of(out.read_text())
    assert {d["kind"] for d in docs} == {"ResourceFlavor", "ClusterQueue"}
    for doc in docs:
        validate(doc, schemas)
    assert set(by_cluster(docs)) == {AWS_EAST, "dc1"}
    one = cli_process.run("--db", str(feed_warehouse), "export", "kueue", "--cluster", "dc1")
    assert one.returncode == 0, one.stderr
    assert set(by_cluster(docs_of(one.stdout))) == {"dc1"} and "# cluster dc1 (on-prem Kubernetes)" in one.stdout
    label = cli_process.run(
        "--db", str(feed_warehouse), "export", "karpenter", "--cluster", "aws-us-west-2-111122223333"
    )
    assert label.returncode == 0 and set(by_cluster(docs_of(label.stdout))) == {AWS_WEST}
    unknown = cli_process.run("--db", str(feed_warehouse), "export", "kueue", "--cluster", "prod-eks")
    assert unknown.returncode == 2 and "prod-eks" in unknown.stderr and AWS_EAST in unknown.stderr
    bad = cli_process.run("--db", str(feed_warehouse), "export", "slurm")
    assert bad.returncode == 2 and "slurm" in bad.stderr
