"""The storage models' rules on plain inputs (no warehouse, no cloud): Google Cloud's PD-SSD → pd-balanced at
the bill's SKU rates, the rates read by meter, the prefix rules refusing a whole bucket, hostile values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gpufinops.ingest.core.spec import OptionProblem
from gpufinops.ingest.storage.options import PrefixRule
from gpufinops.models import checkpoint_lifecycle, storage_orphan, storage_tier
from gpufinops.models.storage_common import StorageInputs, meter_key
from gpufinops.warehouse import domains

NOW = datetime(2026, 11, 1, tzinfo=UTC)
SETTINGS = storage_tier.StorageSettings()


def _disk(**extra) -> dict:
    return {
        "provider": "gcp",
        "region": "us-central1",
        "volume_id": "projects/p/zones/us-central1-a/disks/data",
        "volume_type": "pd-ssd",
        "size_gib": 1000.0,
        "iops": None,
        "throughput_mibps": None,
        "attached_instance_id": "a3-highgpu-vm",
        "last_instance_id": "a3-highgpu-vm",
        "last_instance_type": "a3-highgpu-8g",
        "team": "llm",
        "detached_at": None,
        **extra,
    }


def _hours(iops: float, mibps: float, days: int = 10) -> list[dict]:
    return [
        {
            "hour": NOW - timedelta(hours=h),
            "read_ops": iops * 3600,
            "write_ops": 0.0,
            "read_bytes": mibps * 2**20 * 3600,
            "write_bytes": 0.0,
        }
        for h in range(days * 24)
    ]


def _inputs(**extra) -> StorageInputs:
    rates = {
        ("gcp", "us-central1", "SSD backed PD Capacity"): Decimal("0.17"),
        ("gcp", "us-central1", "Balanced PD Capacity"): Decimal("0.10"),
    }
    return StorageInputs(now=NOW, rates=rates, gpu_types={"a3-highgpu-8g"}, **extra)


def test_a_pd_ssd_disk_within_balanced_performance_moves_to_balanced_at_the_bills_rates():
    found = storage_tier.findings(_inputs(volumes=[_disk()], ops={_disk()["volume_id"]: _hours(2000, 100)}), SETTINGS)
    (rec,) = found.recommendations
    assert rec.proposed["volume_type"] == "pd-balanced" and rec.monthly_savings_usd == Decimal("70.00")
    assert rec.team == "llm" and "a3-highgpu-vm" in rec.proposed["action"]


def test_a_busy_disk_a_cpu_disk_and_a_thin_measurement_get_nothing_or_are_withheld():
    busy = storage_tier.findings(_inputs(volumes=[_disk()], ops={_disk()["volume_id"]: _hours(8000, 100)}), SETTINGS)
    assert not busy.recommendations and not busy.withheld  # 8,000 × 1.2 > 3,000 + 6 × 1,000: it needs its IOPS
    cpu = _disk(last_instance_type="n2-standard-8")
    assert storage_tier.findings(
        _inputs(volumes=[cpu], ops={cpu["volume_id"]: _hours(10, 1)}), SETTINGS
    ) == storage_tier.findings(_inputs(), SETTINGS)  # not GPU work: out of scope, nothing said
    thin = storage_tier.findings(
        _inputs(volumes=[_disk()], ops={_disk()["volume_id"]: _hours(10, 1, days=2)}), SETTINGS
    )
    assert [w.reason for w in thin.withheld] == ["no_iops_measurements"] and not thin.recommendations


def test_an_unpriced_meter_is_withheld_not_guessed():
    inputs = _inputs(volumes=[_disk()], ops={_disk()["volume_id"]: _hours(100, 10)})
    inputs.rates.pop(("gcp", "us-central1", "Balanced PD Capacity"))
    found = storage_tier.findings(inputs, SETTINGS)
    assert [w.reason for w in found.withheld] == ["unpriced_storage"] and "Balanced PD Capacity" in found.withheld[
        0
    ].detail
    orphan = _disk(attached_instance_id=None, detached_at=NOW - timedelta(days=40), volume_type="pd-balanced")
    withheld = storage_orphan.findings(_inputs(volumes=[orphan]), SETTINGS).withheld
    assert [w.reason for w in withheld] == ["unpriced_storage"]  # no snapshot rate on the bill


def test_meters_are_read_without_their_region_prefix():
    assert meter_key("aws", "USE1-EBS:VolumeP-IOPS.io2") == "EBS:VolumeP-IOPS.io2"
    assert meter_key("aws", "EBS:VolumeUsage.gp3") == "EBS:VolumeUsage.gp3"
    assert meter_key("aws", "EUC1-TimedStorage-GIR-ByteHrs") == "TimedStorage-GIR-ByteHrs"
    assert meter_key("aws", "USE1-BoxUsage:p4d.24xlarge") is None
    assert meter_key("gcp", "Coldline Storage US Multi-region") == "Coldline Storage"


@pytest.mark.parametrize(
    "table, problem",
    [
        ({"bucket": "b", "prefix": ""}, "listing a whole bucket is refused"),
        ({"bucket": "b", "prefix": "*"}, "listing a whole bucket is refused"),
        ({"bucket": "b*", "prefix": "ckpt/"}, "without wildcards"),
        ({"bucket": "b", "prefix": "ckpt/\r\nx"}, "control character"),
        ({"bucket": "b", "prefix": "ckpt/", "purpose": "logs"}, "one of checkpoint, dataset"),
        ({"bucket": "b", "prefix": "ckpt/", "owner": "x"}, "unknown key"),
    ],
)
def test_a_prefix_rule_refuses_what_would_list_too_much_or_is_not_a_name(table, problem):
    with pytest.raises(OptionProblem, match=problem):
        PrefixRule.parse(table, "prefixes[0]")


def test_a_glob_prefix_matches_whole_path_segments():
    rule = PrefixRule.parse({"bucket": "b", "prefix": "runs/*/ckpt/"}, "p")
    assert rule.literal == "runs/"
    assert rule.root("runs/a/ckpt/step-1/x") == "runs/a/ckpt/" and rule.root("runs/a/logs/x") is None


@pytest.mark.parametrize(
    "table, column, value",
    [
        ("storage_volumes", "size_gib", float("nan")),
        ("storage_volumes", "iops", float("inf")),
        ("storage_volume_ops_hourly", "read_ops", -1.0),
        ("storage_volumes", "team", "a\x00b"),
        ("storage_objects", "bytes", -1),
        ("storage_objects", "prefix", "x" * 5000),
    ],
)
def test_hostile_inventory_values_are_outside_the_storage_tables_domains(table, column, value):
    """The one validation layer declares the storage tables' columns (the runner checks every batch by it)."""
    assert domains.reason(table, column, value) is not None
    assert domains.reason(table, column, 1 if column != "team" else "vision") is None


