"""gpu_type: the rules that must never break (a target fits and is offered in the region), the fleet
regression against the spec-ratio baseline, unpriced and thin evidence, stable ids."""

from __future__ import annotations

import math
import random
from decimal import Decimal

import duckdb
import polars as pl
import pytest

from gpufinops.models import features, gpu_type
from gpufinops.models.recommendation import stable_id
from tests.rightsizing_fleet import Machine, build, offer

GCP = "Google Cloud"
OFFERS = [
    offer("a2-ultragpu-1g", "A100-80GB", 1, "5.0688", "us-central1", "gcp"),
    offer("a2-highgpu-1g", "A100-40GB", 1, "3.6734", "us-central1", "gcp"),
    offer("g2-standard-4", "L4", 1, "0.7068", "us-central1", "gcp"),
    offer("g2-standard-4", "L4", 1, "0.7429", "europe-west4", "gcp"),
    offer("a2-ultragpu-1g", "A100-80GB", 1, "5.0688", "europe-west4", "gcp"),
]
SERVE = {"workload": "online_inference", "precision": "fp16"}


def vm(rid, it, model, usd, util, mem, region="us-central1", **kw) -> Machine:
    return Machine(rid, it, model, 1, usd, [util], [mem], provider=GCP, region=region, tags=dict(SERVE), **kw)


def peers() -> list[Machine]:
    """The same serving workload measured on three GPU models: what the regression learns from."""
    return [
        vm(f"peer-{model}-{i}", it, model, usd, 30 + 5 * i, 12, swing=1.0)
        for model, it, usd in (
            ("L4", "g2-standard-4", "0.7068"),
            ("A100-40GB", "a2-highgpu-1g", "3.6734"),
            ("A100-80GB", "a2-ultragpu-1g", "5.0688"),
        )
        for i in range(2)
    ]


def run(path, machines, offers=OFFERS, settings=None, recommend=gpu_type.recommend):
    """(recommendations, withheld, the fitted model, the GPU specs) of ``recommend`` (gpu_type's rules, or
    quantization's) over ``machines`` with the model fitted on them."""
    build(path, machines, offers)
    with duckdb.connect(str(path), read_only=True) as con:
        s = features.settings_of(settings)
        res, spec = features.resources(con, s), features.specs(con)
        model = gpu_type.fit(gpu_type.observations(res, spec, s.idle_util_pct))
        recs, withheld = recommend(res, features.catalogue(con), spec, model, s)
        return recs, withheld, model, spec


def test_small_model_on_a100_80gb_moves_to_l4_in_its_region(warehouse):
    recs, _, model, _ = run(warehouse, [*peers(), vm("llm7b", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 17)])
    mine = [r for r in recs if r.resource_id == "llm7b"]
    assert len(mine) == 1 and model.measured
    rec = mine[0]
    assert rec.proposed["gpu_model"] == "L4" and rec.proposed["instance_type"] == "g2-standard-4"
    monthly = Decimal("5.0688") * 24 * Decimal("30.4375")
    assert rec.monthly_savings_usd == (monthly * (1 - Decimal("0.7068") / Decimal("5.0688"))).quantize(Decimal("0.01"))
    ev = rec.evidence
    assert ev["mem_needed_gib"] <= ev["target_usable_memory_gib"]
    assert ev["predicted_target_util_p95"] <= 60 and ev["throughput_model"] == model.name
    maes = ev["throughput_predictor_mae_pct"]  # the predictor used is named beside all three errors
    assert set(maes) == set(gpu_type.PREDICTORS) and maes[model.name] == min(maes.values())
    assert rec.id == stable_id("gpu_type", GCP, "llm7b")


def test_memory_that_does_not_fit_is_never_moved(warehouse):
    machines = [
        *peers(),
        vm("mid", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 21),
        vm("big", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 35),
    ]
    recs = {r.resource_id: r for r in run(warehouse, machines)[0]}
    assert recs["mid"].proposed["gpu_model"] == "A100-40GB"  # 21 GiB × 1.2 > L4's usable 22.3 GiB
    assert "big" not in recs  # 35 GiB × 1.2 > A100-40GB's usable 37.2 GiB


