"""The ``onprem`` source on real fleets: Helios *Earth* virtual clusters (GPU counts from
Earth_gpu_number.csv, per-minute occupancy as utilisation) and Alibaba PAI's machine inventory.
Every cost is checked against a calculation written out plainly here with Decimal."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.onprem.onprem_cost import OnpremConfigError, hourly_gpu_cost, parse_cluster, specs_from_rows
from tests import onprem_data as hd
from tests.conftest import DATA, query, table_digest

DAY = timedelta(days=1)
UNTIL = hd.START + 2 * DAY


@pytest.fixture
def loaded(warehouse, tmp_path):
    hd.load_metrics(warehouse, tmp_path, hd.START, UNTIL)
    result = run_source(hd.registry(), warehouse, "earth", "onprem", hd.cluster_options())
    assert result.status == "succeeded", result.error
    return result


def test_fleet_is_the_real_inventory():
    for vc in hd.VCS:  # Earth_gpu_number.csv agrees with the occupancy trace's own total
        assert {total for _, _, total in hd.occupancy(vc)} == {hd.vc_gpu_count(vc)} == {64}
        assert len(hd.nodes(vc)) == 8


def test_hourly_cost_per_node_equals_an_independent_calculation(loaded, warehouse):
    got = dict(
        ((rid, start.astimezone(UTC)), cost)
        for rid, start, cost in query(
            warehouse,
            'SELECT "ResourceId", "ChargePeriodStart", sum("EffectiveCost") FROM cost_line_items '
            "WHERE \"ProviderName\" = 'onprem' GROUP BY 1, 2",
        )
    )
    expected: dict[tuple[str, datetime], Decimal] = defaultdict(Decimal)
    used = Decimal(0)
    for vc in hd.VCS:
        for (gpu, hour), minutes in hd.busy_minutes(vc, hd.START, UNTIL).items():
            util = (Decimal(minutes * 100) / 60).quantize(Decimal("0.01"))  # busy share, to 0.01 point
            expected[(f"{vc}-n{gpu // 8}", hour)] += sum(hd.expected_gpu_hour(util))
            used += util / 100
    assert len(got) == 2 * 8 * 48 and got == dict(expected)
    total = sum(expected.values())
    assert query(warehouse, 'SELECT sum("EffectiveCost") FROM cost_line_items')[0][0] == total
    # the cost of a used GPU-hour, from the on-prem usage query the onprem_vs_cloud model reads
    from gpufinops.models.onprem_vs_cloud import used_gpu_hours
    from gpufinops.warehouse import db, queries

    with db.reader(warehouse) as con:
        usage = queries.onprem_gpu_usage(con)
    assert usage["gpu_hours"].sum() == usage["measured_gpu_hours"].sum() == 2 * 64 * 48
    rows = list(usage.iter_rows(named=True))
    assert sum((r["cost_usd"] for r in rows), Decimal(0)) == total
    assert sum((used_gpu_hours(r) for r in rows), Decimal(0)) == used
    assert Decimal("0.5") < total / used < Decimal("5")  # $/used V100-hour: a sanity bound, not the check


def test_lines_follow_the_focus_semantics_and_say_the_power_model(loaded, warehouse):
    rows = query(
        warehouse,
        """SELECT "SkuId", count(*), sum("BilledCost"), sum("EffectiveCost"),
                                      min("x_GpuCount"), max("x_GpuCount"), any_value("ConsumedUnit"),
                                      any_value("PricingCategory"), count(DISTINCT "ResourceName")
                               FROM cost_line_items GROUP BY 1 ORDER BY 1""",
    )
    gpu_hours = 2 * 64 * 48
    by_sku = {r[0]: r[1:] for r in rows}
    assert sorted(by_sku) == [f"earth/{vc}/{c}" for vc in hd.VCS for c in ("energy", "facility", "hardware")]
    for sku, (count, billed, effective, gmin, gmax, unit, pricing, gpus) in by_sku.items():
        assert count == gpu_hours // 2 and gmin == gmax == 1 and unit == "Hours" and pricing == "Committed"
        assert gpus == 64
        assert billed == (0 if sku.endswith("hardware") else effective)  # amortised purchase: billed up front
    bases = query(
        warehouse,
        """SELECT json_extract_string("Tags", '$.power_basis'), count(*) FROM cost_line_items
                                WHERE json_extract_string("Tags", '$.cost_component') = 'energy' GROUP BY 1""",
    )
    assert bases == [("tdp_model", gpu_hours)]  # Helios has no power samples: the TDP model, and it says so
    teams = dict(query(warehouse, 'SELECT "ResourceId", any_value("x_Team") FROM cost_line_items GROUP BY 1'))
    assert teams["vchbv-n0"] == "speech" and teams["vchbv-n1"] == "team-vchbv" and teams["vc3sl-n7"] == "team-vc3sl"
    assert query(warehouse, 'SELECT DISTINCT "x_GpuModel", "ProviderName" FROM cost_line_items') == [
        ("V100-16GB", "onprem")
    ]


def test_rerun_is_skipped_and_new_metrics_recost_only_their_days(loaded, warehouse, tmp_path):
    before = table_digest(warehouse, "cost_line_items")
    again = run_source(hd.registry(), warehouse, "earth", "onprem", hd.cluster_options())
    assert again.status == "skipped" and table_digest(warehouse, "cost_line_items") == before
    first_day_runs = query(
        warehouse,
        """SELECT DISTINCT "x_IngestRunId" FROM cost_line_items
                                         WHERE "ChargePeriodStart" < ?""",
        [hd.START + DAY],
    )
    hd.load_metrics(warehouse, tmp_path, UNTIL, UNTIL + DAY, run_tag="day3")
    third = run_source(hd.registry(), warehouse, "earth", "onprem", hd.cluster_options())
    assert third.status == "succeeded" and third.rows == 2 * 3 * 64 * 48  # days 2 (its window end moved) and 3
    assert (
        query(
            warehouse,
            """SELECT DISTINCT "x_IngestRunId" FROM cost_line_items
                               WHERE "ChargePeriodStart" < ?""",
            [hd.START + DAY],
        )
        == first_day_runs
    )
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 3 * 2 * 64 * 72
    cheaper = run_source(hd.registry(), warehouse, "earth", "onprem", hd.cluster_options(energy_usd_per_kwh=0.05))
    assert cheaper.status == "succeeded" and cheaper.rows == 3 * 2 * 64 * 72  # a config change re-costs every day


def test_a_time_range_recosts_only_the_days_it_touches(loaded, warehouse):
    before = table_digest(warehouse, "cost_line_items", exclude=("x_IngestRunId",))
    ranged = run_source(
        hd.registry(),
        warehouse,
        "earth",
        "onprem",
        hd.cluster_options(),
        since=hd.START + DAY + timedelta(hours=5),
        until=UNTIL,
    )
    assert ranged.status == "succeeded" and ranged.rows == 3 * 128 * 24  # the second day, whole
    assert table_digest(warehouse, "cost_line_items", exclude=("x_IngestRunId",)) == before
    assert run_source(hd.registry(), warehouse, "earth", "onprem", hd.cluster_options()).status == "skipped"


def _failed_with(warehouse, options, key: str, words: str) -> None:
    result = run_source(hd.registry(), warehouse, "earth", "onprem", options)
    assert result.status == "failed" and result.error is not None, result
    assert key in result.error and words in result.error, result.error
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 0


def test_config_errors_name_the_key(warehouse, tmp_path):
    hd.load_metrics(warehouse, tmp_path, hd.START, hd.START + DAY)
    groups = hd.cluster_options()["node_groups"]
    no_server = [{k: v for k, v in groups[0].items() if k != "server_price_usd"}, groups[1]]
    _failed_with(
        warehouse,
        hd.cluster_options(node_groups=no_server),
        "sources.earth.node_groups[0].server_price_usd",
        "missing price",
    )
    _failed_with(warehouse, hd.cluster_options(amortisation_years=0), "sources.earth.amortisation_years", "more than 0")
    zero_months = [groups[0], {**groups[1], "amortisation_months": 0}]
    _failed_with(
        warehouse,
        hd.cluster_options(node_groups=zero_months),
        "sources.earth.node_groups[1].amortisation_months",
        "more than 0",
    )
    unknown = [groups[0], {**groups[1], "gpu_model": "V100M32"}]  # Alibaba's own spelling: not a model we know
    _failed_with(
        warehouse,
        hd.cluster_options(node_groups=unknown),
        "sources.earth.node_groups[1].gpu_model",
        "unknown GPU model 'V100M32'",
    )
    _failed_with(
        warehouse, hd.cluster_options(node_teams={"nowhere": "x"}), "sources.earth.node_teams.nowhere", "no node group"
    )


def test_the_cli_reports_config_errors_with_the_key(tmp_path):
    base = [
        "[warehouse]",
        f'path = "{tmp_path / "wh.duckdb"}"',
        "[sources.dc1]",
        'type = "onprem"',
        "pue = 1.3",
        "amortisation_years = 0",
        "[[sources.dc1.node_groups]]",
        'name = "a100"',
        'nodes = ["n1"]',
        'gpu_model = "A100-SXM4-80GB"',
        "gpus_per_node = 8",
        "server_price_usd = 40000",
    ]
    missing = tmp_path / "missing.toml"
    missing.write_text("\n".join(base) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(missing), "ingest"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "sources.dc1.energy_usd_per_kwh" in run.stderr, run.stderr
    zero = tmp_path / "zero.toml"
    zero.write_text("\n".join(base[:5] + ["energy_usd_per_kwh = 0.1"] + base[5:]) + "\n")
    con_path = tmp_path / "wh.duckdb"
    from gpufinops.warehouse import db

    with db.writer(con_path) as con:  # one metrics hour for the node, so there is a window to cost
        con.execute(
            "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, host, util_mean) VALUES "
            "('2026-01-01 00:00:00+00', 'GPU-1', 'n1', 50)"
        ).fetchall()
    run = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(zero), "ingest"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "sources.dc1.amortisation_years: must be more than 0" in run.stderr, run.stderr


def alibaba_inventory() -> list[dict]:
    with open(DATA / "onprem" / "pai_machine_spec.header") as f:
        header = f.read().strip().split(",")
    with open(DATA / "onprem" / "pai_machine_spec.csv", newline="") as f:
        return [dict(zip(header, row)) for row in csv.reader(f)]


ALIBABA_MODELS = {
    "P100": "Tesla P100-PCIE-16GB",
    "T4": "Tesla T4",
    "V100": "Tesla V100-SXM2-16GB",
    "V100M32": "Tesla V100-SXM2-32GB",
}
SERVER_USD = {"P100": 9000, "T4": 8000, "V100": 30000, "V100M32": 32000}


def alibaba_options(types=ALIBABA_MODELS) -> dict:
    groups: dict[tuple[str, int], list[str]] = defaultdict(list)
    for m in alibaba_inventory():
        if int(m["cap_gpu"]) > 0:
            groups[(m["gpu_type"], int(m["cap_gpu"]))].append(m["machine"])
    return {
        "pue": 1.2,
        "energy_usd_per_kwh": 0.08,
        "amortisation_months": 36,
        "host_power_w": 600,
        "node_groups": [
            {
                "name": f"{t.lower()}x{g}",
                "nodes": nodes,
                "gpu_model": types.get(t, t),
                "gpus_per_node": g,
                "server_price_usd": SERVER_USD.get(t, 10000),
            }
            for (t, g), nodes in sorted(groups.items())
        ],
    }


def _specs():
    with open(hd.SPECS_CSV, newline="") as f:
        # an empty figure (a GPU with no public TDP or list price) is None, as load_gpu_specs gives it
        return specs_from_rows(
            [
                (
                    r["gpu_model"],
                    float(r["tdp_w"]) if r["tdp_w"] else None,
                    Decimal(r["list_price_usd"]) if r["list_price_usd"] else None,
                )
                for r in csv.DictReader(f)
            ]
        )


def test_alibaba_fleet_hour_at_idle_equals_an_independent_calculation():
    inventory = [m for m in alibaba_inventory() if m["gpu_type"] in ALIBABA_MODELS]
    options = alibaba_options()
    options["node_groups"] = [g for g in options["node_groups"] if not g["name"].startswith("misc")]
    cluster = parse_cluster("pai", options, _specs())
    assert sum(len(g.nodes) * g.gpus_per_node for g in cluster.groups) == sum(int(m["cap_gpu"]) for m in inventory)
    assert Counter(g.gpu_model for g in cluster.groups) == Counter({"P100": 1, "T4": 1, "V100-16GB": 1, "V100-32GB": 1})
    q = Decimal("1E-10")
    expected = Decimal(0)
    for m in inventory:
        row = hd.spec({"P100": "P100", "T4": "T4", "V100": "V100-16GB", "V100M32": "V100-32GB"}[m["gpu_type"]])
        n, tdp = int(m["cap_gpu"]), Decimal(row["tdp_w"])
        hardware = ((Decimal(row["list_price_usd"]) + Decimal(SERVER_USD[m["gpu_type"]]) / n) / (36 * 730)).quantize(q)
        energy = ((tdp / 10 + Decimal(600) / n) / 1000 * Decimal("1.2") * Decimal("0.08")).quantize(q)
        expected += n * (hardware + energy)  # no metrics in the hour: the idle draw
    got = sum(len(g.nodes) * g.gpus_per_node * hourly_gpu_cost(g, None, None).total for g in cluster.groups)
    assert got == expected


def test_alibaba_misc_machines_are_an_unknown_model_named_by_key():
    with pytest.raises(OnpremConfigError, match=r"sources\.pai\.node_groups\[0\]\.gpu_model: unknown GPU model 'MISC'"):
        parse_cluster("pai", alibaba_options(), _specs())


def test_measured_power_wins_over_the_tdp_model():
    cluster = parse_cluster("earth", hd.cluster_options(), _specs())
    group = cluster.groups[0]
    measured = hourly_gpu_cost(group, Decimal("50"), Decimal("212.34"))
    modelled = hourly_gpu_cost(group, Decimal("50"), None)
    assert measured.power_basis == "measured" and modelled.power_basis == "tdp_model"
    q = Decimal("1E-10")
    assert measured.energy == ((Decimal("212.34") + Decimal(150)) / 1000 * Decimal("1.4") * Decimal("0.11")).quantize(q)
    assert modelled.power_w == Decimal(30) + Decimal(270) / 2
    assert measured.hardware == modelled.hardware and json.dumps(str(measured.total))
