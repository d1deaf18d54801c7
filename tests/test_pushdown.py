"""The cost rollup pushed down to Athena: one SQL definition, checked in three ways.

1. The rollup (DuckDB text) over CUR 2.0 files equals the local path's line items summed the same way.
2. Its Trino text, read back into DuckDB by sqlglot and run over the same files, gives the same rows.
3. ``aws_cur`` with ``engine = "athena"`` against moto's Athena over loopback (behind a proxy that
   pages results like the real service): polling, pagination, the query text sent, and the
   warehouse equal to the local path to the cent; FAILED and CANCELLED queries fail the run and
   leave the warehouse as it was. moto executes no SQL, so the rows it returns are what the Trino
   text computes over the fixture (step 2's result) — queued through moto's own results API.
"""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.aws import aws_athena, cur_mapping
from gpufinops.ingest.aws.aws_cur2_format import CUR2_SCHEMA
from gpufinops.ingest.core import pushdown
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests import aws_cur_data as data
from tests.athena_loopback import AthenaProxy, queue_results, set_execution_polls
from tests.aws_loopback import empty_s3, use_dummy_credentials
from tests.conftest import query

REGISTRY = default_registry()
TAGS = ("team", "user:team", "user_team", "k8s_label_team")


def transfer_lines(account: str, period: str) -> list[data.Line]:
    """Data transfer of one instance-hour on three usage types: one rollup row, as in a real CUR."""
    base = data.lines(account, period)[0].columns  # the on-demand p4d hour
    out = []
    for i, (usage, cost, gb) in enumerate(
        (
            ("USE1-DataTransfer-Out-Bytes", "0.09", 1.0),
            ("USE1-DataTransfer-Regional-Bytes", "0.02", 2.0),
            ("USE1-USW2-AWS-Out-Bytes", "0.04", 2.0),
        )
    ):
        cols = {
            **base,
            "line_item_usage_type": usage,
            "line_item_unblended_cost": float(cost),
            "pricing_unit": "GB",
            "line_item_usage_amount": gb,
            "product_product_family": "Data Transfer",
            "product_instance_type": None,
            "product": {"product_name": "Amazon Elastic Compute Cloud", "region": "us-east-1"},
            "pricing_public_on_demand_cost": float(cost),
            "pricing_public_on_demand_rate": float(cost) / gb,
            "identity_line_item_id": f"{account}-{period}-dt{i}",
            "line_item_line_item_description": usage,
        }
        out.append(data.Line(cols, Decimal(cost), "Usage", "Standard"))
    return out


PERIODS = {
    "2026-09": [
        *data.lines("111122223333", "2026-09"),
        *data.lines("444455556666", "2026-09", split=True),
        *transfer_lines("111122223333", "2026-09"),
    ],
    "2026-10": [*data.lines("111122223333", "2026-10", Decimal("1.37")), *transfer_lines("111122223333", "2026-10")],
}
SUMS = ", ".join(f'sum("{c}")' for c in pushdown.ROLLUP_SUMS)
KEYS = ", ".join(f'"{k}"' for k in pushdown.ROLLUP_KEYS if k != "x_GpuModel")


@pytest.fixture(scope="module")
def cur_files(tmp_path_factory):
    """The fixture periods as CUR 2.0 Parquet, and a DuckDB with them as the Glue table ``cur_db.cur``."""
    root = tmp_path_factory.mktemp("cur")
    paths = {}
    for period, lines in PERIODS.items():
        paths[period] = root / f"{period}.parquet"
        pq.write_table(data.table(lines).cast(CUR2_SCHEMA), paths[period])
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE SCHEMA cur_db")
    union = " UNION ALL ".join(
        f"SELECT *, '{p}' AS billing_period FROM read_parquet('{path}')" for p, path in paths.items()
    )
    con.execute(f"CREATE VIEW cur_db.cur AS {union}")
    yield root, paths, con
    con.close()


def local_rollup(con, paths) -> list[tuple]:
    files = ", ".join(f"'{p}'" for p in paths.values())
    relation = f"read_parquet([{files}], union_by_name = true)"
    described = con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    mapped = cur_mapping.cur_select(
        relation, [r[0] for r in described], {r[0]: r[1] for r in described}, TAGS, only=pushdown.ROLLUP_COLUMNS
    )
    return con.sql(f"SELECT * FROM ({pushdown.rollup_select(mapped)}) ORDER BY ALL").fetchall()


