"""The GCP storage inventory through google-cloud-compute and google-cloud-storage against a loopback server
speaking their REST protocols (tests/gcp_storage_loopback.py), priced by the bill's SKU rates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

pytest.importorskip("google.cloud.compute_v1")

from gpufinops.ingest.storage import gcp_inventory  # noqa: E402
from gpufinops.ingest.storage.options import PrefixRule  # noqa: E402
from gpufinops.models import storage_orphan, storage_tier  # noqa: E402
from gpufinops.models.storage_common import StorageInputs  # noqa: E402
from tests.gcp_storage_loopback import serve  # noqa: E402

P, Z = "ml-prod", "us-central1-a"
NOW = datetime.now(UTC).replace(microsecond=0)


def _link(kind: str, name: str, zone: bool = True) -> str:
    where = f"zones/{Z}/" if zone else "global/"
    return f"https://www.googleapis.com/compute/v1/projects/{P}/{where}{kind}/{name}"


def _state(server, attached: bool) -> None:
    ts = lambda days: (NOW - timedelta(days=days)).isoformat()  # noqa: E731  # Compute: RFC 3339 with an offset
    gcs = lambda days: (NOW - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # noqa: E731  # GCS: Zulu
    gcs = lambda days: (NOW - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # noqa: E731  # GCS: Zulu
    server.state["instances"] = {
        Z: [
            {
                "name": "a3-train",
                "selfLink": _link("instances", "a3-train"),
                "machineType": _link("machineTypes", "a3-highgpu-8g"),
            },
            *(
                [
                    {
                        "name": "a2-old",
                        "selfLink": _link("instances", "a2-old"),
                        "machineType": _link("machineTypes", "a2-highgpu-1g"),
                    }
                ]
                if attached
                else []
            ),
        ],
        "us-central1-b": [],
    }
    server.state["disks"] = {
        Z: [
            {
                "name": "data",
                "selfLink": _link("disks", "data"),
                "zone": _link("", Z).rstrip("/").replace("/zones/" + Z + "/", "/zones/" + Z),
                "type": _link("diskTypes", "pd-ssd"),
                "sizeGb": "1000",
                "users": [_link("instances", "a3-train")],
                "labels": {"team": "llm"},
                "creationTimestamp": ts(90),
            },
            {
                "name": "scratch",
                "selfLink": _link("disks", "scratch"),
                "type": _link("diskTypes", "pd-balanced"),
                "sizeGb": "2000",
                "users": [_link("instances", "a2-old")] if attached else [],
                "creationTimestamp": ts(120),
                **({} if attached else {"lastDetachTimestamp": ts(40)}),
            },
        ],
        "us-central1-b": [],
    }
    server.state["snapshots"] = [
        {
            "name": "s1",
            "selfLink": _link("snapshots", "s1", zone=False),
            "sourceDisk": _link("disks", "data"),
            "diskSizeGb": "1000",
            "storageBytes": str(300 * 2**30),
            "creationTimestamp": ts(10),
            "labels": {"team": "llm"},
        }
    ]
    server.state["buckets"] = {
        "ckpt": [
            {
                "name": f"llm/run-1/step-{n}/model.bin",
                "bucket": "ckpt",
                "size": str(2**30),
                "storageClass": "STANDARD",
                "updated": gcs(10 * n),
                "timeCreated": gcs(10 * n),
            }
            for n in range(5)
        ]
        + [
            {
                "name": "other/x",
                "bucket": "ckpt",
                "size": "1",
                "storageClass": "STANDARD",
                "updated": gcs(1),
                "timeCreated": gcs(1),
            }
        ]
    }


def test_disks_snapshots_and_prefixes_are_listed_paged_and_a_left_disk_is_an_orphan():
    rules = (
        PrefixRule.parse({"bucket": "ckpt", "prefix": "llm/", "team": "llm"}, "p"),
        PrefixRule.parse({"bucket": "gone", "prefix": "ckpt/"}, "p"),
    )
    options = gcp_inventory.GcpStorageOptions(project=P, rules=rules)
    with serve() as (endpoint, server):
        _state(server, attached=True)
        c = gcp_inventory.clients(endpoint, project=P)
        first = gcp_inventory.collect("gcs", c, options, NOW - timedelta(days=41))
        _state(server, attached=False)
        previous = {v["volume_id"]: v for v in first.volumes}
        inv = gcp_inventory.collect("gcs", c, options, NOW, previous)
    assert any("pageToken" in r for r in server.requests)  # the listings paged
    assert not any("other/" in r for r in server.requests if "/o?" in r)  # only the configured prefix
    scratch = next(v for v in inv.volumes if v["volume_id"].endswith("disks/scratch"))
    assert scratch["attached_instance_id"] is None and scratch["last_instance_type"] == "a2-highgpu-1g"
    assert scratch["detached_at"] == NOW - timedelta(days=40) and scratch["region"] == "us-central1"
    listed = [o for o in inv.objects if o["bucket"] == "ckpt"]
    assert sum(o["objects"] for o in listed) == 5 and {o["run"] for o in listed} == {"run-1"}
    refused = next(o for o in inv.objects if o["bucket"] == "gone")
    assert "404" in refused["access"]
    rates = {
        ("gcp", "us-central1", "Balanced PD Capacity"): Decimal("0.10"),
        ("gcp", "us-central1", "SSD backed PD Capacity"): Decimal("0.17"),
        ("gcp", "us-central1", "Storage PD Snapshot"): Decimal("0.05"),
    }
    inputs = StorageInputs(
        now=NOW, rates=rates, gpu_types={"a2-highgpu-1g", "a3-highgpu-8g"}, volumes=inv.volumes, snapshots=inv.snapshots
    )
    settings = storage_tier.StorageSettings()
    (orphan,) = storage_orphan.findings(inputs, settings).recommendations
    assert orphan.resource_id.endswith("disks/scratch") and orphan.monthly_savings_usd == Decimal("100.00")  # 200 − 100
    tier = storage_tier.findings(inputs, settings)
    assert [w.reason for w in tier.withheld] == ["no_iops_measurements"]  # disk operations are not read yet


def test_the_gcp_storage_source_is_checked_by_doctor_and_loaded_by_the_runner(tmp_path):
    """``gcp_storage`` through the layers every source passes: doctor's reachability check, the runner's
    ledger and load (the same batches and domains as aws_storage), a second run in the hour skipped."""
    from gpufinops.ingest.core.registry import default_registry
    from gpufinops.ingest.core.runner import run_source
    from gpufinops.interfaces import doctor_sources
    from gpufinops.jobs.config import parse_source

    options = {"endpoint": "", "project": P, "prefixes": [{"bucket": "ckpt", "prefix": "llm/", "team": "llm"}]}
    with serve() as (endpoint, server):
        _state(server, attached=False)
        options["endpoint"] = endpoint
        source = parse_source("gcs", {"type": "gcp_storage", "schedule": "40 5 * * *", **options})
        assert doctor_sources.needs_extra(source) == "gcp-storage"
        status, detail, _fix = doctor_sources.check_of("gcp_storage")(source, tmp_path, 5.0)
        assert status == doctor_sources.OK and P in detail
        warehouse = tmp_path / "wh.duckdb"
        first = run_source(default_registry(), warehouse, "gcs", "gcp_storage", options)
        again = run_source(default_registry(), warehouse, "gcs", "gcp_storage", options)
    assert first.status == "succeeded" and first.rows == 2 and "5 object(s) under 1 prefix(es)" in first.watermark
    assert again.status == "skipped"
