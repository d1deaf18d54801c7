"""aws_cur against moto's S3 server on loopback: CUR 2.0 deliveries found through their manifests,
mapped to FOCUS exactly (billed to the cent, amortised effective cost, spot as Dynamic), restated
months replaced, redelivered months skipped, bad deliveries failing without losing data."""

from __future__ import annotations

import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests import aws_cur_data as data
from tests.aws_loopback import DUMMY_CREDENTIALS, empty_s3, upload_tree
from tests.conftest import query, table_digest

REGISTRY = default_registry()
TAGS = ("team", "user:team", "user_team", "k8s_label_team")
CENT = Decimal("0.01")


@pytest.fixture
def s3(moto_endpoint, monkeypatch):
    yield empty_s3(moto_endpoint, monkeypatch)


def deliveries(scale: Decimal = Decimal(1)) -> dict[str, list[data.Line]]:
    return {
        "2026-09": data.lines("111122223333", "2026-09", scale) + data.lines("444455556666", "2026-09", scale),
        "2026-10": data.lines("111122223333", "2026-10", scale),
    }


def publish(
    tmp: Path, endpoint: str, periods: dict[str, list[data.Line]], bucket: str = "billing", prefix: str = "exports"
) -> None:
    root = tmp / "bucket"
    data.write_cur2(root, periods, prefix=prefix)
    upload_tree(endpoint, bucket, prefix, root)


def run(warehouse, endpoint: str, **options):
    opts = {"bucket": "billing", "prefix": "exports", "region": "us-east-1", "endpoint_url": endpoint, **options}
    return run_source(REGISTRY, warehouse, "cur", "aws_cur", opts, team_tag_keys=TAGS)


def test_cur2_billed_cost_equals_unblended_per_account_and_period(s3, tmp_path, warehouse):
    periods = deliveries()
    publish(tmp_path, s3, periods)
    result = run(warehouse, s3)
    assert result.status == "succeeded", result.error
    assert result.rows == sum(len(v) for v in periods.values())
    expected: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for period, rows in periods.items():
        for line in rows:
            expected[(line.columns["bill_payer_account_id"], period)] += Decimal(
                str(line.columns["line_item_unblended_cost"])
            )
    got = query(
        warehouse,
        """SELECT "BillingAccountId", strftime("BillingPeriodStart", '%Y-%m'), sum("BilledCost")
                              FROM cost_line_items GROUP BY ALL""",
    )
    assert {(a, p): total.quantize(CENT) for a, p, total in got} == {k: v.quantize(CENT) for k, v in expected.items()}
    assert all(total == expected[(a, p)] for a, p, total in got)  # exact, not only to the cent


def test_effective_cost_follows_savings_plan_and_ri_amortisation(s3, tmp_path, warehouse):
    rows = data.lines("111122223333", "2026-09")
    publish(tmp_path, s3, {"2026-09": rows})
    assert run(warehouse, s3).status == "succeeded"
    got = query(
        warehouse,
        """SELECT "ChargeDescription", "ChargePeriodStart", "ChargeCategory", "PricingCategory",
                                     "EffectiveCost", "BilledCost", "CommitmentDiscountType"
                              FROM cost_line_items ORDER BY "ChargePeriodStart", "EffectiveCost" """,
    )
    assert len(got) == len(rows)
    by_type = {line.columns["line_item_line_item_type"]: line for line in rows}
    effective = dict(
        query(
            warehouse,
            """SELECT "ChargeCategory" || '/' || coalesce("CommitmentDiscountType", '-'),
                                                sum("EffectiveCost") FROM cost_line_items GROUP BY 1""",
        )
    )
    assert effective["Purchase/Savings Plan"] == by_type["SavingsPlanRecurringFee"].effective  # unused commitment
    assert effective["Purchase/Reserved Instance"] == by_type["RIFee"].effective  # unused RI fee; upfront fee 0
    # usage covered by commitments costs their effective rate; the negation cancels the on-demand charge
    assert effective["Usage/Savings Plan"] == Decimal("13.61373804")
    assert effective["Usage/Reserved Instance"] == Decimal("13.61373804")
    total_effective = query(warehouse, 'SELECT sum("EffectiveCost") FROM cost_line_items')[0][0]
    assert total_effective == sum((line.effective for line in rows), Decimal(0))
    categories = query(
        warehouse,
        """SELECT "ChargeCategory", "PricingCategory", count(*) FROM cost_line_items
                                     GROUP BY ALL ORDER BY ALL""",
    )
    expected = defaultdict(int)
    for line in rows:
        expected[(line.category, line.pricing)] += 1
    assert {(c, p): n for c, p, n in categories} == dict(expected)


