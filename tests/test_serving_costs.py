"""The stored serving costs (``serving_costs_hourly``, derived/serving_costs.py) are the live rows, always.

Unit costs read stored rows; these tests hold that store to the rows its one SQL definition computes from
the inputs as they are now, whatever loaded them in whatever order: bills (``focus_files``, restated),
GPU metrics with pods (``dcgm_exporter``), host metrics without pods (``nvidia_smi_csv``) and the
servers' counters (``serving_exporter`` reading recorded expositions, re-read and grown) — every loader
that writes a table the rows are computed from. Then the settings: the stored ones are read from the
table, others live; a change recomputes all; a warehouse upgraded to v17 (no rows, no settings) reads
live until its first load, which fills every day.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from gpufinops.derived import serving_costs, unit_costs
from gpufinops.derived.serving_costs import UnitCostSettings
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.serving_exporter import ServingExporter
from gpufinops.warehouse import db, queries
from tests import serving_fleet as sf
from tests.allocation_fleet import START, Line, write_focus_csv
from tests.demo_cache import demo_copy
from tests.test_allocation_order import HOURS
from tests.test_allocation_order import World as AllocationWorld
from tests.test_allocation_order import play as play_in

# (namespace/pod, model) served: two pods time-slicing GPU-a1 on node-a (allocated by their DCGM labels),
# the MIG notebook pod (its 3g.20gb slice) and a pod no metric names (no GPU found: a NULL cost).
PODS = {"serve/s-0": "llama-3.1-8b", "serve/s-1": "mistral-7b", "notebooks/nb-0": "qwen-2.5-3b", "x/lost": "phi-3"}
SCRAPE_MINUTES = (0, 50, 110, 170, HOURS * 60 - 1)


def vllm(model: str, n: int, ts_ms: int) -> str:
    """A vLLM exposition after ``n`` units of work (the counters' names and types as vLLM exports them)."""
    label = f'model_name="{model}"'
    return (
        "# TYPE vllm:prompt_tokens_total counter\n"
        f"vllm:prompt_tokens_total{{{label}}} {1000.0 * n} {ts_ms}\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        f"vllm:generation_tokens_total{{{label}}} {300.0 * n + n * n} {ts_ms}\n"
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{finished_reason="stop",{label}}} {4.0 * n} {ts_ms}\n'
        "# TYPE vllm:request_prefill_time_seconds histogram\n"
        f"vllm:request_prefill_time_seconds_sum{{{label}}} {2.0 * n} {ts_ms}\n"
        f"vllm:request_prefill_time_seconds_count{{{label}}} {4.0 * n} {ts_ms}\n"
        "# TYPE vllm:request_decode_time_seconds histogram\n"
        f"vllm:request_decode_time_seconds_sum{{{label}}} {7.0 * n} {ts_ms}\n"
        f"vllm:request_decode_time_seconds_count{{{label}}} {4.0 * n} {ts_ms}\n"
    )


class World(AllocationWorld):
    """The allocation-order world (bills, DCGM with pods, nvidia-smi logs) plus the pods' own counters."""

    sources = (*AllocationWorld.sources, ServingExporter)

    def serving(self) -> None:
        folder = self.tmp / "serving"
        folder.mkdir(exist_ok=True)
        files = {pod: folder / f"{pod.replace('/', '-')}.prom" for pod in PODS}
        options = {
            "targets": [str(f) for f in files.values()],
            "target_pods": {f.as_uri(): p for p, f in files.items()},
        }
        for step, minute in enumerate(SCRAPE_MINUTES):  # each scrape a run, as `serve` would
            ts_ms = int((START + timedelta(minutes=minute)).timestamp() * 1000)
            for i, (pod, model) in enumerate(PODS.items()):
                files[pod].write_text(vllm(model, step * (i + 3), ts_ms))
            self._run("serving", "serving_exporter", options)


ORDERS = {
    "serving first": ["serving", "dcgm", "smi", "bill:restated"],
    "bill first": ["bill:restated", "dcgm", "smi", "serving"],
    "serving between": ["dcgm", "serving", "bill:restated", "smi"],
    "restated after the serving": ["serving", "bill", "dcgm", "smi", "bill:restated"],
    "everything re-run": ["bill", "serving", "dcgm", "smi", "bill:restated", "serving", "dcgm", "smi"],
}


def stored_rows(con) -> pl.DataFrame:
    cols = ", ".join(serving_costs.COLUMNS)
    return con.sql(f"SELECT {cols} FROM serving_costs_hourly ORDER BY ALL").pl()