def test_a_gpu_not_offered_in_the_region_is_never_proposed(warehouse):
    offers = [o for o in OFFERS if not (o["gpu_model"] == "L4" and o["region"] == "us-central1")]
    recs, _, _, _ = run(warehouse, [*peers(), vm("llm7b", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 17)], offers)
    # the bills still show g2-standard-4 in us-central1 (the peers run there): that offer stands …
    moved = [r for r in recs if r.resource_id == "llm7b"]
    assert moved and moved[0].evidence["target_price_source"] == "billed"
    # … but a resource in a region where no L4 is billed or catalogued gets none
    lone = vm("tokyo", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 17, region="asia-northeast1")
    recs, _, _, _ = run(
        warehouse.with_name("b.duckdb"),
        [*peers(), lone],
        offers + [offer("a2-ultragpu-1g", "A100-80GB", 1, "5.8", "asia-northeast1", "gcp")],
    )
    assert not [r for r in recs if r.resource_id == "tokyo"]


def test_unpriced_current_config_is_withheld_not_zero(warehouse):
    odd = vm("odd", "a9-custom-1g", "A100-80GB", "4.00", 20, 17)
    odd.usd_per_hour = "0"  # no list price on the bill, none in the catalogue
    recs, withheld, _, _ = run(warehouse, [*peers(), odd])
    assert not [r for r in recs if r.resource_id == "odd"]
    assert any(w.resource_id == "odd" and w.reason == "unpriced" and w.detail.startswith("unpriced") for w in withheld)


def test_thin_evidence_is_withheld(warehouse):
    recs, withheld, _, _ = run(
        warehouse, [*peers(), vm("new", "a2-ultragpu-1g", "A100-80GB", "5.0688", 20, 17, days=3)]
    )
    assert not [r for r in recs if r.resource_id == "new"]
    (w,) = [w for w in withheld if w.resource_id == "new"]
    assert w.reason == "short_history" and "measured days" in w.detail  # billed 3 days: 4 more needed
    assert w.source_hint == "4 more days of history"


def test_regression_learns_the_fleet_scaling_and_beats_the_baseline():
    """Observations made with a known law (y = x · r_flops^0.3 · r_bw^0.2) on GPU pairs: the fitted model
    predicts a pair it never saw far better than the fixed spec-ratio scaling."""
    noise = random.Random(3)
    model = gpu_type.fit(_pairs(lambda x, lf, lb: x * math.exp(0.3 * lf + 0.2 * lb) * noise.uniform(0.97, 1.03), 3))
    q = model.quality
    assert model.name == "fleet_regression" and q["regression_mae_pct"] < q["spec_ratio_mae_pct"] / 2
    assert q["regression_mae_pct"] < q["no_change_mae_pct"] and q["predictor"] == "fleet_regression"
    assert model.predict(20, (1.0, 1.0)) == pytest.approx(20 * math.exp(0.5), rel=0.1)


def _pairs(law, seed=5) -> pl.DataFrame:
    """Quantile pairs over 8 GPU pairs whose target utilisation follows ``law(x, lf, lb)``."""
    rng = random.Random(seed)
    rows = []
    for pair in range(8):
        lf, lb = rng.uniform(-1.2, 1.5), rng.uniform(-1.5, 1.8)
        rows += [
            {
                "x": float(x),
                "y": law(x, lf, lb),
                "lf": lf,
                "lb": lb,
                "sm": None,
                "tensor": None,
                "group": f"pair{pair}",
                "workload": "w",
            }
            for x in (5, 10, 20, 30, 40, 50)
        ]
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    "law, chosen",
    [
        (lambda x, lf, lb: float(x), "no_change_baseline"),  # the demo's law
        (lambda x, lf, lb: x * math.exp((lf + lb) / 2), "spec_ratio_baseline"),  # the spec sheet's law
        (lambda x, lf, lb: x * math.exp(0.3 * lf + 0.2 * lb) * (1 + 0.01 * math.sin(x)), "fleet_regression"),
    ],
)
def test_the_predictor_with_the_lowest_held_out_error_is_used_and_the_regression_only_when_it_beats_both(law, chosen):
    """Selection: where the regression loses to a baseline on held-out GPU pairs, the better baseline
    predicts; where it beats both, the regression does."""
    model = gpu_type.fit(_pairs(law))
    maes = model.maes()
    assert model.name == chosen and model.quality["predictor"] == chosen
    assert maes[chosen] == min(maes.values())
    if chosen != "fleet_regression":
        assert maes["fleet_regression"] >= maes[chosen]
    ratios = (0.7, 0.4)
    expected = {
        "no_change_baseline": 20.0,
        "spec_ratio_baseline": gpu_type.baseline(20, ratios),
        "fleet_regression": model.regression(20, ratios),
    }[chosen]
    assert model.predict(20, ratios) == pytest.approx(expected)


