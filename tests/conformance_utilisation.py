"""Conformance inputs for the utilisation ingestors (used by tests/test_conformance.py's FIXTURES)."""

from __future__ import annotations

import atexit
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import gpu_series as gs
from tests.prometheus_fixture import PROMETHEUS, PROMTOOL, PrometheusServer


def dcgm_exporter_input(tmp: Path) -> tuple[dict, datetime]:
    (tmp / "node.prom").write_text(gs.exposition(gs.samples()))
    return {"targets": [str(tmp / "*.prom")], "resource_map": gs.RESOURCE_MAP}, gs.START


def prometheus_input(tmp: Path) -> tuple[dict, datetime]:
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("the `prometheus` and `promtool` binaries are not installed (Debian package `prometheus`)")
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=14)
    server = PrometheusServer(tmp / "prometheus", gs.openmetrics(gs.samples(start)), [])
    atexit.register(server.stop)
    server.wait_ready()
    return {"url": server.url, "resource_map": gs.RESOURCE_MAP, "backfill_days": 1}, start


def write_bills(root: Path) -> dict:
    """The bills of gpu_series' billed resources (one GPU instance-hour each) as a CUR 2.0 delivery;
    returns the aws_cur options. Used to check that attribution does not depend on arrival order."""
    from gpufinops.ingest.aws.aws_cur2_format import conform, write_delivery

    period = gs.START.strftime("%Y-%m")
    start = gs.START.replace(day=1, tzinfo=None)
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    rows = []
    for rid, team in sorted(gs.BILLED.items()):
        for hour in range(gs.HOURS):
            t = gs.START.replace(tzinfo=None) + timedelta(hours=hour)
            rows.append(
                {
                    "bill_payer_account_id": "012345678901",
                    "bill_billing_period_start_date": start,
                    "bill_billing_period_end_date": end,
                    "line_item_line_item_type": "Usage",
                    "line_item_usage_start_date": t,
                    "line_item_usage_end_date": t + timedelta(hours=1),
                    "line_item_resource_id": rid,
                    "line_item_unblended_cost": 2.5,
                    "line_item_usage_amount": 1.0,
                    "line_item_currency_code": "USD",
                    "line_item_usage_account_id": "004455667788",
                    "line_item_product_code": "AmazonEC2",
                    "line_item_usage_type": "USE1-BoxUsage:g6e.xlarge",
                    "product_instance_type": "g6e.xlarge",
                    "product_region_code": "us-east-1",
                    "product_product_family": "Compute Instance",
                    "pricing_unit": "Hrs",
                    "pricing_public_on_demand_cost": 2.5,
                    "identity_line_item_id": f"{rid}-{hour}",
                    "product": [("instance_type", "g6e.xlarge"), ("region", "us-east-1")],
                    "resource_tags": [("user_team", team)],
                }
            )
    write_delivery(root, "cur2", period, [conform({k: [r[k] for r in rows] for k in rows[0]})])
    return {"path": str(root), "format": "cur2"}