def live_rows(con, settings: UnitCostSettings | None = None) -> pl.DataFrame:
    """The rows computed now from the inputs, by the one SQL definition (never read from the table)."""
    carbon, _ = serving_costs.carbon_relation(con)
    sql, params = serving_costs.rows_sql(
        carbon, settings or serving_costs.stored(con) or UnitCostSettings(), serving_costs.between(None, None)
    )
    return con.sql(f"SELECT * FROM ({sql}) ORDER BY ALL", params=params).pl()


def assert_same(stored: pl.DataFrame, live: pl.DataFrame) -> None:
    exact = [c for c in serving_costs.COLUMNS if c not in ("kwh", "kg_co2e")]
    assert stored.select(exact).to_dicts() == live.select(exact).to_dicts()
    for column in ("kwh", "kg_co2e"):  # DOUBLE sums: the same up to the order of addition
        for a, b in zip(stored[column].to_list(), live[column].to_list(), strict=True):
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-12), (column, a, b)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Path]:
    return {
        name: play_in(tmp_path_factory.mktemp(name.replace(" ", "-")), steps, World) for name, steps in ORDERS.items()
    }


@pytest.mark.parametrize("order", list(ORDERS))
def test_after_every_order_of_loads_the_stored_rows_are_the_live_rows(outcomes, order):
    with db.reader(outcomes[order]) as con:
        stored, live = stored_rows(con), live_rows(con)
    assert_same(stored, live)
    allocated = stored.filter(pl.col("basis") == "allocation")
    assert {*allocated["pod"]} == {"s-0", "s-1", "nb-0"} and allocated["gpu_cost_usd"].sum() > 0
    assert stored.filter(pl.col("pod") == "lost")["gpu_cost_usd"].null_count() == HOURS  # no GPU found


def test_every_order_ends_with_the_same_costs_charged_from_the_restated_bill(outcomes):
    with db.reader(outcomes["serving first"]) as con:
        first = stored_rows(con)
        per_gpu_hour = con.execute(
            'SELECT sum("EffectiveCost") / 8 / count(DISTINCT "ChargePeriodStart") FROM cost_line_items '
            "WHERE \"ResourceId\" = 'i-0aaa'"
        ).fetchall()[0][0]
    assert per_gpu_hour == Decimal("5")  # the restated $40 an hour over 8 GPUs
    for order in ORDERS:
        with db.reader(outcomes[order]) as con:
            assert_same(stored_rows(con), first)


def test_other_settings_read_live_and_a_settings_change_recomputes_all(outcomes, tmp_path):
    warehouse = outcomes["bill first"]
    weight = UnitCostSettings(split="weight", input_weight=0.5)
    with db.reader(warehouse) as con:
        assert serving_costs.stored(con) == UnitCostSettings()
        asked = unit_costs.unit_costs(con, settings=weight)  # not what is stored: computed live
        default = unit_costs.unit_costs(con)
        live = live_rows(con, weight)
    assert asked["input_cost_usd"].sum() != default["input_cost_usd"].sum()
    assert asked["input_cost_usd"].sum() == live["input_cost_usd"].sum()
    copy = tmp_path / "gpufinops.duckdb"
    copy.write_bytes(warehouse.read_bytes())
    with db.reader(copy) as con:
        version = queries.dashboard_data_version(con)
    assert serving_costs.configure(copy, weight) and not serving_costs.configure(copy, weight)
    with db.reader(copy) as con:  # no ledger row, yet the dashboard's caches must not serve the old costs
        assert queries.dashboard_data_version(con) != version
    with db.reader(copy) as con:
        assert serving_costs.stored(con) == weight
        assert_same(stored_rows(con), live_rows(con, weight))
        assert unit_costs.unit_costs(con).to_dicts() == asked.to_dicts()  # settings None: the stored ones


