"""The semantic checks of tests/export_checks.py can fail, on exactly the defects the issue found, and
their facts agree with SkyPilot's own catalogue (tests/data/skypilot-catalog: its real GCP catalogue)."""

from __future__ import annotations

import copy
import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest

from gpufinops.jobs.export import inventory as export_inventory
from gpufinops.warehouse import db
from tests import export_checks
from tests.feed_fleet import AWS_EAST, GCP_CENTRAL
from tests.test_export import docs_of, export

SKYPILOT_GCP = Path(__file__).parent / "data" / "skypilot-catalog" / "gcp.csv"
TYPES = export_checks.inventory()


def _csv_rows() -> list[dict]:
    with export_checks.INVENTORY_CSV.open(newline="") as f:
        return [
            {**r, "gpu_count": int(r["gpu_count"] or 0), "gpu_fraction": float(r["gpu_fraction"] or 1)}
            for r in csv.DictReader(f)
            if r["accelerator"] == "gpu"
        ]


def test_the_shapes_agree_with_skypilots_own_catalogue():
    catalogue: dict[str, set[int]] = defaultdict(set)
    with SKYPILOT_GCP.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["AcceleratorName"] and not row["AcceleratorName"].startswith("tpu"):
                catalogue[row["AcceleratorName"]].add(int(float(row["AcceleratorCount"])))
    shapes = export_checks.skypilot_shapes(TYPES)
    ours: dict[str, set[int]] = defaultdict(set)
    for name, count in shapes["gcp"]:
        ours[name].add(count)
    both = set(catalogue) & set(ours)
    assert both >= {"A100", "T4", "V100", "P100", "P4"}
    assert {n: ours[n] for n in both} == {n: catalogue[n] for n in both}
    # the export derives the same shapes from the inventory rows as the checks do from the CSV
    inv = export_inventory.Inventory.from_rows(_csv_rows())
    for provider in ("aws", "gcp"):
        assert {(n, c) for n, counts in inv.skypilot_shapes(provider).items() for c in counts} == shapes[provider]
    # SkyPilot's AWS names (its fetch_aws.py): A10G comes as 1, 4 or 8 (g5), never 2; p4de is A100-80GB, g5g T4g
    aws = shapes["aws"]
    assert {c for n, c in aws if n == "A10G"} == {1, 4, 8}
    assert {("A100-80GB", 8), ("A100", 8), ("T4g", 2), ("V100-32GB", 8)} <= aws
    assert {("H100-MEGA", 8), ("H100", 2)} <= shapes["gcp"]


@pytest.fixture
def exported(feed_warehouse):
    with db.reader(feed_warehouse) as con:
        onprem, per_node = export_checks.onprem_facts(con)
        cloud = export_checks.cloud_capacity(con, json.loads(export(feed_warehouse, "json")), [])
    kueue, karpenter = docs_of(export(feed_warehouse, "kueue")), docs_of(export(feed_warehouse, "karpenter"))
    sky = docs_of(export(feed_warehouse, "skypilot"))
    return {
        "kueue": kueue,
        "karpenter": karpenter,
        "skypilot": sky,
        "capacity": {**cloud, **onprem},
        "per_node": per_node,
    }


def _kueue(exported, docs=None) -> list[str]:
    docs = exported["kueue"] if docs is None else docs
    return export_checks.check_kueue(
        docs, exported["capacity"], export_checks.nodepool_limits(exported["karpenter"]), {"vision": {"vision"}}
    )


def _one(docs: list[dict], kind: str, name: str | None = None, cluster: str | None = None) -> dict:
    return next(
        d
        for d in docs
        if d["kind"] == kind
        and (name is None or d["metadata"]["name"] == name)
        and (cluster is None or d["metadata"]["annotations"]["gpufinops.io/cluster-name"] == cluster)
    )


def test_the_valid_exports_pass(exported):
    assert _kueue(exported) == []
    assert export_checks.check_nodepools(exported["karpenter"], TYPES) == []
    assert export_checks.check_skypilot(exported["skypilot"], TYPES, exported["per_node"]) == []
    assert export_checks.check_names(exported["kueue"] + exported["karpenter"]) == []


def test_a_nodepool_its_instance_types_cannot_fill_fails(exported):
    pools = copy.deepcopy(exported["karpenter"])
    pool = _one(pools, "NodePool", "gpufinops-nlp-a10g-on-demand")
    req = next(
        r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
    )
    req["values"] = ["g5.48xlarge"]
    pool["spec"]["limits"]["nvidia.com/gpu"] = 2  # the NodePool: 2 GPUs, only an 8-GPU type
    [problem] = export_checks.check_nodepools(pools, TYPES)
    assert "limit 2 GPUs is not a sum of whole nodes" in problem
    pool["spec"]["limits"]["nvidia.com/gpu"] = 12  # 8 + 8 overshoots, 8 alone falls short
    assert export_checks.check_nodepools(pools, TYPES) != []
    req["values"] = ["g5.12xlarge", "g5.48xlarge"]  # 4 + 8 fills it exactly
    assert export_checks.check_nodepools(pools, TYPES) == []
    req["values"] = ["g9.99xlarge", "p4d.24xlarge"]
    problems = export_checks.check_nodepools(pools, TYPES)
    assert any("g9.99xlarge has no whole NVIDIA GPU" in p for p in problems)
    assert any("p4d.24xlarge carries A100-40GB" in p for p in problems)
    pool["metadata"]["labels"]["gpufinops.io/provider"] = "gcp"
    assert any("in a gcp cluster" in p for p in export_checks.check_nodepools(pools, TYPES))


