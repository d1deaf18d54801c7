"""The exports of whole built fleets pass every semantic check (tests/export_checks.py): the demo
(`gpufinops demo`, 14 days) and a bigger fleet (the demo generator at twice the size, another seed, with
`[export] namespaces` configured), each generated, ingested and planned as a real run is. The header's
total is the demo summary's, and on-prem quotas stay within dc1's node groups."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufinops.jobs import demo
from gpufinops.models import plans
from gpufinops.warehouse import db, recommendation_read
from tests.demo_cache import demo_copy
from tests.export_checks import check_warehouse, documents

SHARED_CLUSTER = "aws-us-east-1-004455667788"  # the cluster of the demo's shared node (simulator/demo_shared.py)
BIG_NAMESPACES = {"vision": "vision", "nlp": ["nlp-train", "nlp-serve"], "research": "research"}


def render(db_path: Path, fmt: str, **kw) -> str:
    import gpufinops.jobs.export as export
    from gpufinops.jobs.export.settings import parse

    table = kw.pop("table", None)
    with db.reader(db_path) as con:
        return export.render(con, fmt, settings=parse(table), **kw)


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("demo-export")
    return home, demo_copy(tmp_path_factory, home, days=14, seed=7)


@pytest.fixture(scope="module")
def big_home(tmp_path_factory) -> Path:
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs.ingest_run import run_configured
    from gpufinops.models.run import run_models
    from gpufinops.simulator import demo_fleet
    from gpufinops.simulator.dcgm_export import write_dcgm_exports

    home = tmp_path_factory.mktemp("big-export")
    fleet = demo_fleet.generate(home, days=10, seed=11, scale=2)
    write_dcgm_exports(fleet.metrics_dir, home / "metrics" / "dcgm")
    config = demo.write_config(home, fleet.resource_map)
    nss = ", ".join(f"{t} = {ns!r}".replace("'", '"') for t, ns in BIG_NAMESPACES.items())
    config.write_text(config.read_text() + f"\n[export]\nnamespaces = {{{nss}}}\n")
    cfg = config_mod.load(config)
    assert all(r.ok for r in run_configured(cfg))
    with db.writer(cfg.warehouse_path) as con:
        run_models(con)
    return home


def test_the_demo_exports_pass_every_check(demo_home):
    home, summary = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    assert check_warehouse(db_path, home / "gpufinops.toml") == {"kueue": [], "karpenter": [], "skypilot": []}
    kueue, karpenter, sky = (render(db_path, f) for f in ("kueue", "karpenter", "skypilot"))
    # one number: the header's plan total is the demo summary's and models.plans.total over the objects
    [printed] = re.findall(r"Savings: (\$[\d,.]+)/month", summary)
    with db.reader(db_path) as con:
        total = plans.total(recommendation_read.load(con))
    for text in (kueue, karpenter, sky):
        assert f"# plan total: {printed}/month" in text and printed == f"${float(total):,.2f}"
    docs = documents(kueue)
    clusters = {d["metadata"]["annotations"]["gpufinops.io/cluster-name"] for d in docs}
    assert (
        "dc1" in clusters
        and any(c.startswith("aws/") for c in clusters)
        and any(c.startswith("gcp/") for c in clusters)
    )
    dc1 = [d for d in docs if d["metadata"]["labels"]["gpufinops.io/cluster"] == "dc1" and d["kind"] == "ClusterQueue"]
    a100 = sum(
        f["resources"][0]["nominalQuota"]
        for q in dc1
        for f in q["spec"]["resourceGroups"][0]["flavors"]
        if f["name"] == "onprem-a100-80gb"
    )
    assert 0 < a100 <= 16  # dc1's A100 group: 2 nodes x 8 GPUs
    assert "unattributed" not in kueue
    # LocalQueues only where the data names a team's namespace: the shared node's pods (namespace_teams of the
    # metrics, simulator/demo_shared.py) on its cluster, for the teams with a ClusterQueue there
    local = {
        (d["metadata"]["labels"]["gpufinops.io/cluster"], d["metadata"]["namespace"], d["spec"]["clusterQueue"])
        for d in docs
        if d["kind"] == "LocalQueue"
    }
    assert local == {(SHARED_CLUSTER, "nlp", "gpufinops-nlp"), (SHARED_CLUSTER, "speech", "gpufinops-speech")}
    # the g5.48xlarge that only needs 4 GPUs: a g5.12xlarge NodePool limited to its 4 GPUs
    pools = {d["metadata"]["name"]: d["spec"] for d in documents(karpenter)}
    speech = pools["gpufinops-speech-a10g-on-demand"]
    assert speech["limits"]["nvidia.com/gpu"] == 4
    assert {d["metadata"]["labels"]["gpufinops.io/provider"] for d in documents(karpenter)} == {
        "aws",
        "azure",
    }  # EKS and AKS: the providers with Karpenter, never GCP or on-prem
    tasks = documents(sky)
    assert {t["name"] for t in tasks} >= {"speech-training", "nlp-training"}
    assert all("cloud" not in t["resources"] for t in tasks)


def test_a_bigger_fleet_with_configured_namespaces_passes_every_check(big_home):
    db_path = big_home / "data" / "gpufinops.duckdb"
    assert check_warehouse(db_path, big_home / "gpufinops.toml") == {"kueue": [], "karpenter": [], "skypilot": []}
    table = {"namespaces": BIG_NAMESPACES}
    docs = documents(render(db_path, "kueue", table=table))
    local = {
        (d["metadata"]["labels"]["gpufinops.io/cluster"], d["metadata"]["namespace"])
        for d in docs
        if d["kind"] == "LocalQueue"
    }
    assert ("dc1", "nlp-train") in local and ("dc1", "nlp-serve") in local and ("dc1", "research") in local
    configured = {"vision", "nlp-train", "nlp-serve", "research"}
    assert {ns for cluster, ns in local if cluster != SHARED_CLUSTER} <= configured
    # on the shared node's cluster the data names nlp's and speech's namespaces, and the data wins over the config
    assert {ns for cluster, ns in local if cluster == SHARED_CLUSTER} == {"nlp", "speech", "vision"}
    teams_without = {d["metadata"]["labels"]["gpufinops.io/team"] for d in docs if d["kind"] == "ClusterQueue"} - set(
        BIG_NAMESPACES
    )
    assert teams_without and all(
        f"[export] namespaces.{t})" in render(db_path, "kueue", table=table) for t in teams_without
    )
    # each cluster on its own: --cluster gives the same objects as that cluster's part of the whole file
    for label in sorted({d["metadata"]["labels"]["gpufinops.io/cluster"] for d in docs}):
        alone = documents(render(db_path, "kueue", table=table, cluster=label))
        assert alone == [d for d in docs if d["metadata"]["labels"]["gpufinops.io/cluster"] == label]
