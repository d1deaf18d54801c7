"""``cloudwatch_gpu`` through boto3 against moto's CloudWatch on loopback, with a front serving what moto lacks
(extended statistics such as p95 in GetMetricData, result pages: tests/cloudwatch_loopback.py).

The datapoints are put through the same endpoint with boto3's PutMetricData, as the CloudWatch agent would,
and the expected hourly figures are computed here with ``statistics`` from those values.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import boto3
import botocore.exceptions
import pytest

from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.cloudwatch_gpu import CloudWatchGpu
from tests.allocation_fleet import Line, write_focus_csv
from tests.aws_loopback import use_dummy_credentials
from tests.cloudwatch_loopback import cloudwatch, percentile
from tests.conftest import query

START = datetime(2026, 11, 20, tzinfo=UTC)
HOURS = 3
GPUS = [  # (InstanceId, index, name, host, memory total MiB)
    ("i-0aaa1111bbbb2222c", "0", "NVIDIA A100-SXM4-40GB", "ip-10-0-0-1", 40960.0),
    ("i-0aaa1111bbbb2222c", "1", "NVIDIA A100-SXM4-40GB", "ip-10-0-0-1", 40960.0),
    ("i-0ddd3333eeee4444f", "0", "NVIDIA L4", "ip-10-0-0-2", 23034.0),
]


def util(g: int, minute: int) -> float:
    return float((minute * 13 + g * 29) % 101)


def registry() -> Registry:
    r = Registry()
    r.register(CloudWatchGpu)
    r.register(FocusFiles)
    return r


def put_agent_metrics(url: str, start: datetime = START) -> None:
    """One datapoint a minute per GPU and metric from ``start``, with the agent's dimensions (and an aggregate
    series without ``index`` that is not one GPU's)."""
    cw = boto3.client("cloudwatch", endpoint_url=url, region_name="us-east-1")
    data = []
    for g, (instance, index, name, host, total) in enumerate(GPUS):
        dims = [
            {"Name": "InstanceId", "Value": instance},
            {"Name": "index", "Value": index},
            {"Name": "name", "Value": name},
            {"Name": "host", "Value": host},
            {"Name": "arch", "Value": "x86_64"},
        ]
        for minute in range(HOURS * 60):
            ts = start + timedelta(minutes=minute)
            for metric, value in (
                ("nvidia_smi_utilization_gpu", util(g, minute)),
                ("nvidia_smi_memory_used", 1000.0 + (minute * 7 + g) % 500),
                ("nvidia_smi_memory_total", total),
                ("nvidia_smi_power_draw", 60.0 + util(g, minute) * 2),
            ):
                data.append({"MetricName": metric, "Dimensions": dims, "Timestamp": ts, "Value": value})
    data.append(
        {
            "MetricName": "nvidia_smi_utilization_gpu",
            "Dimensions": [{"Name": "host", "Value": "ip-10-0-0-1"}],
            "Timestamp": start,
            "Value": 99.0,
        }
    )
    for i in range(0, len(data), 500):
        cw.put_metric_data(Namespace="CWAgent", MetricData=data[i : i + 500])


def expected(g: int, hour: int) -> dict:
    values = [util(g, m) for m in range(hour * 60, hour * 60 + 60)]
    return {
        "util_mean": statistics.fmean(values),
        "util_max": max(values),
        "util_p95": percentile(values, 95),
        "samples": 60,
        "mem_used_max_mib": max(1000.0 + (m * 7 + g) % 500 for m in range(hour * 60, hour * 60 + 60)),
        "mem_total_mib": GPUS[g][4],
        "power_mean_w": statistics.fmean(60.0 + v * 2 for v in values),
    }


@pytest.fixture
def agent(monkeypatch):
    use_dummy_credentials(monkeypatch)
    with cloudwatch(page_size=4) as (front, moto_url):
        put_agent_metrics(front.url)
        yield front, moto_url


def options(front, **extra) -> dict:
    return {"region": "us-east-1", "endpoint_url": front.url, "max_attempts": 4, **extra}


def run(warehouse, opts, **kw):
    return run_source(registry(), warehouse, "cw", "cloudwatch_gpu", opts, **kw)


