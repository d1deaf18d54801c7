"""carbon_hourly: measured GPU energy × node model × PUE × grid intensity, to the gram.

Each expected figure is recomputed here from the fixture's known power, the published PUE and the
vendored codecarbon files read directly (not through derived/carbon_data.py).
"""

from __future__ import annotations

import csv
import json
import math

import pytest

from gpufinops.derived import allocation, carbon, carbon_data
from gpufinops.derived.carbon_settings import CarbonSettings, store
from gpufinops.warehouse import db, domains
from tests.carbon_fleet import build, gpu, line, pod

DATA = carbon_data.DATA


def egrid(state: str) -> float:
    raw = json.loads((DATA / "codecarbon_usa_emissions.json").read_text())
    return raw[state]["emissions"] * 0.45359237  # lbs/MWh -> g/kWh


def gcp(region: str) -> float:
    with (DATA / "codecarbon_impact.csv").open(encoding="utf-8-sig") as fh:
        return next(float(r["impact"]) for r in csv.DictReader(fh) if r["region"] == region)


def grams(kg: float) -> int:
    return round(kg * 1000)


def test_kg_co2e_equals_an_independent_recomputation_to_the_gram(warehouse):
    with db.writer(warehouse) as con:
        rows = build(con)
    p1 = next(r for r in rows if r["pod"] == "p1")
    expected_kwh = 0.300 * (1 + 0.3) * 1.15  # GPU 300 W for the hour, node 30 % of it, AWS PUE 1.15
    assert p1["kwh"] == pytest.approx(expected_kwh, rel=1e-12)
    assert grams(p1["kg_co2e"]) == grams(expected_kwh * egrid("virginia") / 1000)
    assert p1["energy_basis"] == "measured" and "eGRID2023 virginia" in p1["intensity_source"]
    p2 = next(r for r in rows if r["pod"] == "p2")
    assert p2["gpu_kwh"] == pytest.approx(0.200 * 0.5)  # half of GPU-B's hour
    g = next(r for r in rows if r["resource_id"] == "i-gcp")
    assert g["namespace"] is None and g["allocation_basis"] == "resource"
    assert grams(g["kg_co2e"]) == grams(0.250 * 1.3 * 1.09 * gcp("us-central1") / 1000)
    assert all(not (isinstance(r[k], float) and math.isnan(r[k])) for r in rows for k in r)


def test_rows_of_a_resource_hour_sum_to_its_measured_energy(warehouse):
    for mode in ("show", "spread"):
        with db.writer(warehouse) as con:
            con.execute("DELETE FROM carbon_hourly")
            con.execute("DELETE FROM gpu_allocation_hourly")
            for table in ("cost_line_items", "gpu_metrics_hourly", "gpu_workloads_hourly"):
                con.execute(f"DELETE FROM {table}")
            rows = build(con, unallocated=mode)
        for hour in (0, 1):
            got = sum(r["gpu_kwh"] for r in rows if r["resource_id"] == "i-aws" and r["hour"].hour == hour)
            assert got == pytest.approx(0.5, rel=1e-12), (mode, hour)


def test_hours_without_power_are_withheld_not_guessed(warehouse):
    with db.writer(warehouse) as con:
        rows = build(con)
    dark = [r for r in rows if r["resource_id"] == "i-dark"]
    assert len(dark) == 1 and dark[0]["energy_basis"] == "withheld"
    assert dark[0]["kg_co2e"] is None and dark[0]["gpu_hours"] == 8


def test_missing_region_gets_the_stated_default(warehouse):
    with db.writer(warehouse) as con:
        rows = build(con)
    n = next(r for r in rows if r["resource_id"] == "i-noregion")
    world = json.loads((DATA / "codecarbon_carbon_intensity_per_source.json").read_text())["world_average"]
    assert n["grid_g_co2e_per_kwh"] == world == 475
    assert "world average" in n["intensity_source"] and "no region" in n["intensity_source"]
    with db.writer(warehouse) as con:
        store(con, CarbonSettings.from_config({"default_grid_g_co2e_per_kwh": 400}))
        carbon.recompute_all(con)
        value, source = con.execute(
            "SELECT grid_g_co2e_per_kwh, intensity_source FROM carbon_hourly WHERE resource_id = 'i-noregion'"
        ).fetchall()[0]
    assert value == 400 and "default_grid_g_co2e_per_kwh" in source