def athena_rows(con) -> tuple[list[str], list[list[str | None]]]:
    """What Athena returns for the pushed-down text: run it (read back by sqlglot) here."""
    text = aws_athena.rollup_query('"cur_db"', '"cur"', sorted(PERIODS), TAGS)
    back = pushdown.back_to_duckdb(text, "athena")
    rel = con.sql(back)
    header = rel.columns
    cast = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in header)
    return header, [list(r) for r in con.sql(f"SELECT {cast} FROM ({back})").fetchall()]


def test_the_rollup_equals_the_local_path_summed_the_same_way(cur_files, tmp_path, warehouse):
    root, paths, con = cur_files
    data.write_cur2(tmp_path / "bucket", PERIODS)
    result = run_source(REGISTRY, warehouse, "cur", "aws_cur", {"path": str(tmp_path / "bucket")}, team_tag_keys=TAGS)
    assert result.status == "succeeded", result.error
    expected = query(warehouse, f"SELECT {KEYS}, {SUMS} FROM cost_line_items GROUP BY ALL ORDER BY ALL")
    rollup = local_rollup(con, paths)
    gpu_model_at = pushdown.ROLLUP_COLUMNS.index("x_GpuModel")
    got = sorted((tuple(v for i, v in enumerate(r) if i != gpu_model_at) for r in rollup), key=repr)
    assert got == sorted(expected, key=repr)  # exact: every key, every DECIMAL sum
    assert len(rollup) < sum(len(v) for v in PERIODS.values())  # it does roll up


def test_the_trino_text_read_back_gives_the_same_rows(cur_files):
    _, paths, con = cur_files
    header, rows = athena_rows(con)
    assert header == list(pushdown.ROLLUP_COLUMNS)
    text_table = con.sql(
        "SELECT * FROM (VALUES "
        + ", ".join(
            "(" + ", ".join("NULL" if v is None else "'" + v.replace("'", "''") + "'" for v in r) + ")" for r in rows
        )
        + ") AS t("
        + ", ".join(f'"{c}"' for c in header)
        + ")"
    )
    con.register("athena_result", text_table.to_arrow_table())
    typed = con.sql(f"SELECT * FROM ({pushdown.typed_rollup_select('athena_result')}) ORDER BY ALL").fetchall()
    assert typed == local_rollup(con, paths)
    text = aws_athena.rollup_query('"cur_db"', '"cur"', sorted(PERIODS), TAGS)
    assert "element_at(" in text.lower() and "map_extract_value" not in text.lower()  # Trino's map lookup
    assert "INT128" not in text and "HUGEINT" not in text.upper()


def test_unknown_dialect_is_refused():
    with pytest.raises(ValueError, match="unknown SQL dialect"):
        pushdown.to_dialect("SELECT 1", "oracle")


@pytest.fixture
def athena(moto_endpoint, monkeypatch):
    with AthenaProxy(empty_s3(moto_endpoint, monkeypatch), page_size=7) as proxy:
        yield moto_endpoint, proxy
    set_execution_polls(moto_endpoint, None)


def athena_options(proxy) -> dict:
    return {
        "engine": "athena",
        "database": "cur_db",
        "table": "cur",
        "workgroup": "primary",
        "output_location": "s3://athena-results/gpufinops/",
        "region": "us-east-1",
        "endpoint_url": proxy.url,
        "poll_interval_s": 0.01,
    }


def sent_queries(moto_endpoint) -> list[str]:
    import boto3

    client = boto3.client("athena", region_name="us-east-1", endpoint_url=moto_endpoint)
    ids = client.list_query_executions()["QueryExecutionIds"]
    return [client.get_query_execution(QueryExecutionId=i)["QueryExecution"]["Query"] for i in ids]


