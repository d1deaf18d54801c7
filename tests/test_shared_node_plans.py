"""Issue 48's shared node, through the real ingest path: one p4d.24xlarge (8 × A100-SXM4-40GB at
$21.957642 an hour) billed as a FOCUS 1.2 CSV of hourly EC2 usage lines (``focus_files``; the CSV is written by
tests/allocation_fleet.py with FOCUS's mandatory columns, ``PricingUnit = Hours``, ``x_GpuCount = 8``), and
its DCGM exporter exposition with one pod per GPU (``dcgm_exporter``): a research notebook holding 29 GB at
0 % for 20 of 24 hours on GPU 0, an nlp training job at 0 % for its last 14 hours on GPU 1, busy trainers on
GPUs 2-7. Both pods' findings are primary plans and the total is their sum; each team's scoped total (the
CLI's ``--team``) is its own finding. Nothing is mocked: the CLI runs as a subprocess over the warehouse.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from decimal import Decimal

from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.models import plans
from gpufinops.models import run as models_run
from gpufinops.models.allocated_idle import DAYS_PER_MONTH
from gpufinops.models.recommendation import money
from gpufinops.warehouse import db
from tests.allocation_fleet import START, Line, exposition, hourly_lines, write_focus_csv

NODE, INSTANCE = "ip-10-0-12-34.ec2.internal", "i-0d1a9e0c0ffee0e07"
P4D_HOURLY = Decimal("21.957642")
HOURS = 24
MIB = 1024
# GPU index: (namespace, pod, hours at 0 %, memory MiB held)
PODS = {
    0: ("research", "notebook-7f9c", set(range(4, 24)), 29 * MIB),
    1: ("nlp", "finetune-llama-0", set(range(10, 24)), 31000),
    **{i: ("vision", f"trainer-{i}", set(), 38000) for i in range(2, 8)},
}
TEAMS = {"research": "research", "nlp": "nlp", "vision": "vision"}


def uuid(i: int) -> str:
    return f"GPU-5c3f0a1e-0000-4000-8000-00000000000{i}"


def feed(tmp_path, warehouse) -> None:
    samples = []
    for hour in range(HOURS):
        for minute in range(0, 60, 5):
            ts = START + timedelta(hours=hour, minutes=minute)
            for gpu, (namespace, pod, idle, mem) in PODS.items():
                busy = hour not in idle
                samples.append(
                    {
                        "ts": ts,
                        "uuid": uuid(gpu),
                        "index": str(gpu),
                        "host": NODE,
                        "util": 87.0 if busy else 0.0,
                        "mem": mem,
                        "sm": 0.8 if busy else 0.0,
                        "namespace": namespace,
                        "pod": pod,
                        "container": "main",
                    }
                )
    (tmp_path / "dcgm.prom").write_text(exposition(samples))
    registry = Registry()
    for cls in (DcgmExporter, FocusFiles):
        registry.register(cls)
    result = run_source(
        registry,
        warehouse,
        "dcgm",
        "dcgm_exporter",
        {"targets": [str(tmp_path / "dcgm.prom")], "resource_map": {NODE: INSTANCE}, "namespace_teams": TEAMS},
    )
    assert result.status == "succeeded", result.error
    (tmp_path / "bills").mkdir()
    day = hourly_lines(P4D_HOURLY * HOURS, HOURS)
    write_focus_csv(
        tmp_path / "bills" / "focus.csv",
        [Line(INSTANCE, h, cost, team="ml-platform", gpu_count=8, gpu_model="A100-40GB") for h, cost in enumerate(day)],
    )
    result = run_source(
        registry, warehouse, "cur", "focus_files", {"path": str(tmp_path / "bills" / "*.csv")}, team_tag_keys=("team",)
    )
    assert result.status == "succeeded", result.error


def expected(idle_hours: int) -> Decimal:
    """What allocation charges one pod for its idle hours (one GPU of eight), scaled from one day to a month."""
    return money(P4D_HOURLY / 8 * idle_hours * DAYS_PER_MONTH)


def cli(warehouse, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--db", str(warehouse), "recommend", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_two_teams_idle_gpus_on_one_p4d_are_two_primary_plans_and_their_sum(tmp_path, warehouse):
    """Both pods are found (idle_gpu's allocated_idle pattern; the busy kinds' stalled_job finds the same GPU-hours
    at the same dollars on the same GPU, so each pod's plan holds both: one primary, the other its alternative).
    Either way: one plan per pod, each primary in its own team, the total their sum."""
    feed(tmp_path, warehouse)
    with db.writer(warehouse) as con:
        found = models_run.analyse(con)
    pods = {r.team: r for r in found.recommendations if r.evidence.get("pattern") == "allocated_idle"}
    assert set(pods) == {"research", "nlp"}, [r.evidence for r in found.recommendations]
    research, nlp = pods["research"], pods["nlp"]
    assert research.evidence["gpu_units"] == [uuid(0)] and nlp.evidence["gpu_units"] == [uuid(1)]
    assert research.monthly_savings_usd == expected(20) == Decimal("1670.84")
    assert nlp.monthly_savings_usd == expected(14) == Decimal("1169.59")
    assert research.plan_id != nlp.plan_id
    primaries = {r.team: r for r in found.recommendations if r.plan == "primary"}
    assert set(primaries) == {"research", "nlp"}, [(r.kind, r.team, r.plan) for r in found.recommendations]
    for team, pod in (("research", research), ("nlp", nlp)):
        primary = primaries[team]
        assert primary.plan_id == pod.plan_id and primary.evidence["gpu_units"] == pod.evidence["gpu_units"]
        assert pod is primary or pod.evidence["instead_of"] == [primary.id]
    assert plans.total(found.recommendations) == expected(20) + expected(14) == Decimal("2840.43")
    assert not [r for r in found.recommendations if not plans.gpu_units(r)]  # the node itself is busy

    everyone = cli(warehouse)
    assert everyone.returncode == 0, everyone.stderr
    assert "total: $2,840.43/month in 2 plan(s)" in everyone.stdout, everyone.stdout
    for team, figure in (("research", "1,670.84"), ("nlp", "1,169.59")):
        scoped = cli(warehouse, "--team", team)
        assert scoped.returncode == 0, scoped.stderr
        assert f"total: ${figure}/month in 1 plan(s)" in scoped.stdout, scoped.stdout
    as_json = json.loads(cli(warehouse, "--format", "json").stdout)
    assert sorted(r["plan"] for r in as_json if r["plan"] != "alternative") == ["primary", "primary"]
    assert plans.total(as_json) == Decimal("2840.43")
    check_the_api_and_exports(tmp_path, warehouse)


def check_the_api_and_exports(tmp_path, warehouse) -> None:
    """The stored plans on the other surfaces: the API's /v1/savings over loopback HTTP (a real uvicorn), and
    the scheduler exports, whole and scoped to each team."""
    import httpx
    import yaml

    import gpufinops.jobs.export as exp
    from gpufinops.interfaces.api import create_app
    from tests.test_api import Served, make_config

    with Served(create_app(make_config(tmp_path, warehouse, ""), insecure_demo=True, environ={})) as served:
        for team, figure in ((None, 2840.43), ("research", 1670.84), ("nlp", 1169.59)):
            params = {"team": team} if team else {}
            body = httpx.get(f"{served.url}/v1/savings", params=params, timeout=30).json()
            assert round(body["monthly_savings_usd"], 2) == figure and body["plans"] == (2 if team is None else 1)
    with db.reader(warehouse) as con:
        whole = exp.render(con, "kueue")
        scoped = {team: exp.render(con, "kueue", team=team) for team in ("research", "nlp")}
        karpenter = exp.render(con, "karpenter")
    queues = [d for d in yaml.safe_load_all(whole) if d and d["kind"] == "ClusterQueue"]
    quota = queues[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert [q["metadata"]["name"] for q in queues] == ["gpufinops-ml-platform"] and quota == 8 - 2
    assert "today 8" in whole and "limit 8: 6 rounded up to whole p4d.24xlarge nodes" in karpenter
    for team, other, shown in (("research", "nlp", "1,670.84"), ("nlp", "research", "1,169.59")):
        assert f"plan total: ${shown}/month" in scoped[team]
        assert f"# team {team}: {team}/" in scoped[team] and "gives back 1 whole GPU(s)" in scoped[team]
        assert f"team {other}:" not in scoped[team]