def test_a_checkpoint_prefix_read_more_than_its_kept_checkpoints_is_withheld():
    groups = [
        {
            "provider": "aws",
            "bucket": "b",
            "prefix": "c/",
            "purpose": "checkpoint",
            "team": "t",
            "run": "r",
            "checkpoint": f"s{n}/",
            "storage_class": "STANDARD",
            "objects": 2,
            "bytes": 2**40,
            "newest_at": NOW - timedelta(days=10 * n),
            "access": "ok",
        }
        for n in range(10)
    ]
    inputs = StorageInputs(
        now=NOW,
        rates={
            ("aws", "", "TimedStorage-ByteHrs"): Decimal("0.023"),
            ("aws", "", "TimedStorage-GIR-ByteHrs"): Decimal("0.004"),
        },
        objects=groups,
        reads={("b", "c/"): 50.0},
        read_days={("b", "c/"): 14},
    )
    found = checkpoint_lifecycle.findings(inputs, SETTINGS)
    assert [w.reason for w in found.withheld] == ["old_objects_read"] and not found.recommendations
    inputs.reads[("b", "c/")] = 2.0
    (rec,) = checkpoint_lifecycle.findings(inputs, SETTINGS).recommendations
    # ages 0–90 days, 1 TiB each: 235.52 at 0.023; the rule keeps 3 (70.656), moves the 6 aged 30–80 days to
    # Glacier IR (24.576) and expires the one aged 90: 235.52 − 95.232
    assert rec.monthly_savings_usd == Decimal("140.29")
    assert rec.proposed["expire_prefixes"] == [f"c/r/s{n}/" for n in range(3, 10)]


def test_the_gcs_lifecycle_export_moves_then_deletes_by_prefix():
    from gpufinops.jobs.export import storage

    obj = {
        "id": "x",
        "kind": "checkpoint_lifecycle",
        "provider": "gcp",
        "plan": "primary",
        "status": "open",
        "monthly_savings_usd": 12.5,
        "resource_id": "gs://ckpt/llm/",
        "evidence": {},
        "proposed": {
            "bucket": "ckpt",
            "prefix": "llm/",
            "storage_class": "COLDLINE",
            "transition_days": 30,
            "expire_days": 90,
            "expire_prefixes": ["llm/run-1/step-1/"],
        },
    }
    document = storage.document([obj])
    assert document["gcs_lifecycle"] == {
        "ckpt": {
            "rule": [
                {
                    "action": {"type": "SetStorageClass", "storageClass": "COLDLINE"},
                    "condition": {"age": 30, "matchesPrefix": ["llm/"]},
                },
                {"action": {"type": "Delete"}, "condition": {"age": 90, "matchesPrefix": ["llm/run-1/step-1/"]}},
            ]
        }
    }
    assert document["s3_lifecycle"] == {} and document["monthly_savings_usd"] == 12.5
    assert storage.document([{**obj, "status": "dismissed"}])["gcs_lifecycle"] == {}  # a dismissed plan is not carried