def test_an_upgraded_warehouse_reads_live_until_its_first_load_fills_every_day(tmp_path):
    world = World(tmp_path, tmp_path / "wh" / "gpufinops.duckdb")
    for step in ("dcgm", "smi", "serving"):
        getattr(world, step)()
    world.bill(restated=True)
    with db.reader(world.warehouse) as con:
        before, filled = unit_costs.unit_costs(con), stored_rows(con)
    with db.writer(world.warehouse) as con:  # as migration v17 leaves a warehouse: the table and settings empty
        con.execute("DELETE FROM serving_costs_hourly")
        con.execute("DELETE FROM unit_cost_settings")
    with db.reader(world.warehouse) as con:
        assert serving_costs.stored(con) is None
        assert unit_costs.unit_costs(con).to_dicts() == before.to_dicts()  # computed live
    later = tmp_path / "later"  # the next load: a bill two days on, for another machine (no serving day)
    later.mkdir()
    write_focus_csv(later / "cur.csv", [Line("i-0ccc", 48, Decimal("3"), team="x", gpu_count=1)])
    world._run("later", "focus_files", {"path": str(later / "*.csv")})
    with db.reader(world.warehouse) as con:
        assert serving_costs.stored(con) == UnitCostSettings()  # it filled every day, not only those it touched
        stored, live = stored_rows(con), live_rows(con)
    assert_same(stored, live)
    assert_same(stored, filled)


def test_rows_of_an_older_formula_are_not_read(tmp_path):
    warehouse = tmp_path / "gpufinops.duckdb"
    sf.warehouse_with_fleet(warehouse)
    with db.writer(warehouse) as con:
        con.execute("UPDATE unit_cost_settings SET value = replace(value, '\"formula\": 1', '\"formula\": 0')")
        con.execute("UPDATE serving_costs_hourly SET gpu_cost_usd = gpu_cost_usd * 2")  # stale rows, doubled
    with db.reader(warehouse) as con:
        assert serving_costs.stored(con) is None
        got = unit_costs.unit_costs(con, period=unit_costs.WHOLE)
    assert got["gpu_cost_usd"].sum() == 2 * sf.H100_HOUR + sf.L4_HOUR  # the live figure, not the stale one
    assert serving_costs.configure(warehouse, None)  # the next job's configure recomputes them
    with db.reader(warehouse) as con:
        assert_same(stored_rows(con), live_rows(con))


def test_the_demo_reads_stored_rows_that_are_its_live_rows(tmp_path_factory):
    """The demo (its vLLM, TGI and Triton pods, the one on a MIG slice) loads through its sources: its
    stored rows are what the SQL computes from its inputs, and its unit costs are read from them."""
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=7)
    with db.reader(home / "data" / "gpufinops.duckdb") as con:
        assert serving_costs.stored(con) == UnitCostSettings()
        stored = stored_rows(con)
        assert_same(stored, live_rows(con))
        sql, _ = serving_costs.relation(con, None)
    assert "FROM serving_costs_hourly" in sql
    assert {*stored["basis"]} >= {"allocation"} and stored["gpu_cost_usd"].sum() > 0


def test_a_warehouse_not_yet_upgraded_to_v17_reads_live(tmp_path):
    warehouse = tmp_path / "gpufinops.duckdb"
    sf.warehouse_with_fleet(warehouse)
    with db.reader(warehouse) as con:
        before = unit_costs.unit_costs(con)
    with db.writer(warehouse) as con:  # (a reader does not migrate: as a version-16 warehouse looks to it)
        con.execute("DROP TABLE serving_costs_hourly")
        con.execute("DROP TABLE unit_cost_settings")
    with db.reader(warehouse) as con:
        assert unit_costs.unit_costs(con).to_dicts() == before.to_dicts()


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-5"])
def test_a_hostile_counter_is_refused_before_it_reaches_the_stored_rows(outcomes, tmp_path, value):
    """A scrape whose token counter is NaN, ±inf or negative fails its run and leaves the stored rows as they were."""
    world = World(tmp_path, tmp_path / "wh" / "gpufinops.duckdb")
    world.warehouse.parent.mkdir(parents=True)
    world.warehouse.write_bytes(outcomes["bill first"].read_bytes())
    with db.reader(world.warehouse) as con:
        before = stored_rows(con)
    target = tmp_path / "hostile.prom"
    ts_ms = int((START + timedelta(minutes=200)).timestamp() * 1000)
    target.write_text(vllm("llama-3.1-8b", 99, ts_ms).replace(f"{1000.0 * 99}", value, 1))
    result = run_source(
        world.registry(),
        world.warehouse,
        "serving",
        "serving_exporter",
        {"targets": [str(target)], "target_pods": {target.as_uri(): "serve/s-0"}},
        team_tag_keys=("team",),
    )
    assert result.status == "failed" and "prompt_tokens_total" in (result.error or ""), result.error
    assert "not a finite, non-negative count" in result.error
    with db.reader(world.warehouse) as con:
        assert stored_rows(con).to_dicts() == before.to_dicts()
