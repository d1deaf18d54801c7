"""Attribution and findings do not depend on the order data arrives in (issue 14).

A real account feeds GPU metrics every few minutes and the bill a day later, then restates the bill
for weeks. For every utilisation source — DCGM exporter files, a real Prometheus, nvidia-smi logs —
the same fleet (tests/order_fleet.py: a CUR 2.0 month without GPU attributes, restated once) is fed in
three orders: metrics → bill → restated bill (the live order), bill → metrics → restated bill, and
bill → restated bill → metrics. Each ends with the same ``gpu_metrics_hourly`` (every column but the
run id), the same recommendations and the same withheld findings; and that common answer is checked
against what the fleet was built to show (the resource and team of every GPU-hour, the idle GPU, the
spare GPUs of a bill that says nothing about GPU counts, with no pricing source configured).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.models.run import analyse
from gpufinops.warehouse import db
from tests import order_fleet as of
from tests.conftest import query, table_digest
from tests.prometheus_fixture import PROMETHEUS, PROMTOOL, PrometheusServer

REGISTRY = default_registry()
ORDERS = {
    "metrics, bill, restated bill": ("metrics", "bill", "restated"),
    "bill, metrics, restated bill": ("bill", "metrics", "restated"),
    "bill, restated bill, metrics": ("bill", "restated", "metrics"),
}
TEAM_KEYS = ("team", "user:team", "user_team", "k8s_label_team")  # the config's default [teams] tag_keys
UNTIL = of.START + of.timedelta(days=of.DAYS)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("the `prometheus` and `promtool` binaries are not installed (Debian package `prometheus`)")
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), of.openmetrics(), [])
    server.wait_ready()
    yield server
    server.stop()


def _metrics_input(source_type: str, folder: Path, request) -> tuple[dict, dict]:
    """(options, run_source keyword arguments) of the utilisation source."""
    if source_type == "dcgm_exporter":
        return of.write_dcgm(folder / "dcgm"), {}
    if source_type == "nvidia_smi_csv":
        return of.write_nvidia_smi(folder / "smi"), {}
    server = request.getfixturevalue("prometheus")
    return of.prometheus_options(server.url), {"since": of.START, "until": UNTIL}


def _feed(warehouse: Path, source_type: str, order: tuple[str, ...], folder: Path, request) -> None:
    options, kwargs = _metrics_input(source_type, folder, request)
    cur_root = folder / "cur"
    for step in order:
        if step == "metrics":
            result = run_source(REGISTRY, warehouse, "gpus", source_type, options, **kwargs)
        else:
            cur = of.write_cur(cur_root, 1 if step == "bill" else 2)
            result = run_source(REGISTRY, warehouse, "cur", "aws_cur", cur, team_tag_keys=TEAM_KEYS)
        assert result.status == "succeeded", (step, result.error)


def _outcome(warehouse: Path) -> dict:
    with db.writer(warehouse) as con:
        run = analyse(con)
    recs = sorted((r.to_dict() for r in run.recommendations), key=lambda r: r["id"])
    for rec in recs:
        rec.pop("created_at")
    withheld = sorted((w.to_dict() for w in run.withheld), key=lambda w: (w["kind"], w["resource_id"] or ""))
    return {
        "metrics": table_digest(warehouse, "gpu_metrics_hourly", exclude=("ingest_run_id",)),
        "recommendations": recs,
        "withheld": withheld,
    }


@pytest.mark.parametrize("source_type", ["dcgm_exporter", "prometheus", "nvidia_smi_csv"])
def test_every_arrival_order_gives_the_same_attribution_and_findings(source_type, tmp_path, request):
    outcomes = {}
    for name, order in ORDERS.items():
        folder = tmp_path / name.replace(", ", "-").replace(" ", "_")
        warehouse = folder / "wh" / "gpufinops.duckdb"
        _feed(warehouse, source_type, order, folder, request)
        outcomes[name] = (_outcome(warehouse), warehouse)
    (first, warehouse), *others = outcomes.values()
    for name, (outcome, _) in outcomes.items():
        assert outcome["metrics"] == first["metrics"], name
        assert outcome["recommendations"] == first["recommendations"], name
        assert outcome["withheld"] == first["withheld"], name

    # ... and the common answer is the right one: every GPU-hour has its resource and team
    rows = query(warehouse, "SELECT resource_id, team, count(*) FROM gpu_metrics_hourly GROUP BY ALL ORDER BY 1")
    hours = of.DAYS * 24
    expected_teams = of.EXPECTED_TEAMS[source_type]
    assert [(r, t) for r, t, _ in rows] == sorted(expected_teams.items())
    assert {r: n for r, _, n in rows} == {b.resource_id: hours * b.gpus for b in of.FLEET}
    # the bill names no GPU counts and no pricing source ran: the inventory supplies them
    counts = dict(query(warehouse, 'SELECT "ResourceId", max("x_GpuCount") FROM cost_line_items GROUP BY 1'))
    assert counts == {b.resource_id: b.gpus for b in of.FLEET}
    found = {(r["kind"], r["resource_id"]) for r in first["recommendations"]}
    assert ("idle_gpu", of.IDLE.resource_id) in found
    assert ("gpu_count", of.SPARE.resource_id) in found
    spare = next(r for r in first["recommendations"] if r["kind"] == "gpu_count")
    assert (spare["current"]["gpu_count"], spare["proposed"]["gpu_count"]) == (4, 1)
    assert spare["team"] == "speech"  # the restated bill's team, not the first delivery's
    assert not any(w["reason"] == "unknown_gpu_count" for w in first["withheld"])


def _prom_lines(host: str, gpu: int, namespace: str | None, start, minutes: int) -> list[str]:
    labels = f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}"'
    if namespace:
        labels += f',namespace="{namespace}",pod="p-{gpu}"'
    out = []
    for m in range(minutes):
        ts = int((start + of.timedelta(minutes=m)).timestamp() * 1000)
        out += [
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 40 {ts}",
            f"DCGM_FI_DEV_FB_USED{{{labels}}} 1000 {ts}",
            f"DCGM_FI_DEV_FB_FREE{{{labels}}} 80000 {ts}",
        ]
    return out


def test_onprem_gpu_hours_take_the_team_their_cost_lines_take(tmp_path):
    """Scheduler label (namespace_teams), else node_teams, else the node group's team: the same for a
    node's GPU-hours as for its cost lines, although the metrics were loaded before any cost line."""
    start = of.START
    (tmp_path / "a.prom").write_text(
        "\n".join(_prom_lines("gpu-a", 0, "ml-serve", start, 120) + _prom_lines("gpu-a", 1, None, start, 120)) + "\n"
    )
    (tmp_path / "b.prom").write_text("\n".join(_prom_lines("gpu-b", 0, None, start, 120)) + "\n")
    warehouse = tmp_path / "wh" / "gpufinops.duckdb"
    metrics = run_source(
        REGISTRY,
        warehouse,
        "dcgm",
        "dcgm_exporter",
        {"targets": [str(tmp_path / "*.prom")], "namespace_teams": {"ml-serve": "speech"}},
    )
    assert metrics.status == "succeeded", metrics.error
    group = {"name": "hgx", "gpu_model": "A100-80GB", "gpus_per_node": 2, "server_price_usd": 60000, "team": "research"}
    cluster = {
        "pue": 1.4,
        "energy_usd_per_kwh": 0.11,
        "amortisation_years": 4,
        "cluster": "dc9",
        "node_groups": [{**group, "nodes": ["gpu-a", "gpu-b"]}],
        "node_teams": {"gpu-a": "vision"},
    }
    cost = run_source(REGISTRY, warehouse, "dc9", "onprem", cluster)
    assert cost.status == "succeeded", cost.error
    hours = dict(
        query(
            warehouse,
            "SELECT gpu_uuid, min(team) FROM gpu_metrics_hourly GROUP BY 1 "
            "HAVING count(DISTINCT team) = 1 AND count(team) = count(*)",
        )
    )
    assert hours == {"GPU-gpu-a-0": "speech", "GPU-gpu-a-1": "vision", "GPU-gpu-b-0": "research"}
    lines = dict(
        query(
            warehouse,
            """SELECT json_extract_string("Tags", '$.gpu_uuid'), min("x_Team")
                                     FROM cost_line_items WHERE json_extract_string("Tags", '$.gpu_uuid') IS NOT NULL
                                     GROUP BY 1 HAVING count(DISTINCT "x_Team") = 1""",
        )
    )
    assert lines == hours
    assert query(warehouse, "SELECT count(*) FROM gpu_metrics_hourly WHERE resource_id IS NULL")[0][0] == 0


def test_recommend_prints_no_python_warning_and_names_what_it_withheld(tmp_path):
    """A bill without GPU counts or prices (the first day of a new user): findings or reasons, and no
    library warning (polars' "Comparisons with None" used to be the only trace) on the terminal."""
    import subprocess
    import sys

    folder = tmp_path / "fleet"
    warehouse = folder / "wh" / "gpufinops.duckdb"
    _feed(warehouse, "dcgm_exporter", ORDERS["metrics, bill, restated bill"], folder, None)
    run = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--db", str(warehouse), "recommend"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONWARNINGS": "default"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    from gpufinops.kernel.labels import label

    assert label("gpu_count", "kind") in run.stdout and of.SPARE.resource_id in run.stdout  # the table speaks labels
    assert "withheld:" in run.stdout and "--show-withheld" in run.stdout
