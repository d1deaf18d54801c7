"""`gpufinops demo` end to end: ingests every source, finds every planted idle GPU, is repeatable."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest

from jobs import demo
from tests.conftest import query

TABLES = ("cost_line_items", "gpu_metrics_hourly", "recommendations", "gpu_specs")


def counts(db_path) -> dict[str, int]:
    return {t: query(db_path, f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    assert demo.run(home, days=14, seed=3, out=out) == 0
    return home, out.getvalue()


def test_demo_finds_every_planted_idle_gpu_at_its_true_cost(demo_home):
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    truth = [p for p in json.loads((home / "ground_truth.json").read_text())["planted"] if p["kind"] == "idle_gpu"]
    assert len(truth) == 4
    recs = {r[0]: r for r in query(db_path, "SELECT resource_id, evidence FROM recommendations WHERE kind = 'idle_gpu'")}
    assert set(recs) == {p["resource_id"] for p in truth}  # all found, nothing else flagged
    for item in truth:
        evidence = json.loads(recs[item["resource_id"]][1])
        assert evidence["pattern"] == item["variant"]
        assert Decimal(str(evidence["idle_cost_usd"])) == Decimal(item["idle_cost_usd"]).quantize(Decimal("0.01"))
    assert "4/4 planted idle GPUs found" in printed


def test_demo_ingests_every_source_and_totals_match_the_simulation(demo_home):
    home, _ = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    statuses = query(db_path, "SELECT source, status FROM ingest_runs ORDER BY source")
    assert statuses == [("aws_focus", "succeeded"), ("gcp_focus", "succeeded"), ("gpu_metrics", "succeeded"),
                        ("onprem_focus", "succeeded")]
    truth = json.loads((home / "ground_truth.json").read_text())["cost_by_provider_usd"]
    got = dict(query(db_path, 'SELECT "ProviderName", sum("EffectiveCost") FROM cost_line_items GROUP BY 1'))
    names = {"aws": "AWS", "gcp": "Google Cloud", "onprem": "onprem"}
    assert {names[k]: Decimal(v) for k, v in truth.items()} == got
    unattributed = query(db_path, "SELECT count(*) FROM gpu_metrics_hourly WHERE resource_id IS NULL")[0][0]
    assert unattributed == 0


def test_demo_rerun_leaves_row_counts_and_numbers_unchanged(demo_home, tmp_path):
    home, printed = demo_home
    db_path = home / "data" / "gpufinops.duckdb"
    before = counts(db_path)
    out = io.StringIO()
    assert demo.run(home, days=14, seed=3, out=out) == 0
    assert counts(db_path) == before
    other = tmp_path / "again"
    out2 = io.StringIO()
    assert demo.run(other, days=14, seed=3, out=out2) == 0
    assert counts(other / "data" / "gpufinops.duckdb") == before
    strip = lambda text: text.replace(str(home), "HOME").replace(str(other), "HOME")  # noqa: E731
    assert strip(out2.getvalue()) == strip(printed)