def test_config_overrides_region_pue_and_node_model(warehouse):
    settings = CarbonSettings.from_config(
        {
            "grid": {"aws/us-east-1": 100, "gcp/us-central1": "FRA"},
            "pue": {"aws": 1.5},
            "node_fraction": 0.0,
            "node_watts": {"p4d.24xlarge": 400},
        }
    )
    with db.writer(warehouse) as con:
        rows = build(con, settings)
    p1 = next(r for r in rows if r["pod"] == "p1")
    # node: 400 W for the node's 2 billed GPUs -> 200 W for the pod's GPU-hour
    assert grams(p1["kg_co2e"]) == grams((0.300 + 0.200) * 1.5 * 100 / 1000)
    assert p1["intensity_source"] == "config [carbon.grid] aws/us-east-1"
    france = json.loads((DATA / "codecarbon_global_energy_mix.json").read_text())["FRA"]["carbon_intensity"]
    g = next(r for r in rows if r["resource_id"] == "i-gcp")
    assert g["grid_g_co2e_per_kwh"] == france


def test_onprem_lines_carry_their_own_pue_and_host_draw(warehouse):
    with db.writer(warehouse) as con:
        line(con, "node-1", 0, "onprem", "dc-a", 1, "ml", json.dumps({"pue": "1.4", "host_w_per_gpu": "50"}))
        gpu(con, "node-1", 0, "GPU-O", 400.0)
        store(con, CarbonSettings.from_config({"grid": {"onprem/dc-a": "DEU"}}))
        carbon.recompute_all(con)
        row = con.execute("SELECT kwh, pue_source, kg_co2e FROM carbon_hourly WHERE resource_id = 'node-1'").fetchall()
    deu = json.loads((DATA / "codecarbon_global_energy_mix.json").read_text())["DEU"]["carbon_intensity"]
    assert row[0][0] == pytest.approx((0.4 + 0.05) * 1.4) and row[0][1] == "onprem source pue"
    assert grams(row[0][2]) == grams((0.4 + 0.05) * 1.4 * deu / 1000)


def test_mig_gpu_energy_is_counted_once(warehouse):
    with db.writer(warehouse) as con:
        line(con, "i-mig", 0, "AWS", "us-east-1", 1, "ml")
        for mig in ("3g.20gb/1", "4g.20gb/2"):
            gpu(con, "i-mig", 0, "GPU-M", 350.0, mig=mig)  # a source that repeats the GPU's draw per slice
        pod(con, 0, "GPU-M", "ml", "a", mig="3g.20gb/1")
        allocation.reallocate_all(con, allocation.AllocationSettings())
        total = con.execute("SELECT sum(gpu_kwh) FROM carbon_hourly WHERE resource_id = 'i-mig'").fetchall()[0][0]
    assert total == pytest.approx(0.350)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -1.0])
def test_bad_power_is_rejected_by_the_validation_layer(value):
    assert domains.reason("gpu_metrics_hourly", "power_mean_w", value) is not None
    assert domains.reason("gpu_metrics_hourly", "power_mean_w", 300.0) is None


@pytest.mark.parametrize(
    "section, key",
    [
        ({"node_fraction": float("nan")}, "node_fraction"),
        ({"pue": {"aws": 0.5}}, "pue.aws"),
        ({"grid": {"aws/x": "Atlantis"}}, "Atlantis"),
        ({"grid": {"noslash": 1}}, "noslash"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_carbon_settings_name_the_key(section, key):
    with pytest.raises(ValueError, match=key):
        CarbonSettings.from_config(section)


def test_settings_round_trip_through_the_warehouse():
    s = CarbonSettings.from_config({"grid": {"aws/us-east-1": "USA/virginia"}, "node_watts": {"x": 10}})
    assert CarbonSettings.from_json(s.to_json()) == s


def test_vendored_codecarbon_files_are_unchanged():
    import hashlib

    text = (DATA / "CODECARBON_SOURCES.md").read_text()
    for name in (
        "codecarbon_impact.csv",
        "codecarbon_global_energy_mix.json",
        "codecarbon_usa_emissions.json",
        "codecarbon_carbon_intensity_per_source.json",
    ):
        digest = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        assert digest in text, name
    assert carbon_data.CODECARBON_VERSION in text


def test_every_region_location_resolves_through_codecarbon():
    for (provider, region), _ in carbon_data.region_locations().items():
        found = carbon_data.intensity(provider, region, {})
        assert "world average" not in found.source, (provider, region)


def test_a_changed_setting_recomputes_the_table(warehouse):
    with db.writer(warehouse) as con:
        build(con)
    assert carbon.configure(warehouse, CarbonSettings.from_config({"pue": {"aws": 2.0}}))
    with db.reader(warehouse) as con:
        pues = {r[0] for r in con.execute("SELECT pue FROM carbon_hourly WHERE provider = 'AWS'").fetchall()}
    assert pues == {2.0}
    assert not carbon.configure(warehouse, CarbonSettings.from_config({"pue": {"aws": 2.0}}))
