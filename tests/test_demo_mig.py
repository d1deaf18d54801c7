"""The demo's MIG serving workload (simulator/demo_mig.py): its model's unit cost is its slice's allocated cost.

The MIG machine alone, over a day, goes through the demo's own sources (its DCGM exporter history, its
vLLM pod's counters, its Google Cloud billing export rows) into a warehouse; the model's ``gpu_cost_usd`` in
``unit_costs`` must equal, to the cent, the sum of the allocation rows of the pod's slice for the hours the
pod served, which is the slice's 3/7 of the VM's GPU-hours and not the whole GPU's cost.
"""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest

from gpufinops.derived import unit_costs
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.ingest_run import run_configured
from gpufinops.simulator import demo_mig, demo_serving, gcp_export
from gpufinops.simulator.demo_fleet import DEMO_END
from gpufinops.simulator.demo_profiles import Clock
from gpufinops.warehouse import db

CENT = Decimal("0.01")
DAYS = 1


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


@pytest.fixture(scope="module")
def mig_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("mig")
    clock = Clock(DEMO_END - timedelta(days=DAYS), DEMO_END)
    fleet = demo_mig.generate(clock, seed=7)
    demo_mig.write_exposition(home / "dcgm", fleet)
    demo_serving.write_serving_exports(home / "serving", [fleet.machine], clock.start, clock.end, 7)
    gcp_export.write_billing_export(home / "billing", fleet.lines)
    m = fleet.machine
    (home / "gpufinops.toml").write_text(
        "\n".join(
            [
                "[warehouse]",
                'path = "data/gpufinops.duckdb"',
                "[teams]",
                'tag_keys = ["team"]',
                "[sources.gpu_metrics]",
                'type = "dcgm_exporter"',
                'targets = ["dcgm/*.prom"]',
                "[sources.gpu_metrics.resource_map]",
                f"{json.dumps(m.host)} = {json.dumps(m.resource_id)}",
                "[sources.serving]",
                'type = "serving_exporter"',
                'targets = ["serving/*.prom"]',
                "[sources.gcp_billing]",
                'type = "gcp_billing_export"',
                'path = "billing/*.json"',
                "",
            ]
        )
    )
    cfg = config_mod.load(home / "gpufinops.toml")
    results = run_configured(cfg)
    assert all(r.ok for r in results), [r.error for r in results]
    return cfg.warehouse_path, fleet


def test_the_mig_model_costs_its_slice_allocation_to_the_cent(mig_home):
    path, fleet = mig_home
    slice_ = next(s for s in demo_mig.SLICES if s.pod == demo_mig.SERVER.pod)
    with db.reader(path) as con:
        got = unit_costs.unit_costs(con, model=demo_mig.SERVER.model, period=unit_costs.WHOLE)
        served = con.execute(
            "SELECT count(DISTINCT hour) FROM serving_metrics_hourly WHERE pod = ?", [demo_mig.SERVER.pod]
        ).fetchall()[0][0]
        (allocated,) = con.execute(
            "SELECT sum(a.cost_usd) FROM gpu_allocation_hourly a "
            "WHERE a.mig_instance = ? AND a.pod = ? AND a.basis = 'mig' "
            "AND a.hour IN (SELECT hour FROM serving_metrics_hourly WHERE pod = ?)",
            [f"{slice_.profile}/{slice_.instance}", slice_.pod, slice_.pod],
        ).fetchall()[0]
        whole = con.execute(  # the GPU-hours' whole cost: every slice's rows and the unallocated ones
            "SELECT sum(cost_usd) FROM gpu_allocation_hourly "
            "WHERE hour IN (SELECT hour FROM serving_metrics_hourly WHERE pod = ?)",
            [slice_.pod],
        ).fetchall()[0][0]
    assert got.height == 1 and got["cost_basis"].to_list() == ["allocation"]
    cost = got["gpu_cost_usd"][0]
    assert isinstance(cost, Decimal) and isinstance(allocated, Decimal)
    assert served == DAYS * 24 and cents(cost) == cents(allocated)
    # the slice's 3 of the A100's 7 compute slices, not the whole GPU-hour (the pod holds it every sample)
    assert cents(cost) == cents(whole * 3 / 7) and cost < whole
    assert got["team"].to_list() == ["nlp"] and got["usd_per_1m_output_tokens"][0] > 0


def test_the_other_slices_are_charged_apart_and_the_empty_ones_stay_unallocated(mig_home):
    path, _ = mig_home
    with db.reader(path) as con:
        rows = dict(
            con.execute(
                "SELECT mig_instance || ':' || coalesce(pod, basis), round(avg(share), 9) FROM gpu_allocation_hourly "
                "WHERE mig_instance IS NOT NULL GROUP BY 1"
            ).fetchall()
        )
        hours = con.execute("SELECT count(DISTINCT hour) FROM gpu_allocation_hourly").fetchall()[0][0]
        per_hour = con.execute(
            "SELECT count(DISTINCT sum_cost) FROM (SELECT hour, sum(cost_usd) AS sum_cost FROM gpu_allocation_hourly "
            "GROUP BY hour)"
        ).fetchall()[0][0]
    assert rows == {
        "3g.20gb/2:vllm-llama-3b-mig-0": round(3 / 7, 9),
        "2g.10gb/3:embed-bge-0": round(2 / 7, 9),
        "1g.5gb/9:unallocated": round(1 / 7, 9),
        "1g.5gb/10:unallocated": round(1 / 7, 9),
    }
    assert hours == DAYS * 24 and per_hour == 1  # every hour's rows sum to the same on-demand GPU-hour


def test_the_mig_machine_draws_from_its_own_stream():
    clock = Clock(DEMO_END - timedelta(days=1), DEMO_END)
    a, b = demo_mig.generate(clock, seed=7), demo_mig.generate(clock, seed=7)
    assert a.exposition == b.exposition and a.lines == b.lines
    assert demo_mig.generate(clock, seed=8).exposition != a.exposition
