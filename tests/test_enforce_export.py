"""`gpufinops export budgets`: an enforced budget's quotas as Kueue, Karpenter, ResourceQuota and SkyPilot
objects read from a warehouse of real cost lines (tests/feed_fleet.py), each validated against the real CRDs
(tests/data/k8s-crds), spending no more than the money left."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import yaml

from gpufinops.derived import rollups
from gpufinops.jobs.enforce import build
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.models.budgets import Budget, BudgetScope
from gpufinops.warehouse import db
from tests import export_checks
from tests.k8s_crds import crd_schemas, validate


def _budget(amount: str, enforce: str) -> Budget:
    return Budget("vision-gpu", Decimal(amount), scope=BudgetScope(teams=("vision",)), enforce=enforce)


def _rolled(warehouse: Path) -> Path:
    """The fixture's lines rolled up (the spend a budget reads is the cost_daily rollup, as an ingest leaves it)."""
    with db.writer(warehouse) as con:
        rollups.refresh_cost_daily(con)
    return warehouse


def _render(warehouse: Path, fmt: str, budget: Budget) -> list[dict]:
    settings = ExportSettings(namespaces={"vision": ("vision-train",)})
    with db.reader(warehouse) as con:
        text = build.render(con, fmt, (budget,), settings)
    return [d for d in yaml.safe_load_all(text) if d is not None]


def test_kueue_and_karpenter_objects_validate_and_hold_to_the_money(feed_warehouse):
    schemas = crd_schemas()
    with db.reader(feed_warehouse) as con:
        enforced, _fleet = build.quotas(con, (_budget("10000000", "hold"),), ExportSettings())
    (team,) = enforced
    remaining = team.quota.remaining_usd
    hours = team.quota.inputs.hours_left
    assert remaining > 0 and hours > 0
    bought = sum(
        fq.money_gpus * fq.flavor.rate_usd * hours
        for c in team.quota.clusters
        for fq in c.flavors
        if fq.flavor.rate_usd
    )
    assert 0 < bought <= remaining
    docs = _render(feed_warehouse, "kueue", _budget("10000000", "hold"))
    queues = [d for d in docs if d["kind"] == "ClusterQueue"]
    assert queues and all("stopPolicy" not in q["spec"] for q in queues)  # money left: no Hold
    pools = _render(feed_warehouse, "karpenter", _budget("10000000", "cap"))
    assert pools and export_checks.check_nodepools(pools, export_checks.inventory()) == []  # whole nodes
    for doc in docs + pools:
        validate(doc, schemas)
        if doc["kind"] in ("ClusterQueue", "NodePool"):
            assert "budget vision-gpu" in doc["metadata"]["annotations"]["gpufinops.io/budget-reason"]


def test_hold_appears_once_the_money_is_gone_and_cap_never_goes_below_running_work(feed_warehouse):
    schemas = crd_schemas()
    _rolled(feed_warehouse)
    held = _render(feed_warehouse, "kueue", _budget("1", "hold"))
    drained = _render(feed_warehouse, "kueue", _budget("1", "drain"))
    capped = _render(feed_warehouse, "kueue", _budget("1", "cap"))
    for docs, policy in ((held, "Hold"), (drained, "HoldAndDrain"), (capped, None)):
        queues = [d for d in docs if d["kind"] == "ClusterQueue"]
        assert queues and all(q["spec"].get("stopPolicy") == policy for q in queues)
        for doc in docs:
            validate(doc, schemas)
    quota = [
        f["resources"][0]["nominalQuota"]
        for q in capped
        if q["kind"] == "ClusterQueue"
        for f in q["spec"]["resourceGroups"][0]["flavors"]
    ]
    drain = [
        f["resources"][0]["nominalQuota"]
        for q in drained
        if q["kind"] == "ClusterQueue"
        for f in q["spec"]["resourceGroups"][0]["flavors"]
    ]
    assert sum(quota) > 0 and sum(drain) == 0  # cap keeps what runs; drain takes it to zero


def test_resourcequota_and_skypilot(feed_warehouse):
    _rolled(feed_warehouse)
    quotas = _render(feed_warehouse, "resourcequota", _budget("1", "cap"))
    assert quotas and {q["metadata"]["namespace"] for q in quotas} == {"vision-train"}
    assert all(q["apiVersion"] == "v1" and int(q["spec"]["hard"]["requests.nvidia.com/gpu"]) >= 0 for q in quotas)
    (task,) = _render(feed_warehouse, "skypilot", _budget("1", "cap"))
    assert Decimal(task["envs"]["GPUFINOPS_MAX_HOURLY_COST"]) == 0
    assert task["resources"]["autostop"]["down"] is True


