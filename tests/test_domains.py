"""The declared value domains (warehouse/domains.py), the page bounds (ingest/core/paging.py) and the
error funnel (ingest/core/funnel.py) on their own: each must be able to refuse, and the docs' table
is the one the declarations generate."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.ingest.core import funnel, paging
from gpufinops.ingest.core.registry import IngestError, default_registry
from gpufinops.warehouse import domains, schema

LOADS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "sources" / "loads.md"  # the generated domain table


def test_every_declared_column_is_a_column_of_its_table_and_every_loaded_table_is_declared():
    for table, columns in domains.DOMAINS.items():
        names = set(schema.TABLES[table].schema.names)
        assert set(columns) <= names, (table, set(columns) - names)
        for column, domain in columns.items():
            other = domain.at_most
            assert other is None or other in names, (table, column)
    loaded = {cls.meta.target_table for cls in default_registry()}
    assert loaded <= set(domains.DOMAINS), loaded - set(domains.DOMAINS)


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("util_mean", -50.0, "is outside 0–100 %"),
        ("util_max", 250.0, "is outside 0–100 %"),
        ("util_mean", math.nan, "is not a finite number"),
        ("power_mean_w", math.inf, "is not a finite number"),
        ("mem_total_mib", 1e308, "is outside 0–1048576 MiB"),
        ("samples", -5, "is outside 0–2147483647"),
        ("sm_active_mean", 1.5, "is outside 0–1"),
        ("team", "ml\r\nBcc: x@example.com", "holds a control character"),
        ("gpu_model", "x" * 300, "is longer than 256 characters"),
        ("hour", datetime(1970, 1, 1, tzinfo=UTC), "is not a plausible time"),
        ("hour", datetime.now(UTC) + timedelta(days=3), "is not a plausible time"),
    ],
)
def test_a_value_outside_its_domain_is_named(column, value, why):
    assert why in (domains.reason("gpu_metrics_hourly", column, value) or "")


def test_values_inside_their_domain_pass():
    row = {"mem_total_mib": 40960.0}
    for column, value in (("util_mean", 0.0), ("util_max", 100.0), ("mem_used_max_mib", 40960.0), ("samples", 0)):
        assert domains.reason("gpu_metrics_hourly", column, value, row) is None
    assert domains.reason("gpu_metrics_hourly", "team", None) is None  # unknown is not wrong
    assert "is more than mem_total_mib" in domains.reason("gpu_metrics_hourly", "mem_used_max_mib", 50000.0, row)


def test_the_sql_guard_refuses_what_the_python_check_refuses():
    """The runner's guard (SQL) and an ingestor's own check (Python) read the same declarations."""
    con = duckdb.connect()
    columns = ["hour", "gpu_uuid", "util_mean", "mem_used_max_mib", "mem_total_mib", "team"]
    good = ("TIMESTAMPTZ '2026-01-01 00:00:00+00'", "'g0'", "50.0", "100.0", "200.0", "'ml'")
    select = "SELECT " + ", ".join(f"{v} AS {c}" for c, v in zip(columns, good))
    guarded = domains.guard_sql("gpu_metrics_hourly", select, columns, ("hour", "gpu_uuid"))
    assert len(con.execute(guarded).fetchall()) == 1
    for column, bad, why in (
        ("util_mean", "'NaN'::DOUBLE", "is not a finite number"),
        ("util_mean", "-50.0", "is outside 0–100 %"),
        ("mem_used_max_mib", "300.0", "is more than mem_total_mib 200.0"),
        ("team", "'a' || chr(10) || 'b'", "value 'a?b' holds a control character"),
    ):
        values = [bad if c == column else v for c, v in zip(columns, good)]
        select = "SELECT " + ", ".join(f"{v} AS {c}" for c, v in zip(columns, values))
        with pytest.raises(duckdb.Error) as caught:
            con.execute(domains.guard_sql("gpu_metrics_hourly", select, columns, ("hour", "gpu_uuid")))
        sentence = funnel.domain_error("src", "file x.csv", "gpu_metrics_hourly", caught.value)
        assert sentence is not None and sentence.startswith("src: file x.csv: gpu_metrics_hourly row (hour 2026-01-01")
        assert f"gpu_uuid g0): column {column} value '" in sentence and why in sentence, sentence
        assert domains.reason(
            "gpu_metrics_hourly", column, con.execute(f"SELECT {bad}").fetchone()[0], {"mem_total_mib": 200.0}
        )


def test_the_docs_domain_table_is_the_one_the_declarations_generate():
    assert domains.readme_block(LOADS_PAGE.read_text()) == domains.markdown_table(), (
        "docs/sources/loads.md's value-domain table drifted: regenerate it with "
        "`.venv/bin/python -m gpufinops.warehouse.domains`"
    )


# ---- paging ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("period", [1, 2, 3])
def test_a_token_seen_before_at_any_distance_stops_the_listing_naming_it(period):
    pages = paging.Pages("src", "ListThings of ns")
    tokens = [f"t{i % period}" for i in range(10)]
    with pytest.raises(
        IngestError, match=rf"^src: ListThings of ns answered a page token it answered {period} page\(s\) before"
    ):
        for token in tokens:
            pages.follow(token)
    assert pages.pages == period + 1
    assert paging.Pages("src", "x").follow(None) is None and paging.Pages("src", "x").follow("") is None


def test_each_reads_the_token_of_every_page():
    pages = paging.Pages("src", "ListObjectsV2")
    answered = [{"NextContinuationToken": "A"}, {"NextContinuationToken": "B"}, {"NextContinuationToken": "A"}]
    with pytest.raises(IngestError, match="answered a page token it answered 2 page"):
        list(pages.each(answered))


def test_pages_and_time_are_bounded():
    pages = paging.Pages("src", "ListThings", max_pages=3)
    for token in ("1", "2", "3"):
        pages.follow(token)
    with pytest.raises(IngestError, match=r"ListThings answered more than 3 pages \(max_pages\); stopped"):
        pages.follow("4")
    now = [0.0]
    slow = paging.Pages("src", "GetThings", max_seconds=60, clock=lambda: now[0])
    assert list(slow.each(iter([1, 2]))) == [1, 2]
    now[0] = 61.0
    with pytest.raises(IngestError, match=r"GetThings still paging after 61 s, 3 pages \(max_listing_s 60\)"):
        list(slow.each(iter([3])))


def test_the_running_source_s_bounds_are_the_listing_s_defaults():
    from gpufinops.ingest.core import transport
    from gpufinops.ingest.storage.options import StorageOptions

    assert paging.Pages("src", "x").max_pages == transport.DEFAULT.max_pages
    with transport.running(StorageOptions.of(max_pages=7, max_listing_s=3.0)):
        pages = paging.Pages("src", "x")
    assert (pages.max_pages, pages.max_seconds) == (7, 3.0)


# ---- the funnel -----------------------------------------------------------------------------------


def test_engine_text_is_one_short_line_without_sql_or_long_numbers():
    con = duckdb.connect()
    with pytest.raises(duckdb.Error) as caught:
        con.execute("SELECT CAST(CAST('1e300' AS DOUBLE) AS DECIMAL(38,15)) AS x, CAST('{bad' AS JSON) AS y")
    text = funnel.engine_text(caught.value)
    assert "LINE 1" not in text and "^" not in text and "\n" not in text and len(text) <= funnel.LONGEST
    assert "1e+300" in text and "0000000000" not in text, text
    with pytest.raises(duckdb.Error) as caught:
        con.execute("SELECT CAST('{' || repeat('x', 500) AS JSON)")
    text = funnel.engine_text(caught.value)
    assert len(text) <= funnel.LONGEST and "x" * 60 not in text, text
    assert funnel.load_error("src", "object s3://b/k", caught.value).startswith("src: object s3://b/k: ")


def test_money_is_refused_beyond_the_ledger_in_either_sign():
    assert domains.reason("cost_line_items", "BilledCost", -1e300) == "is not an amount below 10^23"
    assert domains.reason("cost_line_items", "BilledCost", -12.5) is None
    assert domains.reason("spot_prices", "price_usd", -0.01) == "is not an amount from 0 to 10^23"
