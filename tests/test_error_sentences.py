"""Every error sentence says where, in 200 characters, with no raw control character.

The one funnel (ingest.core.scrub.brief) shapes what users see: the CLI's line, the ingest ledger's
error (escaped, long values cut, every word kept), an MCP tool's refusal. tests/conftest.py's
``error_sentences`` fixture records every sentence the hostile suites produce through it and checks each
(``check_sentence``); the tests here check the funnel on the issue's cases and that the check can fail.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest

from gpufinops.ingest.core import scrub
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.nvidia_smi_csv import NvidiaSmiCsv
from tests.conftest import check_sentence

HUGE_TEAM = "x" * 100_000  # the 100 kB --team: echoed whole, 100,115 characters
HOSTILE = "vision\r\nBcc: thief@evil.example\x00\x1b[31m"


@pytest.mark.parametrize(
    "sentence",
    [
        f"cli: --team: unknown team {HUGE_TEAM!r} (known: nlp, vision)",
        f"mcp: costs_daily: team: this token may not see team {HOSTILE!r}",
        f"api: GET /costs: team: unknown team '{HOSTILE}'",
        "focus: file /tmp/" + "d" * 300 + "/focus.csv: row 7: column BillingPeriodStart value '' is empty",
    ],
)
def test_the_funnel_cuts_and_escapes_and_keeps_where_and_why(sentence):
    shown = scrub.brief(sentence)
    assert check_sentence(shown) == [], shown
    assert shown.split(":")[0] == sentence.split(":")[0]  # the source first
    assert "\r" not in shown and "\x00" not in shown and "\x1b" not in shown
    if "\r" in sentence:
        assert "\\r\\n" in shown  # escaped, not dropped: the value is still told
    if sentence.endswith("is empty"):
        assert shown.endswith("is empty") and "focus.csv" in shown  # the reason and the file survive the cut


@pytest.mark.parametrize(
    ("sentence", "kept"),
    [
        (
            "aws: object /tmp/pytest-of-root/pytest-266/popen-gw1/test_a_cur_cost_beyond_the_led0/bucket/cur2/data/"
            "BILLING_PERIOD=2026-10/cur2-00001.snappy.parquet row 4: column line_item_unblended_cost value '-1e+300' "
            "is not a finite number below 10^23 (the ledger's DECIMAL(38,15))",
            ["cur2-00001.snappy.parquet row 4: column line_item_unblended_cost value '-1e+300'", "below 10^23"],
        ),
        (
            "dcgm: 1 of 2 target(s) failed after retries (the others' samples are stored): file:///tmp/pytest-of-"
            "root/pytest-266/popen-gw1/test_dcgm_exposition_file_faul0/prom/cut.prom: line 32: DCGM_FI_DEV_FB_FREE "
            "value '78991' has a timestamp that is not a plausible time (before 2000 or more than a day in the future)",
            ["cut.prom: line 32: DCGM_FI_DEV_FB_FREE value '78991'", "not a plausible time"],
        ),
    ],
)
def test_a_long_path_is_cut_before_the_row_column_value_or_reason(sentence, kept):
    """Over 200 characters, the file's directories go first: its name, row, column, value and reason stay."""
    shown = scrub.brief(sentence)
    assert len(shown) <= 200 and check_sentence(shown) == [], shown
    assert all(part in shown for part in kept), shown


def test_the_check_fails_a_sentence_that_does_not_say_where():
    assert check_sentence("invalid value") == ["no source and place before the reason"]
    assert "a raw control character" in check_sentence("s: f: bad\r\n")
    assert check_sentence("s: " + "y" * 300)[0] == "303 characters"


def test_the_ledger_keeps_every_word_escaped_with_a_huge_value_cut(tmp_path, warehouse):
    """A path pattern holding CR, NUL and 100 kB (as a hostile config could): one line, cut, escaped."""
    registry = Registry()
    registry.register(NvidiaSmiCsv)
    pattern = str(tmp_path / f"{HOSTILE}{HUGE_TEAM}*.csv")
    failed = run_source(registry, warehouse, "smi", "nvidia_smi_csv", {"path": pattern})
    assert failed.status == "failed"
    assert len(failed.error) < 400 and "\r" not in failed.error and "\x00" not in failed.error
    assert failed.error.startswith("smi: ") and "100," in failed.error  # the value's length is told


MCP_HOSTILE = [
    ("costs_daily", {"team": "n" * 1_000_000 + "\r\n\x00"}),
    ("costs_daily", {"team": "vision\r\nBcc: x\x00\x1b[31m"}),
    ("costs_daily", {"start": "NaN", "end": "inf"}),
    ("costs_daily", {"detail": {"a": ["b"] * 10_000}}),
    ("recommendations", {"limit": float("inf")}),
    ("recommendations", {"limit": "x" * 100_000}),
]


