"""`gpufinops export` per target cluster: how resources map to clusters (the tags real EKS/GKE nodes carry,
else provider/region/account), where LocalQueues may go (namespaces the data or the config names,
never an invented one), and what is never carried out (alternatives, conditional savings, dismissed
findings). Cost lines, GPU metrics, attribution rules and reconciled plans are written into a real
warehouse, as the ingestors and `recommend` write them; every export passes tests/export_checks.py.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.jobs.config import ConfigError
from gpufinops.jobs.export import settings as export_settings
from gpufinops.models import plans
from gpufinops.models.recommendation import Recommendation
from gpufinops.models.registry import KINDS
from gpufinops.warehouse import db, recommendation_store
from tests import cli_process, export_checks, feed_fleet
from tests.feed_fleet import Subject
from tests.k8s_crds import crd_schemas, validate
from tests.test_export import docs_of

START = datetime(2026, 10, 1, tzinfo=UTC)
HOURS = 24
ACCOUNT, PROJECT = "111122223333", "ml-prod-4821"
# (resource, provider, region, account, team, instance type, GPU model, GPUs, pricing, tags)
CLOUD = [
    (
        "i-eks-east",
        "AWS",
        "us-east-1",
        ACCOUNT,
        "vision",
        "g5.48xlarge",
        "A10G",
        8,
        "Standard",
        {"eks:cluster-name": "prod-eks", "user_team": "vision"},
    ),
    (
        "i-eks-east-l4",
        "AWS",
        "us-east-1",
        ACCOUNT,
        "vision",
        "g6.xlarge",
        "L4",
        1,
        "Standard",
        {"aws:eks:cluster-name": "prod-eks"},
    ),
    (
        "i-eks-west",
        "AWS",
        "us-west-2",
        ACCOUNT,
        "nlp",
        "p4d.24xlarge",
        "A100-40GB",
        8,
        "Standard",
        {"eks:cluster-name": "prod-eks"},
    ),
    ("i-plain", "AWS", "us-east-1", ACCOUNT, "nlp", "g6.xlarge", "L4", 1, "Standard", {}),
    (
        "//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-a/instances/gke-node-1",
        "Google Cloud",
        "us-central1",
        PROJECT,
        "vision",
        "a2-highgpu-1g",
        "A100-40GB",
        1,
        "Standard",
        {"goog-k8s-cluster-name": "ml-gke", "team": "vision"},
    ),
    (
        "//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-b/instances/untagged",
        "Google Cloud",
        "us-central1",
        PROJECT,
        None,
        "g2-standard-4",
        "L4",
        1,
        "Standard",
        {},
    ),
]
EAST, WEST = f"prod-eks (aws/us-east-1/{ACCOUNT})", f"prod-eks (aws/us-west-2/{ACCOUNT})"
PLAIN, GKE, GCP_DEFAULT = f"aws/us-east-1/{ACCOUNT}", "ml-gke", f"gcp/us-central1/{PROJECT}"
# dc1: one node group of 2 nodes x 8 A100-80GB; research uses node 1, node 2's GPUs are billed to no team
DC1 = [("a100-node-1", "research"), ("a100-node-2", None)]


def _lines(con) -> None:
    for rid, provider, region, account, team, itype, model, gpus, pricing, tags in CLOUD:
        con.execute(
            """INSERT INTO cost_line_items ("ProviderName", "RegionId", "SubAccountId", "ResourceId",
            "x_InstanceType", "x_GpuModel", "x_GpuCount", "PricingCategory", "ChargeCategory", "ChargePeriodStart",
            "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "x_Team", "Tags")
            SELECT ?, ?, ?, ?, ?, ?, ?, ?, 'Usage', h, h + INTERVAL 1 HOUR, 5, 5, 5, 'USD', ?, ?
            FROM (SELECT unnest(range(?::TIMESTAMPTZ, ?::TIMESTAMPTZ, INTERVAL 1 HOUR)) AS h)""",
            [
                provider,
                region,
                account,
                rid,
                itype,
                model,
                gpus,
                pricing,
                team,
                json.dumps(tags),
                START,
                START + timedelta(hours=HOURS),
            ],
        )
    tags = {"Tags": '{"cluster": "dc1"}'}
    group = feed_fleet.NodeGroup("onprem-a100x8", "A100-80GB", 8)
    feed_fleet.insert_onprem_slot_lines(con, DC1, group, Decimal(1), tags, START, HOURS)
    # vision's training pods run in namespace vision-train on the EKS node: the metrics source says so
    con.execute("INSERT INTO attribution_rules VALUES ('gpu_metrics', 'namespace_teams', 'vision-train', 'vision')")
    con.execute(
        """INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, team, util_mean,
        util_p95, util_max, samples, source, namespace)
        SELECT ?::TIMESTAMPTZ + to_hours(h), 'GPU-' || g, 'A10G', 'ip-10-0-1-1', 'i-eks-east', 'vision', 30, 40, 50,
               60, 'gpu_metrics', 'vision-train' FROM range(?) t(h), range(2) s(g)""",
        [START, HOURS],
    )


def _rec(
    kind: str, subject: Subject, current: dict, proposed: dict, savings: str, evidence: dict | None = None
) -> Recommendation:
    """A finding told from the others on its subject by what it proposes, made when the fleet's window ends."""
    id_parts = (json.dumps(proposed, sort_keys=True),)
    found = feed_fleet._rec(kind, subject, current, proposed, savings, evidence or {}, id_parts=id_parts)
    return dataclasses.replace(found, created_at=START + timedelta(hours=HOURS))