def test_athena_engine_polls_pages_and_loads_the_rollup(athena, cur_files, tmp_path, warehouse):
    moto_endpoint, proxy = athena
    _, _, con = cur_files
    header, rows = athena_rows(con)
    assert len(rows) > 7  # more than one page
    set_execution_polls(moto_endpoint, 2)  # each query is QUEUED, then RUNNING, before it succeeds
    queue_results(moto_endpoint, [(["billing_period"], [[p] for p in sorted(PERIODS)]), (header, rows)])
    result = run_source(REGISTRY, warehouse, "cur_athena", "aws_cur", athena_options(proxy), team_tag_keys=TAGS)
    assert result.status == "succeeded", result.error
    assert result.rows == len(rows)
    assert proxy.result_calls > 2  # the rollup came in several pages
    assert sent_queries(moto_endpoint)[-1] == aws_athena.rollup_query('"cur_db"', '"cur"', sorted(PERIODS), TAGS)
    watermark = query(warehouse, "SELECT watermark FROM ingest_runs WHERE source = 'cur_athena'")[0][0]
    assert watermark.startswith("2026-10 (athena: 2 queries")

    data.write_cur2(tmp_path / "bucket", PERIODS)  # the same data through the file path
    assert (
        run_source(
            REGISTRY, warehouse, "cur_files", "aws_cur", {"path": str(tmp_path / "bucket")}, team_tag_keys=TAGS
        ).status
        == "succeeded"
    )
    per_account = query(
        warehouse,
        """
        SELECT x_Source, "BillingAccountId", strftime("BillingPeriodStart", '%Y-%m'), sum("BilledCost"),
               sum("EffectiveCost"), sum("ListCost"), count(DISTINCT "x_GpuModel")
        FROM cost_line_items GROUP BY ALL ORDER BY ALL""",
    )
    athena_side = [r[1:] for r in per_account if r[0] == "cur_athena"]
    files_side = [r[1:] for r in per_account if r[0] == "cur_files"]
    assert athena_side == files_side and athena_side  # to the last digit, GPU models found the same way

    # a re-run re-queries the newest periods (restatement) and replaces them: no duplicates
    queue_results(moto_endpoint, [(["billing_period"], [[p] for p in sorted(PERIODS)]), (header, rows)])
    before = query(warehouse, "SELECT count(*) FROM cost_line_items WHERE x_Source = 'cur_athena'")
    assert (
        run_source(REGISTRY, warehouse, "cur_athena", "aws_cur", athena_options(proxy), team_tag_keys=TAGS).status
        == "succeeded"
    )
    assert query(warehouse, "SELECT count(*) FROM cost_line_items WHERE x_Source = 'cur_athena'") == before


def _fail(moto_endpoint: str, query_id: str) -> None:
    # moto cannot make a query fail: set the state on its in-process backend (the server runs in this process)
    from moto.athena.models import athena_backends

    execution = athena_backends["123456789012"]["us-east-1"].executions[query_id]
    execution.status = "FAILED"


def _cancel(moto_endpoint: str, query_id: str) -> None:
    import boto3

    boto3.client("athena", region_name="us-east-1", endpoint_url=moto_endpoint).stop_query_execution(
        QueryExecutionId=query_id
    )  # as if someone cancelled it in the console


@pytest.mark.parametrize("outcome", ["failed", "cancelled"])
def test_a_failed_or_cancelled_query_fails_the_run_and_writes_nothing(athena, cur_files, warehouse, outcome):
    moto_endpoint, proxy = athena
    _, _, con = cur_files
    header, rows = athena_rows(con)
    queue_results(moto_endpoint, [(["billing_period"], [[p] for p in sorted(PERIODS)]), (header, rows)])
    assert (
        run_source(REGISTRY, warehouse, "cur_athena", "aws_cur", athena_options(proxy), team_tag_keys=TAGS).status
        == "succeeded"
    )
    before = query(warehouse, 'SELECT count(*), sum("BilledCost") FROM cost_line_items')
    started = []

    def on_start(query_id: str) -> None:
        started.append(query_id)
        if len(started) == 2:  # the rollup, not the period listing
            (_fail if outcome == "failed" else _cancel)(moto_endpoint, query_id)

    proxy.on_start = on_start
    set_execution_polls(moto_endpoint, 1)
    queue_results(moto_endpoint, [(["billing_period"], [[p] for p in sorted(PERIODS)]), (header, rows)])
    result = run_source(REGISTRY, warehouse, "cur_athena", "aws_cur", athena_options(proxy), team_tag_keys=TAGS)
    assert result.status == "failed"
    assert f"Athena query {started[1]}" in result.error and outcome in result.error
    assert query(warehouse, 'SELECT count(*), sum("BilledCost") FROM cost_line_items') == before
    assert query(warehouse, "SELECT status, error FROM ingest_runs ORDER BY started_at DESC LIMIT 1")[0][0] == "failed"


def test_athena_needs_its_table(warehouse, monkeypatch):
    use_dummy_credentials(monkeypatch)
    result = run_source(REGISTRY, warehouse, "cur_athena", "aws_cur", {"engine": "athena", "database": "cur_db"})
    assert result.status == "failed" and "needs table" in result.error
    result = run_source(
        REGISTRY, warehouse, "cur_athena", "aws_cur", {"engine": "athena", "database": "cur_db; DROP", "table": "cur"}
    )
    assert result.status == "failed" and "not a valid Athena identifier" in result.error