def test_hourly_statistics_are_pushed_down_and_land_exactly(agent, warehouse, tmp_path):
    front, _ = agent
    front.throttle["GetMetricData"] = 2  # CloudWatch throttles: botocore's standard retries absorb it
    write_focus_csv(
        tmp_path / "cur.csv",
        [Line("i-0aaa1111bbbb2222c", h, 32, team="vision", gpu_count=8) for h in range(HOURS)],
        start=START,
    )
    assert (
        run_source(
            registry(), warehouse, "cur", "focus_files", {"path": str(tmp_path / "cur.csv")}, team_tag_keys=("team",)
        ).status
        == "succeeded"
    )
    result = run(warehouse, options(front), since=START, until=START + timedelta(hours=HOURS))
    assert result.status == "succeeded", result.error
    rows = query(
        warehouse,
        """SELECT gpu_uuid, hour, gpu_model, host, resource_hint, resource_id, team, util_mean,
                                      util_max, util_p95, samples, mem_used_max_mib, mem_total_mib, power_mean_w
                               FROM gpu_metrics_hourly ORDER BY gpu_uuid, hour""",
    )
    assert len(rows) == len(GPUS) * HOURS and result.rows == len(rows)
    for row in rows:
        uuid, hour = row[0], row[1]
        g = next(i for i, gpu in enumerate(GPUS) if f"{gpu[0]}:{gpu[1]}" == uuid)
        want = expected(g, int((hour - START).total_seconds() // 3600))
        got = dict(
            zip(
                ("util_mean", "util_max", "util_p95", "samples", "mem_used_max_mib", "mem_total_mib", "power_mean_w"),
                row[7:],
            )
        )
        assert got == pytest.approx(want), uuid
        assert row[2] == ("A100-40GB" if "aaa" in uuid else "L4") and row[3] == GPUS[g][3] and row[4] == GPUS[g][0]
    attributed = {r[0]: (r[5], r[6]) for r in rows}
    assert attributed["i-0aaa1111bbbb2222c:0"] == ("i-0aaa1111bbbb2222c", "vision")  # InstanceId → the bill
    assert attributed["i-0ddd3333eeee4444f:0"] == (None, None)  # nothing bills it (yet)
    calls = [r for r in front.requests if r["operation"] == "GetMetricData"]
    stats = {q["MetricStat"]["Stat"] for c in calls for q in c["body"].get("MetricDataQueries", [])}
    assert stats == {"Average", "Maximum", "p95", "SampleCount"}
    assert {q["MetricStat"]["Period"] for c in calls for q in c["body"].get("MetricDataQueries", [])} == {3600}
    assert sum(1 for c in calls if c["body"].get("NextToken")) >= 5  # 21 results, 4 a page: NextToken followed
    assert all(r["authorization"].startswith("AWS4-HMAC-SHA256") for r in front.requests)


def test_incremental_runs_skip_when_nothing_changed_and_filter_instances(agent, warehouse):
    front, _ = agent
    window = {"since": START, "until": START + timedelta(hours=HOURS)}
    first = run(warehouse, options(front, instance_ids=["i-0ddd3333eeee4444f"]), **window)
    assert first.status == "succeeded" and first.rows == HOURS
    assert query(warehouse, "SELECT DISTINCT gpu_uuid FROM gpu_metrics_hourly") == [("i-0ddd3333eeee4444f:0",)]
    again = run(warehouse, options(front, instance_ids=["i-0ddd3333eeee4444f"]), **window)
    assert again.status == "skipped"


def test_moto_alone_can_not_answer_an_extended_statistic(agent):
    """What the front is for: if this starts passing, moto learned percentiles and the front's part can go."""
    _, moto_url = agent
    cw = boto3.client(
        "cloudwatch",
        endpoint_url=moto_url,
        region_name="us-east-1",
        config=botocore.config.Config(retries={"max_attempts": 1}),
    )
    metric = {
        "Namespace": "CWAgent",
        "MetricName": "nvidia_smi_utilization_gpu",
        "Dimensions": [
            {"Name": "InstanceId", "Value": GPUS[2][0]},
            {"Name": "index", "Value": "0"},
            {"Name": "name", "Value": GPUS[2][2]},
            {"Name": "host", "Value": GPUS[2][3]},
            {"Name": "arch", "Value": "x86_64"},
        ],
    }
    average = cw.get_metric_data(
        MetricDataQueries=[{"Id": "a", "MetricStat": {"Metric": metric, "Period": 3600, "Stat": "Average"}}],
        StartTime=START,
        EndTime=START + timedelta(hours=1),
    )
    assert average["MetricDataResults"][0]["Values"] == [pytest.approx(expected(2, 0)["util_mean"])]
    with pytest.raises(botocore.exceptions.ClientError):
        cw.get_metric_data(
            MetricDataQueries=[{"Id": "p", "MetricStat": {"Metric": metric, "Period": 3600, "Stat": "p95"}}],
            StartTime=START,
            EndTime=START + timedelta(hours=1),
        )


def test_an_unreachable_endpoint_fails_with_one_sentence(warehouse, monkeypatch):
    use_dummy_credentials(monkeypatch)
    result = run(
        warehouse,
        {"region": "us-east-1", "endpoint_url": "http://127.0.0.1:9", "max_attempts": 1},
        since=START,
        until=START + timedelta(hours=1),
    )
    assert result.status == "failed" and result.error.startswith("cw: ")
    assert "ListMetrics" in result.error or "Could not connect" in result.error
    assert query(warehouse, "SELECT count(*) FROM gpu_metrics_hourly") == [(0,)]


def test_doctor_checks_cloudwatch_with_the_check_and_extra_its_spec_names(agent, tmp_path):
    from gpufinops.interfaces import doctor_sources
    from gpufinops.jobs.config import parse_source

    _, moto_url = agent
    table = {"type": "cloudwatch_gpu", "schedule": "17 * * * *", "region": "us-east-1", "endpoint_url": moto_url}
    source = parse_source("cw", table)
    assert doctor_sources.needs_extra(source) == "aws"
    check = doctor_sources.check_of("cloudwatch_gpu")
    assert check is not None
    status, detail, fix = check(source, tmp_path, 30.0)  # moto imports a service on its first call: slow under load
    assert status == doctor_sources.OK and "CWAgent series" in detail and fix is None, detail
    empty = parse_source("cw", {**table, "namespace": "Nothing"})
    assert check(empty, tmp_path, 30.0)[0] == doctor_sources.WARN