def _all_to_spot(subject: Subject, current: dict, monthly_cost_usd: float, savings: str) -> Recommendation:
    """A spot_mix finding that moves the whole of ``current`` to spot, costing ``monthly_cost_usd`` there."""
    spot = {**current, "pricing": "spot", "spot_share": 1.0, "monthly_cost_usd": monthly_cost_usd}
    return _rec("spot_mix", subject, current, spot, savings)


def recommendations() -> list[Recommendation]:
    g5 = {
        "instance_type": "g5.48xlarge",
        "gpu_model": "A10G",
        "gpu_count": 8,
        "pricing": "on_demand",
        "monthly_cost_usd": 11890.24,
    }
    p4d, l4 = feed_fleet.P4D, feed_fleet.L4
    return [
        # an old-style finding: 2 of the g5.48xlarge's 8 GPUs, on the same type (no 2-GPU A10G type exists)
        _rec("gpu_count", Subject("vision", "aws", "i-eks-east", "training"), g5, {**g5, "gpu_count": 2}, "5000.00"),
        _rec(
            "onprem_vs_cloud",
            Subject("nlp", "aws", "i-eks-west", "training"),
            p4d,
            {
                **p4d,
                "provider": "onprem",
                "cluster": "dc1",
                "instance_type": "onprem-a100x8",
                "gpu_model": "A100-80GB",
                "pricing": "owned",
                "monthly_cost_usd": 6000.0,
            },
            "10030.80",
            {"pattern": "repatriate"},
        ),
        # exclusive with the repatriation: an alternative, never carried out
        _all_to_spot(Subject("nlp", "aws", "i-eks-west", "training"), p4d, 7000.0, "9030.80"),
        # a saving only if other work is packed onto spare GPUs: conditional, never carried out
        _rec(
            "gpu_count",
            Subject("nlp", "aws", "i-plain", None),
            l4,
            {**l4, "action": "pack"},
            "300.00",
            {"conditional": True},
        ),
        _all_to_spot(Subject("vision", "aws", "i-eks-east-l4", "serving"), l4, 250.0, "337.50"),
        # a finding on a resource whose bills are not in the window (terminated, or not delivered yet)
        _rec(
            "idle_gpu",
            Subject("nlp", "aws", "i-gone", None),
            l4,
            {**l4, "gpu_count": 0, "state": "released"},
            "587.50",
            {"pattern": "always_idle"},
        ),
    ]


@pytest.fixture
def fleet(warehouse: Path) -> Path:
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    with db.writer(warehouse) as con:
        _lines(con)
        recommendation_store.store_recommendations(con, plans.reconcile(recommendations()), KINDS)
    return warehouse


def render(path: Path, fmt: str, table: dict | None = None, **kw) -> str:
    import gpufinops.jobs.export as export

    with db.reader(path) as con:
        return export.render(con, fmt, settings=export_settings.parse(table), **kw)


