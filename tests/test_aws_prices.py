"""aws_spot_prices, aws_pricing and aws_spot_advisor through boto3 against a loopback server speaking
EC2 Query/XML and AWSPriceListService JSON 1.1, serving recorded real AWS responses."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from decimal import Decimal
from functools import partial

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests.aws_cur_data import AWS_DATA
from tests.aws_loopback import DUMMY_CREDENTIALS, FIXTURES, AwsApiServer, use_dummy_credentials
from tests.conftest import query, table_digest

REGISTRY = default_registry()
SPOT_FIXTURE = json.loads((FIXTURES / "DescribeSpotPriceHistory" / "m5_large.json").read_text())["SpotPriceHistory"]
ADVISOR = AWS_DATA / "spot-advisor" / "spot-advisor-data_2021-02.json"


@pytest.fixture
def api(monkeypatch):
    use_dummy_credentials(monkeypatch)
    with AwsApiServer(page_size=100) as server:
        yield server


def spot(warehouse, api, **options):
    return run_source(
        REGISTRY,
        warehouse,
        "spot",
        "aws_spot_prices",
        {"regions": ["us-east-1"], "instance_types": ["m5.large"], "endpoint_url": api.url, **options},
    )


def test_spot_history_loads_every_page_with_zone_and_exact_price(api, warehouse):
    result = spot(warehouse, api)
    assert result.status == "succeeded" and result.rows == len(SPOT_FIXTURE) == 250
    pages = [r for r in api.requests if r["action"] == "DescribeSpotPriceHistory"]
    assert [p["params"].get("NextToken", [None])[0] for p in pages] == [None, "100", "200"]
    assert pages[0]["params"]["ProductDescription.1"] == ["Linux/UNIX"]
    total = query(warehouse, "SELECT sum(price_usd), count(DISTINCT zone), min(ts) FROM spot_prices")[0]
    assert total[0] == sum(Decimal(p["SpotPrice"]) for p in SPOT_FIXTURE)
    assert total[1] == len({p["AvailabilityZone"] for p in SPOT_FIXTURE})
    assert total[2] == min(datetime.fromisoformat(p["Timestamp"]) for p in SPOT_FIXTURE).astimezone(UTC)
    first = SPOT_FIXTURE[0]
    row = query(
        warehouse,
        "SELECT region, zone, instance_type, product, price_usd FROM spot_prices WHERE ts = ? AND zone = ?",
        [datetime.fromisoformat(first["Timestamp"]), first["AvailabilityZone"]],
    )
    assert row == [("us-east-1", first["AvailabilityZone"], "m5.large", "Linux/UNIX", Decimal(first["SpotPrice"]))]


def test_spot_history_is_incremental_and_never_duplicates(api, warehouse):
    assert spot(warehouse, api).status == "succeeded"
    before = table_digest(warehouse, "spot_prices")
    again = spot(warehouse, api)  # overlapping window: the same points come back
    assert again.status == "skipped" and table_digest(warehouse, "spot_prices") == before
    second_start = [r for r in api.requests if r["action"] == "DescribeSpotPriceHistory"][-1]["params"]["StartTime"][0]
    newest = max(datetime.fromisoformat(p["Timestamp"]) for p in SPOT_FIXTURE)
    assert datetime.fromisoformat(second_start.replace("Z", "+00:00")) < newest  # watermark minus lookback
    api.spot_history = api.spot_history + [
        {
            "AvailabilityZone": "us-east-1a",
            "InstanceType": "m5.large",
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": "0.041100",
            "Timestamp": "2021-02-09T03:00:00+00:00",
        }
    ]
    third = spot(warehouse, api)
    assert third.status == "succeeded" and third.rows == 1
    dupes = query(
        warehouse,
        "SELECT count(*) FROM (SELECT zone, instance_type, product, ts FROM spot_prices GROUP BY ALL HAVING count(*) > 1)",
    )
    assert dupes == [(0,)]


def test_throttling_is_retried_with_backoff_and_bounded(api, warehouse):
    api.throttle["DescribeSpotPriceHistory"] = 2
    result = spot(warehouse, api)
    assert result.status == "succeeded" and result.rows == 250
    assert sum(1 for r in api.requests if r["action"] == "DescribeSpotPriceHistory") == 3 + 2
    api.throttle["DescribeSpotPriceHistory"] = 99
    failed = spot(warehouse, api, max_attempts=2)
    assert failed.status == "failed" and "RequestLimitExceeded" in failed.error and "\n" not in failed.error
    assert DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in failed.error
    assert all("AKIAIOSFODNN7EXAMPLE" in r["authorization"] for r in api.requests)  # signed, with the dummy key only


def test_default_instance_types_are_the_gpu_types(api, warehouse):
    result = run_source(
        REGISTRY, warehouse, "spot", "aws_spot_prices", {"regions": ["us-east-1"], "endpoint_url": api.url}
    )
    asked = [r for r in api.requests if r["action"] == "DescribeSpotPriceHistory"][0]["params"]
    assert sorted(v[0] for k, v in asked.items() if k.startswith("InstanceType.")) == ["g2.2xlarge", "p3.16xlarge"]
    assert result.status == "skipped"  # the recording holds no GPU price points


def test_pricing_describes_gpu_types_and_prices_them(api, warehouse):
    api.throttle["GetProducts"] = 1
    result = run_source(
        REGISTRY,
        warehouse,
        "prices",
        "aws_pricing",
        {"regions": ["us-east-1"], "instance_types": ["m5.large"], "endpoint_url": api.url},
    )
    assert result.status == "succeeded" and result.rows == 3
    rows = {
        r[0]: r[1:]
        for r in query(
            warehouse,
            """SELECT instance_type, gpu_model, gpu_count, gpu_memory_gib, vcpus,
                                                      memory_gib, on_demand_usd_per_hour, source FROM instance_types""",
        )
    }
    assert rows["p3.16xlarge"] == ("V100-16GB", 8, 16.0, 64, 488.0, Decimal("24.48"), "offline:karpenter-2026-07-20")
    assert rows["m5.large"] == (
        None,
        None,
        None,
        2,
        8.0,
        Decimal("0.096"),
        "aws:pricing-api",
    )  # the recorded GetProducts
    assert rows["g2.2xlarge"][:2] == ("K520", 1)
    products = [r for r in api.requests if r["action"] == "GetProducts"]
    filters = {f["Field"]: f["Value"] for f in products[-1]["params"]["Filters"]}
    assert (
        filters["operatingSystem"] == "Linux"
        and filters["tenancy"] == "Shared"
        and filters["regionCode"] == "us-east-1"
    )
    assert (
        run_source(
            REGISTRY,
            warehouse,
            "prices",
            "aws_pricing",
            {"regions": ["us-east-1"], "instance_types": ["m5.large"], "endpoint_url": api.url},
        ).status
        == "skipped"
    )


def test_pricing_falls_back_to_the_offline_catalogue_when_the_api_is_down(api, warehouse):
    options = {"regions": ["us-east-1"], "endpoint_url": api.url, "max_attempts": 2}
    run_prices = partial(run_source, REGISTRY, warehouse, "prices", "aws_pricing", options)
    api.unavailable.add("GetProducts")
    result = run_prices()
    assert result.status == "succeeded"
    rows = query(warehouse, "SELECT instance_type, on_demand_usd_per_hour, source FROM instance_types ORDER BY 1")
    assert rows == [
        ("g2.2xlarge", Decimal("0.65"), "offline:karpenter-2026-07-20"),
        ("p3.16xlarge", Decimal("24.48"), "offline:karpenter-2026-07-20"),
    ]
    assert "priced offline" in result.watermark
    api.unavailable.add("DescribeInstanceTypes")
    failed = run_prices()
    assert failed.status == "failed" and "DescribeInstanceTypes in us-east-1 failed" in failed.error


def test_spot_advisor_bands_load_from_the_public_feed_format(tmp_path, warehouse):
    feed = json.loads(ADVISOR.read_text())
    result = run_source(
        REGISTRY, warehouse, "advisor", "aws_spot_advisor", {"path": str(ADVISOR), "regions": ["us-east-1"]}
    )
    assert result.status == "succeeded"
    assert result.rows == sum(len(types) for types in feed["spot_advisor"]["us-east-1"].values())
    band = feed["spot_advisor"]["us-east-1"]["Linux"]["p3.2xlarge"]
    label = {r["index"]: r["label"] for r in feed["ranges"]}[band["r"]]
    assert query(
        warehouse,
        """SELECT band_index, band_label, savings_pct FROM spot_interruption_bands
                               WHERE region = 'us-east-1' AND os = 'Linux' AND instance_type = 'p3.2xlarge'""",
    ) == [(band["r"], label, band["s"])]
    assert (
        run_source(
            REGISTRY, warehouse, "advisor", "aws_spot_advisor", {"path": str(ADVISOR), "regions": ["us-east-1"]}
        ).status
        == "skipped"
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"spot_advisor": {}}')
    failed = run_source(REGISTRY, warehouse, "advisor2", "aws_spot_advisor", {"path": str(bad)})
    assert failed.status == "failed" and "is not a spot advisor feed" in failed.error


def test_debug_logging_never_carries_credentials(api, warehouse, caplog):
    caplog.set_level(logging.DEBUG)
    api.throttle["DescribeSpotPriceHistory"] = 1
    assert spot(warehouse, api).status == "succeeded"
    assert caplog.records  # the run did log
    for value in (DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"], DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]):
        assert value not in caplog.text
