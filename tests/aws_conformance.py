"""Conformance-suite inputs for the AWS ingestors (tests/test_conformance.py).

``aws_cur`` gets a local copy of a CUR 2.0 bucket; the API ingestors get a loopback EC2 / Pricing
server (started once, on first use) serving recorded real responses, reached with dummy credentials.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests import aws_cur_data as data
from tests import storage_conformance
from tests.aws_loopback import AwsApiServer, dummy_credentials_for_the_session

_SERVER: AwsApiServer | None = None


def _api_url() -> str:
    global _SERVER
    dummy_credentials_for_the_session()
    if _SERVER is None:
        _SERVER = AwsApiServer().__enter__()  # a daemon thread, ends with the test session
    return _SERVER.url


def aws_cur_input(tmp: Path) -> tuple[dict, datetime]:
    periods = {
        "2026-09": data.lines("111122223333", "2026-09") + data.lines("444455556666", "2026-09", split=True),
        "2026-10": data.lines("111122223333", "2026-10"),
    }
    data.write_cur2(tmp / "bucket", periods)
    return {"path": str(tmp / "bucket")}, datetime(2026, 9, 1, tzinfo=UTC)


def aws_cur_negative_usage(folder: Path) -> int:
    """Usage-category CUR lines billed negative (the Savings Plan negations)."""
    usage_types = ["Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation", "DiscountedUsage"]
    count = 0
    for path in folder.rglob("*.parquet"):
        t = pq.read_table(path, columns=["line_item_line_item_type", "line_item_unblended_cost"])
        usage = pc.is_in(t.column("line_item_line_item_type"), value_set=pa.array(usage_types))
        count += pc.sum(pc.and_(usage, pc.less(t.column("line_item_unblended_cost"), 0))).as_py() or 0
    return count


def aws_spot_prices_input(tmp: Path) -> tuple[dict, datetime]:
    return (
        {"regions": ["us-east-1"], "instance_types": ["m5.large"], "endpoint_url": _api_url()},
        datetime(2021, 1, 1, tzinfo=UTC),
    )


def aws_pricing_input(tmp: Path) -> tuple[dict, datetime]:
    return (
        {"regions": ["us-east-1"], "instance_types": ["m5.large"], "endpoint_url": _api_url()},
        datetime(2021, 1, 1, tzinfo=UTC),
    )


def aws_spot_advisor_input(tmp: Path) -> tuple[dict, datetime]:
    shutil.copy(data.AWS_DATA / "spot-advisor" / "spot-advisor-data_2021-02.json", tmp / "advisor.json")
    return {"path": str(tmp / "advisor.json"), "regions": ["us-east-1", "eu-west-1"]}, datetime(2020, 1, 1, tzinfo=UTC)


def cloudwatch_gpu_input(tmp: Path) -> tuple[dict, datetime]:
    """moto's CloudWatch behind the loopback front (tests/cloudwatch_loopback.py), holding three hours of the
    CloudWatch agent's GPU metrics that ended four hours ago (inside the source's default backfill)."""
    import atexit
    import logging

    from tests.cloudwatch_loopback import cloudwatch
    from tests.test_cloudwatch_gpu import put_agent_metrics

    dummy_credentials_for_the_session()
    servers = cloudwatch()
    front, _ = servers.__enter__()

    def stop() -> None:  # at exit pytest's log capture is closed: keep moto's request log out of it
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        servers.__exit__(None, None, None)

    atexit.register(stop)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=7)
    put_agent_metrics(front.url, start)
    return {"region": "us-east-1", "endpoint_url": front.url}, start


FIXTURES = {
    "aws_cur": aws_cur_input,
    "aws_spot_prices": aws_spot_prices_input,
    "aws_pricing": aws_pricing_input,
    "aws_spot_advisor": aws_spot_advisor_input,
    "cloudwatch_gpu": cloudwatch_gpu_input,
    **storage_conformance.FIXTURES,  # the storage inventory sources (aws_storage, gcp_storage) share one module
}
NEGATIVE_USAGE = {"aws_cur": aws_cur_negative_usage}
# the column each reference table is dated by, for the suite's "timestamps where the input put them"
TIME_COLUMNS = {
    "spot_prices": "ts",
    "instance_types": "updated_at",
    "spot_interruption_bands": "updated_at",
    **storage_conformance.TIME_COLUMNS,
}