def test_spot_lines_are_dynamic_with_gpu_facts_and_teams(s3, tmp_path, warehouse):
    publish(tmp_path, s3, {"2026-09": data.lines("111122223333", "2026-09")})
    assert run(warehouse, s3).status == "succeeded"
    spot = query(
        warehouse,
        """SELECT "PricingCategory", x_InstanceType, x_GpuModel, x_GpuCount, x_Team, "Tags"
                               FROM cost_line_items WHERE "ChargeDescription" LIKE '%Spot Instance-hour'""",
    )
    assert spot == [("Dynamic", "g5.12xlarge", "A10G", 4, "vision", '{"user_team":"vision"}')]
    gpu_lines = query(
        warehouse,
        """SELECT DISTINCT x_InstanceType, x_GpuModel, x_GpuCount, "RegionId" FROM cost_line_items
                                    WHERE "ResourceId" = 'i-0aaa1111bbbb2222c'""",
    )
    assert gpu_lines == [("p4d.24xlarge", "A100-40GB", 8, "us-east-1")]
    storage = query(
        warehouse,
        """SELECT "ServiceCategory", "ServiceSubcategory", "PricingUnit", x_GpuCount, x_Team
                                  FROM cost_line_items WHERE "ResourceId" = 'vol-0abc'""",
    )
    # FOCUS 1.2: one ServiceCategory per ServiceName, so an EBS volume billed under Amazon Elastic Compute
    # Cloud is Compute like the instances (it was 'Storage' from the product family before); CUR's GB-Mo
    # is the UnitFormat's GB-Months
    assert storage == [("Compute", "Virtual Machines", "GB-Months", None, "research")]


def test_restated_month_replaces_and_redelivery_is_skipped(s3, tmp_path, warehouse):
    publish(tmp_path, s3, deliveries())
    assert run(warehouse, s3).status == "succeeded"
    untouched = query(
        warehouse,
        """SELECT count(*), sum("BilledCost") FROM cost_line_items
                                    WHERE strftime("BillingPeriodStart", '%Y-%m') = '2026-10'""",
    )
    before = table_digest(warehouse, "cost_line_items")
    again = run(warehouse, s3)
    assert again.status == "skipped" and table_digest(warehouse, "cost_line_items") == before

    restated = data.lines("111122223333", "2026-09", Decimal("1.1"))[:9]  # AWS restates September
    publish(tmp_path / "restated", s3, {"2026-09": restated})
    result = run(warehouse, s3)
    assert result.status == "succeeded" and result.rows == len(restated)
    september = query(
        warehouse,
        """SELECT count(*), sum("BilledCost"), count(DISTINCT "BillingAccountId")
                                    FROM cost_line_items WHERE strftime("BillingPeriodStart", '%Y-%m') = '2026-09'""",
    )
    expected = sum((Decimal(str(line.columns["line_item_unblended_cost"])) for line in restated), Decimal(0))
    assert september == [(len(restated), expected, 1)]
    assert (
        query(
            warehouse,
            """SELECT count(*), sum("BilledCost") FROM cost_line_items
                               WHERE strftime("BillingPeriodStart", '%Y-%m') = '2026-10'""",
        )
        == untouched
    )
    dupes = query(
        warehouse,
        """SELECT count(*) FROM (SELECT "ChargePeriodStart", "ResourceId", "ChargeDescription",
                                "BilledCost", "BillingAccountId", "ChargeCategory", count(*) n FROM cost_line_items
                                GROUP BY ALL HAVING count(*) > 1)""",
    )
    assert dupes == [(0,)]


def test_split_cost_rows_bill_each_pod_its_share_of_the_instance(s3, tmp_path, warehouse):
    rows = data.lines("111122223333", "2026-09", split=True)
    publish(tmp_path, s3, {"2026-09": rows})
    assert run(warehouse, s3).status == "succeeded"
    pods = query(
        warehouse,
        """SELECT "ResourceName", "ResourceId", x_Team, "BilledCost", "EffectiveCost"
                               FROM cost_line_items WHERE "ResourceName" IS NOT NULL ORDER BY 1""",
    )
    assert pods == [
        (
            "arn:aws:eks:us-east-1:004455667788:pod/ml/serve-1",
            "i-0aaa1111bbbb2222c",
            "nlp",
            Decimal("5.5"),
            Decimal("5.5"),
        ),
        (
            "arn:aws:eks:us-east-1:004455667788:pod/ml/train-0",
            "i-0aaa1111bbbb2222c",
            "research",
            Decimal("16.457642"),
            Decimal("16.457642"),
        ),
    ]
    assert sum(p[3] for p in pods) == Decimal("21.957642")  # the instance-hour, once