@pytest.mark.parametrize(("tool", "arguments"), MCP_HOSTILE)
def test_an_mcp_argument_of_1_mb_gets_a_short_refusal_and_no_traceback(
    tmp_path_factory, feed_template, tool, arguments
):
    pytest.importorskip("mcp", reason="the mcp extra (`.venv/bin/pip install -e '.[mcp]'`)")
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    from tests.mcp_fixture import WAIT_S, build_home, call
    from tests.test_api import TOKENS
    from tests.test_mcp import stdio

    home = build_home(tmp_path_factory.mktemp("mcp-hostile"), feed_template)
    lead = next(name for name in TOKENS if "VISION" in name)
    params = stdio(home, lead, env={lead: TOKENS[lead]})

    async def work(errlog) -> tuple[bool, str]:
        with anyio.fail_after(WAIT_S):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await call(session, tool, arguments)

    with tempfile.TemporaryFile("w+") as errlog:
        is_error, text = anyio.run(work, errlog)
        errlog.seek(0)
        log = errlog.read()
    assert is_error and len(text) <= 200 and "\r" not in text and "\x00" not in text, text[:300]
    assert tool in text and any(name in text for name in arguments), text
    assert "Traceback" not in log and len(log) < 10_000, log[-2000:]


def test_an_nvidia_smi_time_without_milliseconds_names_its_line(tmp_path, warehouse):
    log = tmp_path / "node1.csv"
    log.write_text(
        "timestamp, uuid, utilization.gpu [%]\n"
        "2026/11/02 10:00:00.000, GPU-1, 5 %\n\n"  # a blank line is not counted
        "2026/11/02 10:00:01, GPU-1, 5 %\n"
    )
    registry = Registry()
    registry.register(NvidiaSmiCsv)
    failed = run_source(registry, warehouse, "smi", "nvidia_smi_csv", {"path": str(log)})
    assert failed.status == "failed"
    assert f"file {log}: line 3: column 'timestamp' has value '2026/11/02 10:00:01'" in failed.error


def _focus_bill_with(tmp_path, column: str, data_row: int, value: str) -> Path:
    """The FOCUS sample with ``column`` of data row ``data_row`` (1-based) set to ``value``, as focus.csv."""
    import csv

    from tests.conftest import FOCUS_SAMPLE

    with open(FOCUS_SAMPLE, newline="") as f:
        rows = list(csv.reader(f))
    rows[data_row][rows[0].index(column)] = value
    bill = tmp_path / "focus.csv"
    with open(bill, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return bill


def test_a_focus_row_without_its_billing_period_is_named(tmp_path, warehouse, focus_registry):
    bill = _focus_bill_with(tmp_path, "BillingPeriodStart", 3, "")
    failed = run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(bill)})
    assert failed.status == "failed"
    assert f"file {bill}: row 3: column BillingPeriodStart is empty" in failed.error


def test_a_focus_row_with_tags_that_are_not_json_is_named(tmp_path, warehouse, focus_registry):
    bill = _focus_bill_with(tmp_path, "Tags", 2, "{not json")
    failed = run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(bill)})
    assert failed.status == "failed"
    assert f"file {bill} row 2: column Tags value '{{not json' is not valid JSON" in failed.error, failed.error


def test_a_latin_1_byte_says_the_file_is_not_utf_8(tmp_path, warehouse, focus_registry):
    from tests.conftest import FOCUS_SAMPLE

    bill = tmp_path / "focus.csv"
    bill.write_bytes(open(FOCUS_SAMPLE, "rb").read().replace(b"Compute", b"C\xf3mpute", 1))  # 'ó' in latin-1
    failed = run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(bill)})
    assert failed.status == "failed"
    assert f"file {bill} line " in failed.error and "not UTF-8 (the file must be UTF-8 encoded)" in failed.error
    assert "DESCRIBE" not in failed.error, failed.error  # the engine's query is not the reason


def test_a_gcp_export_with_a_garbage_line_names_the_line(tmp_path, warehouse):
    from gpufinops.ingest.core.registry import default_registry

    export = tmp_path / "billing.jsonl"
    export.write_text('{"cost": 1.0, "usage_start_time": "2026-11-01T00:00:00Z"}\n{garbage\n')
    failed = run_source(default_registry(), warehouse, "gcp", "gcp_billing_export", {"path": str(export)})
    assert failed.status == "failed"
    assert f"file {export} line 2: not valid JSON (" in failed.error and "'{garbage'" in failed.error, failed.error