def test_selection_rule_prefers_a_baseline_on_a_tie():
    pick = gpu_type.select_predictor
    assert (
        pick({"fleet_regression": 3.0, "spec_ratio_baseline": 3.0, "no_change_baseline": 4.0}) == "spec_ratio_baseline"
    )
    assert (
        pick({"fleet_regression": 3.0, "spec_ratio_baseline": 5.0, "no_change_baseline": 3.0}) == "no_change_baseline"
    )
    assert pick({"fleet_regression": 2.9, "spec_ratio_baseline": 5.0, "no_change_baseline": 3.0}) == "fleet_regression"


def test_wrong_verdicts_on_held_out_pairs_come_before_the_error():
    """The findings a predictor yields decide: fewer wrong "fits under the ceiling" verdicts wins even
    with a larger MAE; the MAE only breaks ties."""
    pick = gpu_type.select_predictor
    maes = {"fleet_regression": 5.0, "spec_ratio_baseline": 3.0, "no_change_baseline": 4.0}
    assert (
        pick(maes, {"fleet_regression": 0.1, "spec_ratio_baseline": 0.2, "no_change_baseline": 0.3})
        == "fleet_regression"
    )
    assert (
        pick(maes, {"fleet_regression": 0.2, "spec_ratio_baseline": 0.2, "no_change_baseline": 0.1})
        == "no_change_baseline"
    )
    assert pick(maes, dict.fromkeys(maes, 0.1)) == "spec_ratio_baseline"


def test_too_few_observations_fall_back_to_the_spec_ratio_baseline():
    model = gpu_type.fit(pl.DataFrame())
    assert model.name == "spec_ratio_baseline" and not model.measured
    assert model.maes() == dict.fromkeys(gpu_type.PREDICTORS) and "too few" in model.quality["reason"]
    assert model.predict(20, (math.log(2), math.log(2))) == pytest.approx(40)


def test_random_fleets_never_get_a_target_that_does_not_fit_or_is_not_offered(warehouse):
    """A property over random fleets and catalogues: every proposal is offered in the resource's own
    region at the same GPU count, fits its memory with headroom, stays under the utilisation ceiling
    and is cheaper."""
    rng = random.Random(11)
    gpus = {"A100-80GB": ("a2-ultragpu-1g", 5.07), "A100-40GB": ("a2-highgpu-1g", 3.67), "L4": ("g2-standard-4", 0.71)}
    regions = ["us-central1", "europe-west4", "asia-east1"]
    offers = [
        offer(it, model, 1, f"{usd * rng.uniform(0.9, 1.1):.4f}", region, "gcp")
        for region in regions
        for model, (it, usd) in gpus.items()
        if rng.random() < 0.7
    ]
    machines = []
    for i in range(24):
        model = rng.choice(list(gpus))
        it, usd = gpus[model]
        machines.append(
            vm(
                f"r{i}",
                it,
                model,
                f"{usd:.4f}",
                rng.uniform(6, 70),
                rng.uniform(2, {"L4": 20, "A100-40GB": 38, "A100-80GB": 75}[model]),
                region=rng.choice(regions),
                swing=rng.uniform(0, 1),
            )
        )
    recs, _, _, spec = run(warehouse, machines, offers)
    by_id = {m.rid: m for m in machines}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        catalogue = features.catalogue(con)
    assert recs, "the random fleet should hold at least one move"
    for rec in recs:
        m = by_id[rec.resource_id]
        offered = catalogue.filter(
            (pl.col("region") == m.region)
            & (pl.col("instance_type") == rec.proposed["instance_type"])
            & (pl.col("gpu_model") == rec.proposed["gpu_model"])
            & (pl.col("gpu_count") == 1)
        )
        assert offered.height == 1, (rec.resource_id, m.region, rec.proposed)
        usable = spec[rec.proposed["gpu_model"]]["memory_gib"] * gpu_type.USABLE_MEMORY
        assert max(m.mem_gib) * 1.2 <= usable + 1e-6
        assert rec.evidence["predicted_target_util_p95"] <= 60
        assert rec.proposed["monthly_cost_usd"] < rec.current["monthly_cost_usd"] and rec.monthly_savings_usd > 0