def _truncate(root: Path) -> str:
    path = next(root.rglob("*.parquet"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return "can not be read as parquet"


def _drop_data_file(root: Path) -> str:
    next(root.rglob("*.parquet")).unlink()
    return "listed in the manifest does not exist"


def _unknown_dialect(root: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = next(root.rglob("*.parquet"))
    pq.write_table(pa.table({"cost": [1.0], "account": ["111122223333"]}), path)
    return "unknown column dialect"


@pytest.mark.parametrize("breaker", [_truncate, _drop_data_file, _unknown_dialect])
def test_bad_delivery_fails_naming_the_object_and_keeps_the_period(s3, tmp_path, warehouse, breaker, monkeypatch):
    good = data.lines("111122223333", "2026-09")
    publish(tmp_path / "v1", s3, {"2026-09": good})
    assert run(warehouse, s3).status == "succeeded"
    before = table_digest(warehouse, "cost_line_items")
    state = query(warehouse, "SELECT state FROM ingest_state WHERE source = 'cur'")

    import boto3

    root = tmp_path / "v2" / "bucket"
    data.write_cur2(root, {"2026-09": good[:5]}, prefix="exports")
    expected = breaker(root)
    s3_client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    for key in [o["Key"] for o in s3_client.list_objects_v2(Bucket="billing")["Contents"]]:
        s3_client.delete_object(Bucket="billing", Key=key)
    upload_tree(s3, "billing", "exports", root)
    result = run(warehouse, s3)
    assert result.status == "failed"
    assert "s3://billing/exports/cur2/data/BILLING_PERIOD=2026-09/cur2-00001.snappy.parquet" in result.error
    assert expected in result.error and "\n" not in result.error
    assert DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in result.error
    assert table_digest(warehouse, "cost_line_items") == before
    assert query(warehouse, "SELECT state FROM ingest_state WHERE source = 'cur'") == state

    publish(tmp_path / "v3", s3, {"2026-09": good[:5]})  # the next delivery is whole: the run completes
    retry = run(warehouse, s3)
    assert retry.status == "succeeded" and retry.rows == 5
    assert query(warehouse, "SELECT count(*) FROM cost_line_items") == [(5,)]


def test_missing_bucket_is_one_sentence_without_credentials(s3, warehouse):
    result = run(warehouse, s3, bucket="no-such-bucket")
    assert result.status == "failed" and "NoSuchBucket" in result.error and "\n" not in result.error
    for secret in DUMMY_CREDENTIALS.values():
        if len(secret) > 12:
            assert secret not in result.error


def test_local_directory_mode_needs_no_boto3(tmp_path, warehouse, monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` now raises ImportError
    root = tmp_path / "sync"
    periods = deliveries()
    data.write_cur2(root, periods)
    result = run_source(
        REGISTRY, warehouse, "cur", "aws_cur", {"path": str(root), "format": "cur2"}, team_tag_keys=TAGS
    )
    assert result.status == "succeeded" and result.rows == sum(len(v) for v in periods.values())
    assert run_source(REGISTRY, warehouse, "cur", "aws_cur", {"path": str(root)}).status == "skipped"
    wrong = run_source(REGISTRY, warehouse, "cur2", "aws_cur", {"path": str(root), "format": "focus"})
    assert wrong.status == "failed" and "format = 'focus'" in wrong.error


def test_a_manifest_larger_than_the_body_bound_is_cut_not_read_whole(s3, tmp_path, warehouse):
    """S3 GetObject bodies were read whole (bounded only per read): a manifest padded past ``max_body_mb``
    now stops at the bound, named, with nothing loaded. moto's S3 server on loopback."""
    publish(tmp_path, s3, deliveries())
    manifests = sorted((tmp_path / "bucket").rglob("*Manifest.json"))
    import boto3

    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    for manifest in manifests:  # the same JSON, with 2 MiB of whitespace after it
        key = "exports/" + manifest.relative_to(tmp_path / "bucket").as_posix()
        client.put_object(Bucket="billing", Key=key, Body=manifest.read_bytes() + b" " * (2 * 2**20))
    result = run(warehouse, s3, max_body_mb=0.5)
    assert result.status == "failed", result
    assert "S3 GetObject of s3://billing/exports/" in result.error, result.error
    assert "answered a body over 0.5 MiB (max_body_mb); stopped" in result.error, result.error
    assert query(warehouse, "SELECT count(*) FROM cost_line_items") == [(0,)]
    assert run(warehouse, s3).status == "succeeded"  # the default bound reads it


def test_a_data_part_longer_than_its_listed_size_is_refused_naming_it(s3, tmp_path, warehouse, monkeypatch):
    """A CUR data part was downloaded with only a per-read bound: one that answers more than the listing
    said (here it grows by 256 KiB between the listing and the download) is now refused at its listed size,
    named, with nothing loaded. moto's S3 server on loopback; the listing is the store's own, the growth a
    real PutObject made after it."""
    import boto3

    from gpufinops.ingest.aws.aws_cur_store import S3Store

    publish(tmp_path, s3, deliveries())
    client = boto3.client("s3", endpoint_url=s3, region_name="us-east-1")
    listing = S3Store.list
    grown: list[str] = []

    def list_then_grow(store):
        objects = listing(store)
        key = next(o.key for o in objects if o.key.endswith((".parquet", ".csv.gz")) and "/metadata/" not in o.key)
        full = store._full(key)
        body = client.get_object(Bucket="billing", Key=full)["Body"].read()
        client.put_object(Bucket="billing", Key=full, Body=body + b"\0" * (256 * 1024))
        grown.append(f"s3://billing/{full} answered a body longer than its listed size of {len(body)} bytes")
        return objects

    monkeypatch.setattr(S3Store, "list", list_then_grow)
    result = run(warehouse, s3)
    assert result.status == "failed", result
    assert f"S3 GetObject of {grown[0]}; stopped" in result.error, result.error
    assert query(warehouse, "SELECT count(*) FROM cost_line_items") == [(0,)]
