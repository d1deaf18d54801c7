"""The run's shared reads (models/run_reads.py): what several models read is read once per run, gives the
same findings as each model reading for itself, and is dropped when the run ends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpufinops.models import features, registry, run_reads
from gpufinops.models.run import analyse
from gpufinops.warehouse import db, queries
from tests.cost_lines import START, add_machine, add_metrics
from tests.demo_cache import demo_copy


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo-run-reads")
    demo_copy(tmp_path_factory, home, days=21, seed=7)  # the fleet test_commitment reads: spot, commitment, idle
    return home / "data" / "gpufinops.duckdb"


@pytest.fixture
def con(warehouse):
    with db.writer(warehouse) as c:
        yield c


def _plain(value):
    """A finding as compared: floats to 12 significant digits (DuckDB's parallel mean may differ in its
    last bits from one read to the next), the creation time left out."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "created_at"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _every_model(con) -> dict[str, tuple[list, list, list]]:
    out = {}
    for spec in registry.MODELS:
        found = spec.run(con, None)
        out[spec.kind] = tuple(
            _plain([x.to_dict() if hasattr(x, "to_dict") else vars(x).copy() for x in part])
            for part in (found.recommendations, found.withheld, found.comparison)
        )
    return out


def test_shared_reads_give_the_findings_of_separate_reads(demo_db):
    with db.writer(demo_db) as con:
        separate = _every_model(con)  # no scope: every model reads for itself
        with run_reads.scope(con) as reads:
            shared = _every_model(con)
    assert reads.reads["gpu_resource_hours"] == 1  # idle_gpu's read, reused by onprem_vs_cloud and commitment
    assert reads.reads["spot_mix"] == 1  # spot_mix's inputs, reused by commitment
    assert reads.reads["rightsizing_resources"] == 1 and reads.reads["rightsizing_catalogue"] == 1
    found = {kind: len(recs) for kind, (recs, _, _) in shared.items()}
    assert found["commitment"] and found["spot_mix"] and found["idle_gpu"]  # the shared paths are exercised
    assert shared == separate


def test_a_window_is_the_whole_read_filtered_or_read_on_its_own(con):
    add_machine(con, "i-a", hours=range(48))
    add_metrics(con, "i-a", hours=range(48), util_max=50.0)
    # a line starting inside an hour: a window starting before it within that hour keeps the hour's row
    con.execute(
        'INSERT INTO cost_line_items BY NAME SELECT * REPLACE ("ChargePeriodStart" + INTERVAL 45 MINUTE AS '
        '"ChargePeriodStart", 1.5 AS "EffectiveCost") FROM cost_line_items WHERE "ChargePeriodStart" = ?',
        [START + timedelta(hours=10)],
    )
    with run_reads.scope(con) as reads:
        for start in (START + timedelta(hours=10), START + timedelta(hours=10, minutes=30)):
            alone = queries.gpu_resource_hours(con, start=start)
            assert run_reads.resource_hours(con, start=start).equals(alone)
        assert run_reads.resource_hours(con).equals(queries.gpu_resource_hours(con))
    assert reads.reads["gpu_resource_hours"] == 2  # the whole read, and the window starting inside an hour


def test_reads_do_not_outlive_their_run(con, monkeypatch):
    calls = []
    real = queries.gpu_resource_hours

    def counted(c, **kwargs):
        calls.append(kwargs)
        return real(c, **kwargs)

    monkeypatch.setattr(queries, "gpu_resource_hours", counted)
    add_machine(con, "i-idle", hours=range(72))
    add_metrics(con, "i-idle", hours=range(72), util_max=1.0)
    first = analyse(con)
    assert len(calls) == 1  # idle_gpu and commitment share the run's one read
    assert run_reads.active(con) is None
    assert [r.resource_id for r in first.recommendations if r.kind == "idle_gpu"] == ["i-idle"]
    con.execute("UPDATE gpu_metrics_hourly SET util_max = 90, util_mean = 90, util_p95 = 90")
    second = analyse(con)  # the next run reads the warehouse as it is now
    assert len(calls) == 2
    assert not [r for r in second.recommendations if r.kind == "idle_gpu"]


def test_a_scope_serves_only_its_own_connection_and_ends_on_an_error(con):
    other = con.cursor()  # another connection to the same warehouse
    with pytest.raises(RuntimeError), run_reads.scope(con) as reads:
        assert run_reads.shared(con, "n", None, lambda: 1) == 1
        assert run_reads.shared(con, "n", None, lambda: 2) == 1  # kept
        assert run_reads.active(other) is None
        assert run_reads.shared(other, "n", None, lambda: 2) == 2  # not the scope's
        raise RuntimeError("a model failed")
    assert not reads.values and run_reads.active(con) is None
    assert run_reads.shared(con, "n", None, lambda: 3) == 3  # no scope: read every time


def test_an_inner_scope_joins_the_outer_one(con):
    add_machine(con, "i-a", hours=range(24))
    s = features.RightsizingSettings()
    with run_reads.scope(con) as outer:
        with run_reads.scope(con) as inner:
            assert inner is outer
            first = features.resources(con, s)
        assert run_reads.active(con) is outer  # the inner block's end drops nothing
        assert features.resources(con, s) is first
    assert outer.reads["rightsizing_resources"] == 1
