"""`gpufinops enforce --diff / --apply` against a loopback Kubernetes API server (tests/k8s_loopback.py)
that records every request: list with the managed-by selector, get, server-side apply PATCHes with field
manager gpufinops; a conflict and a 403 are one sentence naming the object."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufinops.derived import rollups
from gpufinops.interfaces.cli import main
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.enforce import apply as apply_mod
from gpufinops.jobs.enforce.kube import object_path
from gpufinops.warehouse import db
from tests.feed_fleet import AWS_EAST
from tests.k8s_crds import crd_schemas, validate
from tests.k8s_loopback import K8sLoopback


@pytest.fixture
def setup(feed_warehouse, tmp_path):
    with db.writer(feed_warehouse) as con:
        rollups.refresh_cost_daily(con)
    with K8sLoopback() as server:
        config = tmp_path / "gpufinops.toml"
        config.write_text(
            f'[warehouse]\npath = "{feed_warehouse}"\n'
            '[[budgets]]\nname = "vision-gpu"\namount = 1\nscope = { teams = ["vision"] }\nenforce = "hold"\n'
            f'[enforce]\nkubeconfig = "{server.kubeconfig(tmp_path / "kubeconfig")}"\ncluster = "{AWS_EAST}"\n'
        )
        yield config_mod.load(config, environ={}), server, config


def test_apply_creates_flavors_then_queues_by_server_side_apply_and_is_idempotent(setup):
    cfg, server, _config = setup
    result = apply_mod.apply(cfg, fmt="kueue", cluster=AWS_EAST)
    assert (
        result.ok and result.applied[0].startswith("ResourceFlavor") and result.applied[-1].startswith("ClusterQueue")
    )
    patches = [r for r in server.state.requests if r.method == "PATCH"]
    assert len(patches) == len(result.applied)
    assert all(
        r.content_type == "application/apply-patch+yaml" and r.query == {"fieldManager": "gpufinops"} for r in patches
    )
    lists = [r for r in server.state.requests if r.method == "GET" and r.query.get("labelSelector")]
    assert {r.query["labelSelector"] for r in lists} == {"app.kubernetes.io/managed-by=gpufinops"}
    queue = server.state.objects["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gpufinops-vision"]
    assert queue["spec"]["stopPolicy"] == "Hold"  # $1 budget: the money is gone
    schemas = crd_schemas()
    for stored in server.state.objects.values():
        validate(stored, schemas)
    before = len(server.state.requests)
    again = apply_mod.apply(cfg, fmt="kueue", cluster=AWS_EAST)
    assert again.applied == [] and again.unchanged == len(result.applied)
    assert all(r.method == "GET" for r in server.state.requests[before:])  # nothing written twice


def test_diff_reads_the_cluster_and_names_each_changed_field(setup, capsys):
    cfg, server, config = setup
    docs = apply_mod.wanted(cfg, "kueue", AWS_EAST)
    queue = next(d for d in docs if d["kind"] == "ClusterQueue")
    seeded = {**queue, "spec": {**queue["spec"], "stopPolicy": "None"}}
    server.state.seed(object_path(queue), seeded, "gpufinops")
    assert main(["--config", str(config), "enforce", "--diff"]) == 0
    out = capsys.readouterr().out
    assert "~ ClusterQueue gpufinops-vision:" in out and "spec.stopPolicy: None → Hold" in out
    assert "+ ResourceFlavor" in out and "1 to change" in out
    assert not [r for r in server.state.requests if r.method == "PATCH"]  # a diff writes nothing


def test_a_conflict_and_a_403_are_one_sentence_naming_the_object(setup, capsys):
    cfg, server, config = setup
    docs = apply_mod.wanted(cfg, "kueue", AWS_EAST)
    queue = next(d for d in docs if d["kind"] == "ClusterQueue")
    flavors = queue["spec"]["resourceGroups"][0]["flavors"]
    changed = [{**f, "resources": [{**f["resources"][0], "nominalQuota": 999}]} for f in flavors]
    other = {
        **queue,
        "spec": {**queue["spec"], "resourceGroups": [{**queue["spec"]["resourceGroups"][0], "flavors": changed}]},
    }
    server.state.seed(object_path(queue), other, "kubectl-edit")
    server.state.forbidden.add("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/")
    assert main(["--config", str(config), "enforce", "--apply"]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("failed:")]
    conflict = [line for line in lines if "ClusterQueue gpufinops-vision" in line]
    forbidden = [line for line in lines if "ResourceFlavor" in line]
    assert len(conflict) == 1 and "conflict" in conflict[0] and "kubectl-edit" in conflict[0]
    assert forbidden and all("forbidden" in line for line in forbidden)
    assert all(line.count(". ") == 0 and "\n" not in line for line in lines)


def test_a_kubeconfig_without_the_context_or_with_an_exec_plugin_is_named(tmp_path):
    from gpufinops.jobs.enforce.kube import KubeError, load_target

    path = Path(tmp_path / "kc")
    path.write_text(
        "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://k.example:6443'}}]\n"
        "users: [{name: u, user: {exec: {command: aws}}}]\n"
    )
    with pytest.raises(KubeError, match="exec/auth-provider plugin"):
        load_target(str(path), None)
    with pytest.raises(KubeError, match="no context named 'b'"):
        load_target(str(path), "b")


def test_serve_applies_after_a_load_when_enforce_apply_is_on(setup, tmp_path):
    from gpufinops.jobs.serve import Daemon

    cfg, server, config = setup
    on = tmp_path / "on.toml"
    on.write_text(config.read_text().replace("[enforce]\n", "[enforce]\napply = true\n"))
    cfg = config_mod.load(on, environ={})
    Daemon(cfg, cfg.jobs).enforce(trigger="test")
    assert [r for r in server.state.requests if r.method == "PATCH"]
    with db.reader(cfg.warehouse_path) as con:
        assert con.execute("SELECT status FROM job_runs WHERE job = 'enforce'").fetchall() == [("succeeded",)]
    server.state.forbidden.add("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    Daemon(cfg, cfg.jobs).enforce(trigger="test")
    with db.reader(cfg.warehouse_path) as con:
        rows = con.execute("SELECT status, error FROM job_runs WHERE job = 'enforce' ORDER BY started_at").fetchall()
    assert rows[-1][0] == "failed" and "ClusterQueue gpufinops-vision" in rows[-1][1] and "forbidden" in rows[-1][1]


def test_a_stalling_server_and_a_cycling_continue_token_are_bounded(tmp_path):
    import time

    from gpufinops.jobs.enforce.kube import Client, KubeError, load_target

    with K8sLoopback() as server:
        target = load_target(server.kubeconfig(tmp_path / "kc"), None)
        server.state.seed("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a", {
            "kind": "ClusterQueue", "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "gpufinops"}},
        }, "gpufinops")  # fmt: skip
        client = Client(target, deadline_s=2)
        for junk, problem in ((b"<html>502</html>", "without a JSON object"), (b'{"items": [1]}', "not a list")):
            server.state.junk = junk
            with pytest.raises(KubeError, match=problem):
                client.list("ClusterQueue")
        server.state.junk = None
        server.state.cycle_continue = True
        with pytest.raises(KubeError, match="repeated a continue token"):
            client.list("ClusterQueue")
        server.state.stall = True
        started = time.monotonic()
        with pytest.raises(KubeError, match="took over 2 s"):
            client.list("ClusterQueue")
        assert time.monotonic() - started < 6
        client.close()