def test_the_api_serves_the_quotas_to_a_scheduler_token(feed_warehouse, tmp_path):
    import httpx

    from gpufinops.interfaces.api import create_app
    from gpufinops.jobs import config as config_mod
    from tests.test_api import API_TOML, TOKENS, Served

    _rolled(feed_warehouse)
    path = tmp_path / "api.toml"
    budget = '[[budgets]]\nname = "vision-gpu"\namount = 1\nscope = { teams = ["vision"] }\nenforce = "hold"\n'
    path.write_text(f'[warehouse]\npath = "{feed_warehouse}"\n{budget}{API_TOML}')
    with Served(create_app(config_mod.load(path, environ={}), environ=TOKENS)) as served:
        headers = {"Authorization": f"Bearer {TOKENS['GPUFINOPS_TOKEN_SCHEDULER']}"}
        found = httpx.get(f"{served.url}/v1/enforcement", headers=headers, timeout=30)
        assert found.status_code == 200
        (team,) = found.json()["budgets"]
        assert team["team"] == "vision" and team["policy"] == "hold"
        assert all(c["stop_policy"] == "Hold" for c in team["clusters"])
        kueue = httpx.get(f"{served.url}/v1/enforcement", params={"format": "kueue"}, headers=headers, timeout=30)
        assert kueue.headers["content-type"].startswith("application/yaml")
        schemas = crd_schemas()
        for doc in (d for d in yaml.safe_load_all(kueue.text) if d is not None):
            validate(doc, schemas)
        bad = httpx.get(f"{served.url}/v1/enforcement", params={"format": "toml"}, headers=headers, timeout=30)
        assert bad.status_code == 400 and "format" in bad.json()["detail"]
        assert httpx.get(f"{served.url}/v1/enforcement", timeout=30).status_code == 401


def test_the_command_writes_the_file_and_refuses_a_format_of_another_export(feed_warehouse, tmp_path, capsys):
    from gpufinops.interfaces.cli import main

    _rolled(feed_warehouse)
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{feed_warehouse}"\n'
        '[[budgets]]\nname = "vision-gpu"\namount = 1\nscope = { teams = ["vision"] }\nenforce = "cap"\n'
    )
    out = tmp_path / "quotas.yaml"
    assert main(["--config", str(config), "export", "budgets", "--format", "kueue", "--out", str(out)]) == 0
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d is not None]
    assert f"{len(docs)} kueue document(s)" in capsys.readouterr().out
    assert main(["--config", str(config), "export", "budgets", "--format", "parquet"]) == 2
    assert "not a budget format" in capsys.readouterr().err
    assert main(["--config", str(config), "export", "focus", "--format", "kueue", "--out", str(out)]) == 2
    assert main(["--config", str(config), "export", "budgets", "--cluster", "nowhere"]) == 2
    assert "no such cluster" in capsys.readouterr().err


def test_a_budget_of_two_teams_splits_its_money_and_writes_a_shared_flavor_once(feed_warehouse):
    _rolled(feed_warehouse)
    budget = Budget("shared", Decimal("50000"), scope=BudgetScope(teams=("search", "nlp")), enforce="cap")
    with db.reader(feed_warehouse) as con:
        enforced, _fleet = build.quotas(con, (budget,), ExportSettings())
    assert {e.quota.inputs.team for e in enforced} == {"search", "nlp"}
    remaining = sum((e.quota.remaining_usd for e in enforced), Decimal(0))
    spent = sum((e.quota.inputs.spent for e in enforced), Decimal(0))
    assert abs(remaining + spent - Decimal("50000")) < Decimal("0.01")  # the money is shared, never doubled
    docs = _render(feed_warehouse, "kueue", budget)
    flavors = [
        (d["metadata"]["labels"]["gpufinops.io/cluster"], d["metadata"]["name"])
        for d in docs
        if d["kind"] == "ResourceFlavor"
    ]
    assert len(flavors) == len(set(flavors))
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterQueue"} == {"gpufinops-search", "gpufinops-nlp"}