def clusters_of(docs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for doc in docs:
        out.setdefault(doc["metadata"]["annotations"]["gpufinops.io/cluster-name"], []).append(doc)
    return out


def all_checks(path: Path, table: dict | None = None) -> list[str]:
    settings = export_settings.parse(table)
    with db.reader(path) as con:
        onprem, per_node = export_checks.onprem_facts(con)
        cloud = export_checks.cloud_capacity(con, json.loads(render(path, "json")), list(settings.cluster_tag_keys))
        allowed = export_checks.allowed_namespaces(con, (table or {}).get("namespaces"))
    kueue, karpenter = docs_of(render(path, "kueue", table)), docs_of(render(path, "karpenter", table))
    sky = docs_of(render(path, "skypilot", table))
    schemas = crd_schemas()
    for doc in kueue + karpenter:
        validate(doc, schemas)
    return (
        export_checks.check_names(kueue)
        + export_checks.check_names(karpenter)
        + export_checks.check_kueue(kueue, {**cloud, **onprem}, export_checks.nodepool_limits(karpenter), allowed)
        + export_checks.check_nodepools(karpenter, export_checks.inventory())
        + export_checks.check_skypilot(sky, export_checks.inventory(), per_node)
    )


def test_clusters_come_from_the_nodes_tags_else_provider_region_and_account(fleet):
    config = {"namespaces": {"vision": "vision"}}
    text = render(fleet, "kueue", config)
    clusters = clusters_of(docs_of(text))
    # the EKS name in two regions is two clusters; untagged AWS / GCP resources: provider/region/account;
    # the GKE node's label names its cluster; dc1 from the onprem source. West's GPUs all move to dc1 and
    # the default GCP cluster's only GPU has no team: their sections say so and hold no object
    assert set(clusters) == {EAST, PLAIN, GKE, "dc1"}
    assert f"# cluster {WEST} (EKS): $10,030.80/month of it" in text
    assert "plan total: $15,955.80/month" in text  # 5,000 + 10,030.80 + 337.50 + 587.50 (the i-gone release)
    assert (
        f"# ==== cluster: {GCP_DEFAULT} (GKE; label gpufinops.io/cluster=gcp-us-central1-ml-prod-4821)\n"
        f"# capacity: what the plan provisions (GKE, cluster named by default)\n"
        f"# no team, in no ClusterQueue: 1 GPU L4 (resources without a team)\n" in text
    )
    for name, docs in clusters.items():
        labels = {d["metadata"]["labels"]["gpufinops.io/cluster"] for d in docs}
        assert len(labels) == 1 and f"# ==== cluster: {name} (" in text
    east = {d["metadata"]["name"]: d for d in clusters[EAST]}
    assert set(east) == {"aws-a10g-on-demand", "aws-l4-spot", "gpufinops-vision", "gpu"}
    assert east["gpu"]["metadata"]["namespace"] == "vision-train"  # the metrics' namespace wins on that cluster
    assert all(
        k.startswith("cloud.google.com/")
        for d in clusters[GKE]
        if d["kind"] == "ResourceFlavor"
        for k in d["spec"]["nodeLabels"]
    )
    [gke_local] = [d for d in clusters[GKE] if d["kind"] == "LocalQueue"]
    assert gke_local["metadata"]["namespace"] == "vision"  # no metrics namespace there: [export] namespaces
    # dc1: research keeps its node (8), nlp's repatriated p4d work takes the other 8: within the 16 GPUs
    dc1 = {d["metadata"]["name"]: d for d in clusters["dc1"] if d["kind"] == "ClusterQueue"}
    assert {
        n: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] for n, q in dc1.items()
    } == {"gpufinops-research": 8, "gpufinops-nlp": 8}
    assert "capacity: onprem-a100x8 2×8 A100-80GB = 16" in text
    # no namespace for nlp or research anywhere, none for the team-less GCP VM: skipped, saying what is missing
    assert "the data names no namespace for team research" in text and "[export] namespaces.nlp" in text
    assert "unattributed" not in text
    assert all_checks(fleet, config) == []


def test_only_the_plan_is_carried_out(fleet):
    text = render(fleet, "kueue")
    carried = [r for r in plans.reconcile(recommendations()) if plans.counted(r) and not r.evidence.get("conditional")]
    assert f"# plan total: ${float(plans.total(carried)):,.2f}/month" in text
    assert "2 alternative(s), never added" in text  # the spot option on the repatriated node, the packing
    # counted in the total, but placed on no cluster: said, never guessed
    assert "# not placed: idle_gpu-" in text and "resource i-gone has no GPU cost lines in the window" in text
    sky = {d["name"]: d for d in docs_of(render(fleet, "skypilot"))}
    assert not any(
        d["resources"].get("use_spot") and "a100" in d["resources"]["accelerators"].lower() for d in sky.values()
    )  # the spot alternative on the p4d is not a task change
    [plain_pool] = clusters_of(docs_of(render(fleet, "karpenter")))[PLAIN]
    assert plain_pool["spec"]["limits"]["nvidia.com/gpu"] == 1  # its GPU stays: packing is no plan
    plain = clusters_of(docs_of(text))[PLAIN]
    [queue] = [d for d in plain if d["kind"] == "ClusterQueue"]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 1  # not packed