def test_kueue_across_clusters_or_beyond_capacity_fails(exported):
    docs = copy.deepcopy(exported["kueue"])
    vision = _one(docs, "ClusterQueue", "gpufinops-vision", AWS_EAST)
    gke_flavor = _one(docs, "ResourceFlavor", cluster=GCP_CENTRAL)["metadata"]["name"]
    # the ClusterQueue mixing AWS, GKE and on-prem flavors
    vision["spec"]["resourceGroups"][0]["flavors"].append(
        {"name": gke_flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}
    )
    assert any(f"flavor {gke_flavor} is not one of that cluster's ResourceFlavors" in p for p in _kueue(exported, docs))

    docs = copy.deepcopy(exported["kueue"])
    flavor = _one(docs, "ResourceFlavor", "aws-l4-spot", AWS_EAST)
    flavor["spec"]["nodeLabels"]["cloud.google.com/gke-spot"] = "true"
    assert any("node labels of ['aws', 'gcp'] in a aws cluster" in p for p in _kueue(exported, docs))
    flavor["spec"]["nodeLabels"] = {"kubernetes.azure.com/scalesetpriority": "spot", "nvidia.com/gpu.product": "L4"}
    assert any("node labels of ['azure'] in a aws cluster" in p for p in _kueue(exported, docs))
    flavor["spec"]["nodeLabels"] = {"nvidia.com/gpu.product": "NVIDIA-L4"}  # GFD's label: AKS and on-prem only
    assert any("node labels of [] in a aws cluster" in p for p in _kueue(exported, docs))

    docs = copy.deepcopy(exported["kueue"])
    search = _one(docs, "ClusterQueue", "gpufinops-search", "dc1")
    search["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 34  # 34 on a 16-GPU cluster
    assert any(p.startswith("dc1: ") and "the cluster has 16" in p for p in _kueue(exported, docs))

    docs = copy.deepcopy(exported["kueue"])
    _one(docs, "ClusterQueue", "gpufinops-vision", GCP_CENTRAL)["spec"]["cohortName"] = _one(
        docs, "ClusterQueue", "gpufinops-vision", AWS_EAST
    )["spec"]["cohortName"]
    assert any("spans clusters" in p for p in _kueue(exported, docs))

    docs = copy.deepcopy(exported["kueue"])
    spot = _one(docs, "ClusterQueue", "gpufinops-vision", AWS_EAST)["spec"]["resourceGroups"][0]["flavors"][0]
    spot["resources"][0]["nominalQuota"] += 8  # more spot A100s than its NodePools can launch
    assert any("its NodePools launch at most" in p for p in _kueue(exported, docs))


def test_a_localqueue_in_an_invented_namespace_fails(exported):
    docs = copy.deepcopy(exported["kueue"])
    queue = _one(docs, "ClusterQueue", "gpufinops-vision", AWS_EAST)
    labels = queue["metadata"]["labels"]
    local = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {
            "name": "gpu",
            "namespace": "unattributed",
            "labels": dict(labels),
            "annotations": dict(queue["metadata"]["annotations"]),
        },
        "spec": {"clusterQueue": "gpufinops-vision"},
    }
    problems = _kueue(exported, docs + [local])
    assert any("does not admit namespace unattributed" in p for p in problems)
    assert any("no data or config names it for team vision" in p for p in problems)
    queue["spec"]["namespaceSelector"] = {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision"]}]
    }
    local["metadata"]["namespace"] = "vision"
    assert _kueue(exported, docs + [local]) == []
    assert any("appears 2 times" in p for p in export_checks.check_names(docs + [local, copy.deepcopy(local)]))


def test_skypilot_shapes_no_cloud_offers_fail(exported):
    tasks = copy.deepcopy(exported["skypilot"])
    by_name = {t["name"]: t for t in tasks}
    by_name["nlp-finetune"]["resources"].update(accelerators="A10G:2")  # the A10G:2 on AWS
    by_name["nlp-finetune"]["resources"].pop("instance_type")
    by_name["search-embed"]["resources"] = {
        "cloud": "kubernetes",
        "instance_type": "onprem-a100x8",
        "accelerators": "H100:8",
    }
    by_name["vision-serving"]["resources"]["instance_type"] = "a2-highgpu-1g"  # an A100 type, asked for L4:1
    tasks.append(copy.deepcopy(by_name["vision-train"]))  # two tasks with one name
    problems = export_checks.check_skypilot(tasks, TYPES, exported["per_node"])
    assert "task nlp-finetune: A10G:2 is not in aws's catalogue" in problems
    assert "task search-embed: cloud/region given instead of infra" in problems
    assert "task vision-serving: instance_type a2-highgpu-1g does not carry L4:1" in problems
    assert "task name 'vision-train' appears 2 times" in problems
    by_name["search-embed"]["resources"] = {"infra": "k8s", "accelerators": "H100:16"}
    assert any(
        "H100:16 does not fit on one on-prem node (at most 8)" in p
        for p in export_checks.check_skypilot(tasks, TYPES, exported["per_node"])
    )
