"""onprem_vs_cloud on real data: the Helios *Earth* VCs as an on-prem cluster (costed by the
``onprem`` source from their real per-minute occupancy) against real AWS and GCP GPU prices
(tests/data/onprem/cloud_gpu_prices.csv). The cheapest fitting option, the break-even utilisation
and the advice are recomputed here in closed form with Decimal arithmetic."""

from __future__ import annotations

import csv
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

import polars as pl
import pytest

from gpufinops.ingest.core.runner import run_source
from gpufinops.models import onprem_vs_cloud as ovc
from gpufinops.models.recommendation import money
from gpufinops.warehouse import db, queries, recommendation_read
from tests import onprem_data as hd
from tests.conftest import DATA

UNTIL = hd.START + timedelta(days=2)
HOURS = 48
PRICES = DATA / "onprem" / "cloud_gpu_prices.csv"
OVERHEAD = ovc.OnpremVsCloudParams().spot_overhead


def price_rows() -> list[dict]:
    with open(PRICES, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # price_history keeps $/h at 8 decimals, as a catalogue loader stores it
        hourly = Decimal(r["price"]) / 730 if r["unit"] == "month" else Decimal(r["price"])
        r["usd_per_hour"] = hourly.quantize(Decimal("1E-8"))
    return rows


def load_prices(con) -> None:
    for r in price_rows():
        if r["pricing"] == "on_demand":
            con.execute(
                "INSERT INTO instance_types (provider, region, instance_type, gpu_model, gpu_count, "
                "on_demand_usd_per_hour, source, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, now())",
                [
                    r["provider"],
                    r["region"],
                    r["instance_type"],
                    r["gpu_model"],
                    int(r["gpu_count"]),
                    r["usd_per_hour"],
                    r["origin"],
                ],
            ).fetchall()
        elif r["provider"] == "aws":
            con.execute(
                "INSERT INTO spot_prices VALUES (?, ?, ?, ?, 'Linux/UNIX', '2021-04-01 00:00:00+00', ?)",
                [r["provider"], r["region"], r["region"] + "a", r["instance_type"], r["usd_per_hour"]],
            ).fetchall()
        else:
            con.execute(
                "INSERT INTO price_history VALUES (?, ?, ?, ?, '2026-07-20 00:00:00+00', ?, 'USD', ?, 'test')",
                [r["provider"], r["region"], r["instance_type"], r["pricing"], r["usd_per_hour"], r["origin"]],
            ).fetchall()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ovc")
    path = tmp / "wh" / "gpufinops.duckdb"
    hd.load_metrics(path, tmp, hd.START, UNTIL)
    assert run_source(hd.registry(), path, "earth", "onprem", hd.cluster_options()).status == "succeeded"
    with db.writer(path) as con:
        load_prices(con)
    return path


@pytest.fixture(scope="module")
def recs(warehouse):
    """Every node group's and workload's verdict (the on-prem comparison: facts and findings alike)."""
    with db.writer(warehouse) as con:
        return ovc.analyse_warehouse(con)[2]


def gpu_specs() -> dict[str, tuple[Decimal, Decimal]]:
    with open(hd.SPECS_CSV, newline="") as f:
        return {r["gpu_model"]: (Decimal(r["memory_gib"]), Decimal(r["fp16_tflops"] or 0)) for r in csv.DictReader(f)}


def closed_form(vc: str) -> dict:
    """What the model must find for one VC, from the occupancy, the config figures and the price file."""
    cost, used = Decimal(0), Decimal(0)
    hourly: dict[datetime, list[Decimal]] = defaultdict(list)
    for (_, hour), minutes in hd.busy_minutes(vc, hd.START, UNTIL).items():
        util = (Decimal(minutes * 100) / 60).quantize(Decimal("0.01"))
        cost += sum(hd.expected_gpu_hour(util))
        used += util / 100
        hourly[hour].append(util)
    gpu_hours = 64 * HOURS
    u = used / gpu_hours
    hardware, _, facility = hd.expected_gpu_hour(Decimal(0))
    tdp = Decimal(hd.spec("V100-16GB")["tdp_w"])
    idle, kwh = tdp / 10, Decimal("1.4") * Decimal("0.11") / 1000
    fixed = hardware + facility + (idle + Decimal(1200) / 8) * kwh
    variable = (tdp - idle) * kwh
    specs = gpu_specs()
    need_mem, need_fp16 = specs["V100-16GB"]
    options = []
    for r in price_rows():
        mem, fp16 = specs[r["gpu_model"]]
        if mem < need_mem or fp16 < need_fp16:
            continue  # T4 (65 TFLOPS) and L4 (121) are slower than the V100's 125
        per_gpu = Decimal(str(float(r["usd_per_hour"]))) / int(r["gpu_count"])
        per_used = per_gpu * (1 + OVERHEAD) if r["pricing"] == "spot" else per_gpu
        per_onprem_hour = per_used * u if r["pricing"] in ("on_demand", "spot") else per_gpu
        options.append((per_onprem_hour, per_used, r))
    best = min(options, key=lambda o: o[0])
    pay = min((o for o in options if o[2]["pricing"] in ("on_demand", "spot")), key=lambda o: o[1])
    break_even = fixed / (pay[1] - variable)
    onprem_monthly = cost * 730 / HOURS
    cloud_monthly = best[0] * gpu_hours * 730 / HOURS
    saturated = sum(1 for utils in hourly.values() if sum(utils) / len(utils) >= 90) / len(hourly)
    return {
        "u": u,
        "fixed": fixed,
        "variable": variable,
        "best": best,
        "pay": pay,
        "break_even": break_even,
        "onprem_monthly": onprem_monthly,
        "cloud_monthly": cloud_monthly,
        "saturated": saturated,
        "cost": cost,
        "used": used,
    }


def teams_on(recs, vc: str) -> list[str]:
    return [r.team for r in recs if r.resource_id == f"earth/{vc}" and r.team is not None]


def label(row: dict) -> str:  # the offer as people read it: the provider's name, the pricing's words
    provider = {"aws": "AWS", "gcp": "Google Cloud"}[row["provider"]]
    pricing = {"on_demand": "on-demand", "spot": "spot"}[row["pricing"]]
    return f"{provider} {row['instance_type']} {pricing} ({row['region']})"


@pytest.mark.parametrize("vc", hd.VCS)
def test_cluster_finding_matches_the_closed_form(recs, vc):
    expect = closed_form(vc)
    rec = next(r for r in recs if r.resource_id == f"earth/{vc}" and r.team is None)
    ev = rec.evidence
    assert rec.kind == "onprem_vs_cloud" and rec.provider == "onprem"
    assert ev["cheapest_cloud_option"] == label(expect["best"][2])
    assert ev["break_even_vs"] == label(expect["pay"][2])
    assert ev["break_even_utilisation_pct"] == round(float(expect["break_even"] * 100), 2)
    # at the break-even utilisation the on-prem GPU-hour and the same work in the cloud cost the same
    u_star = expect["break_even"]
    assert expect["fixed"] + expect["variable"] * u_star == pytest.approx(
        expect["pay"][1] * u_star, rel=Decimal("1e-20")
    )
    assert ev["util_mean_pct"] == round(float(expect["u"] * 100), 2)
    assert ev["onprem_cost_per_used_gpu_hour_usd"] == round(float(expect["cost"] / expect["used"]), 6)
    assert ev["tdp_fallback"] is True and "TDP model" in ev["power_note"] and ev["power_basis"] == "tdp_model"
    if expect["cloud_monthly"] < expect["onprem_monthly"]:
        assert ev["pattern"] == "shrink_cluster" and expect["u"] < expect["break_even"]
        whole = money(expect["onprem_monthly"] - expect["cloud_monthly"])
        if len(teams_on(recs, vc)) > 1:  # counted on the workload findings, not twice
            assert rec.monthly_savings_usd == 0 and ev["whole_cluster_monthly_savings_usd"] == whole
        else:
            assert rec.monthly_savings_usd == whole
    else:
        assert ev["pattern"] in ("keep_onprem", "burst_to_spot") and rec.monthly_savings_usd >= 0
        assert (ev["pattern"] == "burst_to_spot") == (
            expect["saturated"] >= 0.05 and ev.get("burst_monthly_usd") is not None
        )
    assert f"break-even at {round(float(expect['break_even'] * 100), 2)}%" in rec.proposed["action"]


def test_real_data_gives_both_answers(recs):
    """vc3sl runs at 67 % and vchbv at 48 % busy: around the V100's break-even against the cheapest cloud GPU."""
    patterns = {r.resource_id: r.evidence["pattern"] for r in recs if r.team is None}
    for vc in hd.VCS:
        expect = closed_form(vc)
        assert (patterns[f"earth/{vc}"] == "shrink_cluster") == (expect["u"] < expect["break_even"])
    assert len(set(patterns.values())) == 2


def test_one_finding_per_workload_with_stable_ids(recs, warehouse):
    teams = sorted((r.resource_id, r.team) for r in recs if r.team is not None)
    assert teams == [
        ("earth/vchbv", "speech"),
        ("earth/vchbv", "team-vchbv"),
    ]  # vc3sl has one team: its cluster finding
    workloads = {r.team: r for r in recs if r.team is not None}
    busy = hd.busy_minutes("vchbv", hd.START, UNTIL)
    speech_util = sum(busy[(g, h)] for g, h in busy if g < 8) / (8 * HOURS * 60)  # node n0: GPUs 0-7
    assert workloads["speech"].evidence["util_mean_pct"] == pytest.approx(speech_util * 100, abs=0.01)
    with db.writer(warehouse) as con:
        again = ovc.analyse_warehouse(con)[2]
    assert [r.id for r in again] == [r.id for r in recs] and len({r.id for r in recs}) == len(recs)
    for r in recs:
        assert list(r.to_dict()) == list(recommendation_read.FIELDS)  # the one read model's fields


def test_offers_query_reads_every_catalogue(warehouse):
    with db.reader(warehouse) as con:
        offers = queries.cloud_gpu_offers(con)
    assert offers.height == len(price_rows())
    origins = dict(offers.group_by("pricing").agg(pl.col("origin").unique().sort()).iter_rows())
    assert origins["spot"] == ["price_history", "spot_prices"] and origins["commit_3y"] == ["price_history"]


def _p3_rows(nodes=(0, 7)) -> tuple[dict, list[dict]]:
    price = next(r for r in price_rows() if r["instance_type"] == "p3.16xlarge" and r["pricing"] == "on_demand")
    busy = hd.busy_minutes("vchbv", hd.START, UNTIL)
    rows = []
    for node in nodes:
        for hour in sorted({h for _, h in busy}):
            util = sum(busy[(g, hour)] for g in range(8 * node, 8 * node + 8)) * 100 / (60 * 8)
            rows.append(
                {
                    "resource_id": f"i-vchbv{node}",
                    "hour": hour,
                    "provider": "AWS",
                    "team": "vision",
                    "region": "us-east-1",
                    "instance_type": "p3.16xlarge",
                    "gpu_model": "V100-16GB",
                    "gpu_count": 8,
                    "pricing_category": "Standard",
                    "effective_cost": Decimal(price["price"]),
                    "util_mean": util,
                }
            )
    return price, rows


def test_zero_saving_verdicts_are_facts_not_recommendations(warehouse):
    with db.writer(warehouse) as con:
        found, _, comparison = ovc.analyse_warehouse(con)
    assert all(r.monthly_savings_usd > 0 for r in found)
    keep = [r for r in comparison if r.evidence["pattern"] == "keep_onprem" or r.monthly_savings_usd == 0]
    assert keep and not {r.id for r in keep} & {r.id for r in found}


def test_repatriation_must_fit_the_groups_free_capacity(warehouse):
    """Moves onto an on-prem group are allocated against its free GPUs at the target utilisation, best
    saving first; what does not fit is withheld naming the group, never proposed."""
    from gpufinops.models import repatriation

    _, rows = _p3_rows(nodes=(0, 1, 2, 3, 7))
    with db.reader(warehouse) as con:
        usage, specs = queries.onprem_gpu_usage(con), ovc.gpu_specs(con)
    groups = ovc._group_rows(usage)
    for target in (0.3, 0.85, 1.0):
        params = ovc.OnpremVsCloudParams(onprem_target_utilisation=target)
        moves, withheld = repatriation.allocate(pl.DataFrame(rows), groups, specs, params)
        free = {f"{g['cluster']}/{g['node_group']}": repatriation.free_gpus(g, target) for g in groups}
        taken: dict[str, int] = {}
        for move in moves:
            group = move.evidence["onprem_option"].split(" ")[0]
            taken[group] = taken.get(group, 0) + move.current["gpu_count"]
        assert all(taken[g] <= free[g] for g in taken), (target, taken, free)
        candidates = repatriation.candidates(pl.DataFrame(rows), groups, specs, params)
        assert len(moves) + len(withheld) == len(candidates)
        assert all(w.reason == "capacity" and "free GPUs" in w.detail for w in withheld)
        assert [m.monthly_savings_usd for m in moves] == sorted((m.monthly_savings_usd for m in moves), reverse=True)
        if target == 0.3:  # both groups are busier than 30 %: nothing fits
            assert moves == [] and len(withheld) == len(candidates) > 0


def test_steady_cloud_load_is_repatriated_when_on_prem_is_cheaper(recs, warehouse):
    """Two 8-GPU nodes' real occupancy, as if they ran on p3.16xlarge at its on-demand price."""
    price, rows = _p3_rows()
    with db.reader(warehouse) as con:
        usage, offers, specs = queries.onprem_gpu_usage(con), queries.cloud_gpu_offers(con), ovc.gpu_specs(con)
    saving = ovc.analyse(usage, offers, specs, pl.DataFrame(rows))[0]  # the findings that save money
    found = {r.resource_id: r for r in saving if r.provider == "aws"}
    expect = closed_form("vchbv")  # the cheapest fitting on-prem group: both are V100 groups, same figures
    per_gpu_hour = Decimal(price["price"]) / 8
    u_star = expect["fixed"] / (per_gpu_hour - expect["variable"])
    for node in (0, 7):
        u = (
            Decimal(str(round(sum(r["util_mean"] for r in rows if r["resource_id"] == f"i-vchbv{node}") / HOURS, 4)))
            / 100
        )
        onprem_hour = expect["fixed"] + expect["variable"] * u
        if u >= u_star and onprem_hour < per_gpu_hour:
            rec = found[f"i-vchbv{node}"]
            assert rec.evidence["pattern"] == "repatriate"
            assert rec.evidence["break_even_utilisation_pct"] == round(float(u_star * 100), 2)
            assert rec.monthly_savings_usd == money((per_gpu_hour - onprem_hour) * 8 * 730)
        else:
            assert f"i-vchbv{node}" not in found
    assert "i-vchbv0" in found  # its GPUs are the VC's first: busy almost every minute