def test_limits_and_shapes_are_launchable_even_for_an_unlaunchable_finding(fleet):
    # the finding asks 2 of a g5.48xlarge's 8 A10Gs: Kueue keeps 2 GPUs of quota, the NodePool's limit is the
    # one node Karpenter can launch, SkyPilot asks for the smallest AWS A10G shape holding 2
    kueue = clusters_of(docs_of(render(fleet, "kueue")))
    [queue] = [d for d in kueue[EAST] if d["kind"] == "ClusterQueue"]
    flavors = {f["name"]: f["resources"][0]["nominalQuota"] for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    assert flavors == {"aws-l4-spot": 1, "aws-a10g-on-demand": 2}
    karpenter_text = render(fleet, "karpenter")
    pools = {d["metadata"]["name"]: d["spec"] for d in clusters_of(docs_of(karpenter_text))[EAST]}
    a10g = pools["gpufinops-vision-a10g-on-demand"]
    assert a10g["limits"]["nvidia.com/gpu"] == 8
    assert [
        r["values"] for r in a10g["template"]["spec"]["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
    ] == [["g5.48xlarge"]]
    assert "limit 8: 2 rounded up to whole g5.48xlarge nodes (8 GPUs each)" in karpenter_text
    assert set(clusters_of(docs_of(karpenter_text))) == {EAST, PLAIN}  # GKE and dc1: no NodePools
    sky_text = render(fleet, "skypilot")
    sky = {d["name"]: d["resources"] for d in docs_of(sky_text)}
    # two teams' workloads are both called "training": unique task names
    assert sky["vision-training"] == {"infra": "aws/us-east-1", "accelerators": "A10G:4", "use_spot": False}
    assert "A10G:2 is no AWS shape: asking for A10G:4" in sky_text
    assert sky["nlp-training"] == {"infra": "k8s", "accelerators": "A100-80GB:8"}
    assert sky["serving"] == {
        "infra": "aws/us-east-1",
        "accelerators": "L4:1",
        "instance_type": "g6.xlarge",
        "use_spot": True,
    }


def test_cluster_tag_keys_and_namespaces_come_from_the_config(fleet, tmp_path):
    names = set(clusters_of(docs_of(render(fleet, "kueue", {"cluster_tag_keys": []}))))
    assert names == {PLAIN, GCP_DEFAULT, "dc1"}  # no tag read: one cluster per provider, region and account
    with pytest.raises(ConfigError, match="export.namespaces.vision: 'Vision_NS'"):
        export_settings.parse({"namespaces": {"vision": "Vision_NS"}})
    with pytest.raises(ConfigError, match="export.clusters: unknown key"):
        export_settings.parse({"clusters": {}})
    with pytest.raises(ConfigError, match="export.node_class"):
        export_settings.parse({"node_class": "Not A Name"})
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{fleet}"\n[export]\nnamespaces = {{nlp = ["nlp-a", "nlp-b"]}}\nnode_class = "gpu"\n'
    )
    run = cli_process.run("--config", str(config), "export", "kueue", "--cluster", "dc1")
    assert run.returncode == 0, run.stderr
    local = [d for d in docs_of(run.stdout) if d["kind"] == "LocalQueue"]
    assert {(d["metadata"]["namespace"], d["spec"]["clusterQueue"]) for d in local} == {
        ("nlp-a", "gpufinops-nlp"),
        ("nlp-b", "gpufinops-nlp"),
    }
    karpenter = cli_process.run("--config", str(config), "export", "karpenter")
    assert {d["spec"]["template"]["spec"]["nodeClassRef"]["name"] for d in docs_of(karpenter.stdout)} == {"gpu"}
    config.write_text(f'[warehouse]\npath = "{fleet}"\n[export]\nnamespaces = {{nlp = 3}}\n')
    bad = cli_process.run("--config", str(config), "export", "kueue")
    assert bad.returncode == 2 and "export.namespaces.nlp" in bad.stderr
