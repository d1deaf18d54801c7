"""gpu_count on real DuckDB warehouses: spare GPUs found by per-GPU p95, priced as the provider bills
(a smaller type of the same GPU, else a cheaper fitting GPU, else packing — conditional, never a per-GPU
saving of an instance billed whole), thin evidence withheld, ids stable."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import duckdb
import pytest

from gpufinops.models import features, gpu_count
from gpufinops.models.registry import KINDS
from tests.rightsizing_fleet import Machine, build, offer

OFFERS = [
    offer("g5.xlarge", "A10G", 1, "1.006"),
    offer("g5.12xlarge", "A10G", 4, "5.672"),
    offer("g5.48xlarge", "A10G", 8, "16.288"),
    offer("g5.12xlarge", "A10G", 4, "5.672", region="us-west-2"),
]


def eight(rid: str, busy: int, **kw) -> Machine:
    return Machine(
        rid,
        "g5.48xlarge",
        "A10G",
        8,
        "16.288",
        [80.0] * busy + [2.0] * (8 - busy),
        [18.0] * busy + [0.3] * (8 - busy),
        **kw,
    )


def recommend(path, machines, offers=OFFERS, settings=None):
    build(path, machines, offers)
    with duckdb.connect(str(path), read_only=True) as con:
        s = features.settings_of(settings)
        start = features.window_start(con, s.lookback_days)
        from gpufinops.warehouse import queries

        return gpu_count.recommend(
            features.resources(con, s), queries.rightsizing_gpus(con, start), features.catalogue(con), s
        )


def test_two_busy_of_eight_move_to_the_smaller_type_at_its_list_price(warehouse):
    recs, withheld = recommend(warehouse, [eight("i-two", 2), eight("i-all", 8), eight("i-none", 0)])
    assert [r.resource_id for r in recs] == ["i-two"] and withheld == []
    rec = recs[0]
    # $16.288/h over 14 days as a 30.4375-day month; g5.12xlarge is billed $5.672/h whatever runs on it
    monthly = Decimal("16.288") * 24 * Decimal("30.4375")
    assert rec.monthly_savings_usd == (monthly * (1 - Decimal("5.672") / Decimal("16.288"))).quantize(Decimal("0.01"))
    assert rec.current["gpu_count"] == 8 and rec.proposed["gpu_count"] == 4  # the type's GPUs, not 2
    assert rec.proposed["instance_type"] == "g5.12xlarge"  # the cheapest A10G type in us-east-1 with ≥ 2
    assert rec.evidence["busy_gpus"] == 2 and rec.evidence["window_days"] == 14
    assert rec.evidence["route"] == "smaller_same_gpu" and rec.evidence["conditional"] is False
    assert rec.kind in KINDS and rec.provider == "aws" and 0.8 <= rec.confidence <= 1.0
    assert "stay free" in rec.risk  # 4 GPUs for a 2-GPU job


def test_without_a_smaller_type_a_cheaper_fitting_gpu_is_proposed(warehouse):
    m = eight("i-west", 2, region="us-west-2")
    offers = [
        offer("g5.48xlarge", "A10G", 8, "16.288", region="us-west-2"),
        offer("g6e.12xlarge", "L40S", 4, "10.49264", region="us-west-2"),
    ]
    recs, _ = recommend(warehouse, [m], offers=offers)
    (rec,) = recs
    assert rec.evidence["route"] == "other_gpu"
    assert (rec.proposed["instance_type"], rec.proposed["gpu_model"], rec.proposed["gpu_count"]) == (
        "g6e.12xlarge",
        "L40S",
        4,
    )
    monthly = Decimal("16.288") * 24 * Decimal("30.4375")
    assert rec.monthly_savings_usd == (monthly * (1 - Decimal("10.49264") / Decimal("16.288"))).quantize(
        Decimal("0.01")
    )


def test_an_idle_gpu_holding_memory_is_not_spare(warehouse):
    m = eight("i-shard", 2)
    m.mem_gib = [18.0] * 8  # every GPU holds a model shard
    recs, _ = recommend(warehouse, [m])
    assert recs == []


def test_thin_evidence_is_withheld_with_a_reason(warehouse):
    recs, withheld = recommend(warehouse, [eight("i-short", 2, days=4), eight("i-gappy", 2, measured=0.55)])
    assert recs == []
    reasons = {w.resource_id: w.detail for w in withheld}
    assert "measured days" in reasons["i-short"] and "cover" in reasons["i-gappy"]


def test_with_nothing_smaller_offered_packing_is_proposed_as_a_conditional_saving(warehouse):
    """AWS bills a g5.48xlarge whole: 6 idle GPUs save nothing unless other work moves onto them."""
    m = eight("i-west", 2, region="us-west-2")
    recs, _ = recommend(warehouse, [m], offers=[offer("g5.xlarge", "A10G", 1, "1.006")])  # us-east-1 only
    (rec,) = recs
    assert rec.evidence["route"] == "pack" and rec.evidence["conditional"] is True
    assert rec.proposed["instance_type"] == "g5.48xlarge" and rec.proposed["gpu_count"] == 8
    assert "billed whole" in rec.risk and "pack 6 GPUs" in rec.proposed["action"]
    from gpufinops.models import plans

    (planned,) = plans.reconcile(recs)
    assert planned.plan == "alternative" and plans.total([planned]) == 0  # never in a total


def test_thresholds_are_configurable(warehouse):
    m = eight("i-light", 2)
    m.utils = [80.0, 80.0] + [15.0] * 6  # spare under a 20 % threshold, busy under the default 10 %
    assert recommend(warehouse, [m])[0] == []
    recs, _ = recommend(warehouse.with_name("b.duckdb"), [m], settings={"spare_gpu_util_pct": 20})
    assert recs and recs[0].evidence["busy_gpus"] == 2


def test_ids_are_stable_across_runs(warehouse):
    first, _ = recommend(warehouse, [eight("i-two", 2)])
    second, _ = recommend(warehouse.with_name("again.duckdb"), [eight("i-two", 2)])
    assert first[0].id == second[0].id and first[0].id.startswith("gpu_count-")


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match=r"\[models\] lookback_days"):
        features.RightsizingSettings.from_config({"lookback_days": "two weeks"})
    with pytest.raises(ValueError, match="memory_headroom"):
        features.RightsizingSettings.from_config({"memory_headroom": 0.5})


def test_recommend_reads_the_models_section_and_rejects_bad_values(warehouse, capsys):
    from gpufinops.interfaces import cli

    build(warehouse, [eight("i-light", 2)], OFFERS)
    config = warehouse.parent / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n\n[models]\nmemory_headroom = 0.5\n')
    assert cli.main(["--config", str(config), "recommend"]) == 2
    assert "memory_headroom" in capsys.readouterr().err
    for bad, named in (
        ("spare_gpu_util = 1", "spare_gpu_util: unknown key"),
        ("spot_max_share = -1", "spot_max_share"),
        ("commit_baseline_percentile = 200", "commit_baseline_percentile"),
    ):
        config.write_text(f'[warehouse]\npath = "{warehouse}"\n\n[models]\n{bad}\n')
        assert cli.main(["--config", str(config), "recommend"]) == 2  # every model's keys, and typos
        assert named in capsys.readouterr().err
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n\n[models]\nspare_gpu_util_pct = 1\n')
    assert cli.main(["--config", str(config), "recommend", "--kind", "gpu_count"]) == 0
    assert "no recommendations" in capsys.readouterr().out  # 2 % is not spare under a 1 % threshold
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n')
    assert cli.main(["--config", str(config), "recommend", "--kind", "gpu_count", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (
        len(rows) == 1 and "gpu_count 8 → 4" in rows[0]["change"]
    )  # onto a g5.12xlarge, the smallest A10G type that holds 2
