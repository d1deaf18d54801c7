"""The error funnel on the files that used to print the engine's own text: each case fails through the real
CLI with one ``gpufinops:`` sentence naming the file (or object), no SQL excerpt, no 300-digit value, the
warehouse and cursor as before (the harness: tests/fuzz_harness.py)."""

from __future__ import annotations

import duckdb
import pytest

from tests import aws_cur_data
from tests.fuzz_harness import assert_refused, good_run, report_outcomes, write_config
from tests.test_fuzz import cur2_after_a_good_month, focus_rows, write_focus


@pytest.fixture(scope="module", autouse=True)
def _outcomes(request):
    yield
    report_outcomes(request)


def _parquet(csv_path, parquet, replace: str) -> None:
    with duckdb.connect() as con:
        con.execute(
            f"CREATE TABLE t AS SELECT * FROM read_csv('{csv_path}', all_varchar = true, nullstr = ['NULL', ''])"
        )
        con.execute(f"COPY (SELECT * REPLACE ({replace}) FROM t) TO '{parquet}' (FORMAT parquet)")


def _header_too_long(export, tmp, header, rows):
    write_focus(export / "bad.csv", header + ["y" * 200_000], rows)


def _cr_in_header(export, tmp, header, rows):
    write_focus(export / "bad.csv", header, rows)
    data = (export / "bad.csv").read_bytes()
    (export / "bad.csv").write_bytes(data.replace(b'"BillingAccountId"', b"Billing\rAccountId", 1))


def _parquet_case(replace: str):
    def write(export, tmp, header, rows):
        write_focus(tmp / "bad.csv", header, rows)
        _parquet(tmp / "bad.csv", export / "bad.parquet", replace)

    return write


def _team_with_crlf(export, tmp, header, rows):
    write_focus(export / "bad.csv", header + ["x_Team"], [dict(r, x_Team="ml\r\nBcc: all@example.com") for r in rows])


CASES = {
    "a header field over the CSV field limit": (
        _header_too_long,
        "bad.csv can not be read as csv: line 1",
        "field limit",
    ),
    "a CR inside a header name": (_cr_in_header, "bad.csv can not be read as csv: line 1", "control character"),
    "malformed JSON tags": (
        _parquet_case("'{bad' AS \"Tags\""),
        "bad.parquet row 1: column Tags value '{bad'",
        "not valid JSON",
    ),
    "a 1e300 cost": (
        _parquet_case("CAST('1' || repeat('0', 300) AS DOUBLE) AS \"BilledCost\""),
        "bad.parquet row 1: column BilledCost value '1e+300'",
        "below 10^23",
    ),
    "an epoch integer as a time": (
        _parquet_case('CAST(1700000000 AS BIGINT) AS "ChargePeriodStart"'),
        "bad.parquet",
        "BIGINT -> TIMESTAMP WITH TIME ZONE",
    ),
    "a CR/LF in a team": (_team_with_crlf, "bad.csv row 1: column x_Team value 'ml??Bcc:", "control character"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_focus_files_engine_errors_name_the_file(tmp_path, case):
    header, rows = focus_rows(8)
    export = tmp_path / "export"
    export.mkdir()
    write_focus(export / "good.csv", header, rows)
    config = write_config(tmp_path, f'[sources.focus]\ntype = "focus_files"\npath = "{export}/*"')
    good_run(config)
    write, names, reason = CASES[case]
    write(export, tmp_path, header, [dict(r, BillingAccountId="other") for r in rows])
    assert_refused(tmp_path, config, "cost_line_items", names, reason)


@pytest.mark.parametrize("cost", [1e300, -1e300, 5e23])
def test_a_cur_cost_beyond_the_ledger_names_the_object(tmp_path, cost):
    root, config, bad = cur2_after_a_good_month(tmp_path)
    bad[3].columns.update(line_item_unblended_cost=cost)
    aws_cur_data.write_cur2(root, {"2026-10": bad})
    assert_refused(
        tmp_path, config, "cost_line_items", "cur2-00001.snappy.parquet row 4: column line_item_unblended_cost", "10^23"
    )
