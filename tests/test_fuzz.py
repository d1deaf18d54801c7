"""Hostile input for every cost ingestor (FOCUS files, CUR 2.0 and legacy CUR, Google Cloud export files and
BigQuery), through the real CLI: exit code, one sentence, nothing lost (utilisation sources and config:
tests/test_fuzz_metrics.py; the harness: tests/fuzz_harness.py).

Each case loads a good file first, then adds a bad one (a row mutated at a position drawn from a
fixed seed) and runs ``gpufinops ingest`` again in-process. It asserts the exit status (1 for bad
data, 2 for a bad config), that stderr is one ``gpufinops:`` sentence naming the bad file (or target,
or query) and the reason, no traceback, and that the target table and the source's cursor are
exactly as before (``table_digest``). The quirks that are valid input (a BOM, a symlink to a file
already matched, a symlink loop under ``**``) load, once. Bounded: about 80 cases, seconds in all.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import random
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.interfaces import cli
from tests import aws_cur_data
from tests.conftest import FOCUS_SAMPLE, query, table_digest
from tests.fuzz_harness import SEED, assert_refused, count, good_run, report_outcomes, write_config
from tests.gcp_loopback import GCP_DATA, copy_consistent_csv

# ---- FOCUS files (CSV and Parquet) ----------------------------------------------------------------


def focus_rows(n: int = 40) -> tuple[list[str], list[dict]]:
    with open(FOCUS_SAMPLE, newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r, _ in zip(reader, range(n))]
        return list(reader.fieldnames or ()), rows


def write_focus(path: Path, header: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerows([[r.get(h, "") for h in header] for r in rows])


def to_parquet(csv_path: Path, parquet: Path) -> None:
    """The CSV as Parquet with money as DOUBLE (how a warehouse export would type it)."""
    money = ", ".join(f'TRY_CAST("{c}" AS DOUBLE) AS "{c}"' for c in ("BilledCost", "EffectiveCost", "ListCost"))
    with duckdb.connect() as con:
        con.execute(
            f"CREATE TABLE t AS SELECT * FROM read_csv('{csv_path}', all_varchar = true, nullstr = ['NULL', ''])"
        )
        con.execute(f"COPY (SELECT * REPLACE ({money}) FROM t) TO '{parquet}' (FORMAT parquet)")


FOCUS_MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "empty BilledCost": (lambda r: r.update(BilledCost=""), "column BilledCost is empty"),
    "empty EffectiveCost": (lambda r: r.update(EffectiveCost="NULL"), "column EffectiveCost is empty"),
    "empty ChargeCategory": (lambda r: r.update(ChargeCategory=""), "column ChargeCategory is empty"),
    "non-numeric cost": (lambda r: r.update(BilledCost="abc"), "'abc'"),
    "inf cost": (lambda r: r.update(BilledCost="inf"), "'inf'"),
    "period reversed": (lambda r: r.update(ChargePeriodEnd="2024-09-01 00:00:00"), "is before ChargePeriodStart"),
    "far outside its billing period": (
        lambda r: r.update(ChargePeriodStart="2022-01-01 00:00:00", ChargePeriodEnd="2022-01-01 01:00:00"),
        "outside its billing period",
    ),
    "charge in 1970": (lambda r: r.update(ChargePeriodStart="1970-01-01 00:00:00"), "not a plausible time"),
    "charge in 2100": (
        lambda r: r.update(
            ChargePeriodStart="2100-01-01 00:00:00",
            ChargePeriodEnd="2100-01-01 01:00:00",
            BillingPeriodStart="2100-01-01 00:00:00",
            BillingPeriodEnd="2100-02-01 00:00:00",
        ),
        "not a plausible time",
    ),
    "x_GpuCount abc": (lambda r: r.update(x_GpuCount="abc"), "column x_GpuCount value 'abc' is not a whole number"),
    "negative x_GpuCount": (lambda r: r.update(x_GpuCount="-3"), "is not a GPU count"),
}


@pytest.fixture
def focus_home(tmp_path):
    header, rows = focus_rows()
    export = tmp_path / "export"
    export.mkdir()
    write_focus(export / "good.csv", header, rows)
    config = write_config(tmp_path, f'[sources.focus]\ntype = "focus_files"\npath = "{export}/**/*.csv"')
    good_run(config)
    return tmp_path, config, export, header, rows


@pytest.mark.parametrize("case", list(FOCUS_MUTATIONS))
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_focus_files_refuse_a_bad_row(tmp_path, case, fmt):
    header, rows = focus_rows()
    export = tmp_path / "export"
    export.mkdir()
    rng = random.Random(f"{SEED}-{case}")
    bad_rows = [dict(r) for r in rows]
    if "x_GpuCount" in case:
        header = header + ["x_GpuCount"]
    at = rng.randrange(len(bad_rows))
    mutate, reason = FOCUS_MUTATIONS[case]
    mutate(bad_rows[at])
    if fmt == "csv":
        write_focus(export / "good.csv", header, rows)
    else:
        write_focus(tmp_path / "good.csv", header, rows)
        to_parquet(tmp_path / "good.csv", export / "good.parquet")
    config = write_config(tmp_path, f'[sources.focus]\ntype = "focus_files"\npath = "{export}/*.{fmt}"')
    good_run(config)
    if fmt == "csv":
        write_focus(export / "bad.csv", header, bad_rows)
    else:
        write_focus(tmp_path / "bad.csv", header, bad_rows)
        to_parquet(tmp_path / "bad.csv", export / "bad.parquet")
    named = f"bad.{fmt} row {at + 1}:" if not (fmt == "parquet" and case in ("non-numeric cost",)) else f"bad.{fmt}"
    if fmt == "parquet" and case == "non-numeric cost":
        reason = "column BilledCost is empty"  # the DOUBLE column holds no 'abc': TRY_CAST left it empty
    assert_refused(tmp_path, config, "cost_line_items", named, reason)


def test_focus_file_file_level_faults(focus_home):
    home, config, export, header, rows = focus_home
    rng = random.Random(SEED)
    big = rows * 30
    # a duplicated column: the first copy would silently win
    with open(export / "dup.csv", "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header + ["BilledCost"])
        w.writerows([[r[h] for h in header] + ["999"] for r in rows])
    assert_refused(home, config, "cost_line_items", "dup.csv", "has column 'BilledCost' twice")
    (export / "dup.csv").unlink()
    # a latin-1 byte late in a large file
    write_focus(export / "latin.csv", header, big)
    data = (export / "latin.csv").read_bytes()
    cut = data.index(b"Amazon", int(len(data) * (0.8 + rng.random() * 0.15)))
    (export / "latin.csv").write_bytes(data[:cut] + b"\xe9" + data[cut + 1 :])
    assert_refused(home, config, "cost_line_items", "latin.csv line", "not UTF-8")
    (export / "latin.csv").unlink()
    # a truncated large file (a half-finished upload): named, not blamed on BillingPeriodStart
    write_focus(export / "cut.csv", header, big)
    data = (export / "cut.csv").read_bytes()
    (export / "cut.csv").write_bytes(data[: int(len(data) * (0.6 + rng.random() * 0.3))])
    assert_refused(home, config, "cost_line_items", "cut.csv line", "unterminated quote")
    (export / "cut.csv").unlink()
    # a dangling symlink among the files
    os.symlink(export / "gone.csv", export / "dangling.csv")
    assert_refused(home, config, "cost_line_items", "dangling.csv is a symbolic link", "does not exist")
    (export / "dangling.csv").unlink()
    # an empty file
    (export / "empty.csv").write_bytes(b"")
    assert_refused(home, config, "cost_line_items", "empty.csv", "is empty")


def test_focus_files_valid_quirks_load_once(focus_home):
    home, config, export, header, rows = focus_home
    db = home / "wh.duckdb"
    loaded = query(db, "SELECT count(*) FROM cost_line_items")[0][0]
    assert loaded == len(rows)
    # a symlink to a file already matched, and a symlink loop under the ** pattern
    (export / "sub").mkdir()
    os.symlink(export / "good.csv", export / "sub" / "again.csv")
    os.symlink(export, export / "sub" / "loop")
    good_run(config)
    assert query(db, "SELECT count(*) FROM cost_line_items")[0][0] == len(rows)
    # a byte order mark: still the same columns
    other = [dict(r, BillingAccountId="bom-account") for r in rows[:5]]
    write_focus(export / "bom.csv", header, other)
    (export / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (export / "bom.csv").read_bytes())
    good_run(config)
    assert query(db, "SELECT count(*) FROM cost_line_items WHERE \"BillingAccountId\" = 'bom-account'")[0][0] == 5
    count("valid quirk loaded once", 3)


def test_skip_rows_quarantines_and_counts(tmp_path):
    header, rows = focus_rows()
    export = tmp_path / "export"
    export.mkdir()
    bad = [dict(r) for r in rows]
    bad[3]["BilledCost"] = ""
    bad[9]["EffectiveCost"] = "twelve"
    bad[17]["ChargePeriodEnd"] = "2024-08-01 00:00:00"
    write_focus(export / "mixed.csv", header, bad)
    config = write_config(
        tmp_path, f'[sources.focus]\ntype = "focus_files"\npath = "{export}/*.csv"\non_invalid = "skip_rows"'
    )
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert cli.main(["--config", str(config), "ingest"]) == 0
    assert "37 rows  (3 rejected, see ingest_rejects)" in out.getvalue(), out.getvalue()
    db = tmp_path / "wh.duckdb"
    rejects = query(db, 'SELECT row, "column", value, reason FROM ingest_rejects ORDER BY row')
    assert [(r[0], r[1]) for r in rejects] == [(4, "BilledCost"), (10, "EffectiveCost"), (18, "ChargePeriodEnd")]
    assert rejects[1][2] == "twelve" and "not a number" in rejects[1][3]
    assert query(db, "SELECT rows, rows_rejected FROM ingest_runs WHERE source = 'focus'") == [(37, 3)]
    assert query(db, 'SELECT count(*) FROM cost_line_items WHERE "BilledCost" IS NULL')[0][0] == 0
    # fixed upstream: the file's rejects are replaced by the next read
    write_focus(export / "mixed.csv", header, rows)
    good_run(config)
    assert query(db, "SELECT count(*) FROM ingest_rejects")[0][0] == 0
    assert query(db, "SELECT count(*) FROM cost_line_items")[0][0] == len(rows)
    count("quarantined (skip_rows)", 3)


# ---- aws_cur: CUR 2.0 Parquet, legacy CSV ----------------------------------------------------------

CUR2_MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "empty unblended cost": (lambda c: c.update(line_item_unblended_cost=None), "(line_item_unblended_cost) is empty"),
    "inf unblended cost": (
        lambda c: c.update(line_item_unblended_cost=float("inf")),
        "column line_item_unblended_cost value 'inf' is not a finite number",
    ),
    "nan unblended cost": (lambda c: c.update(line_item_unblended_cost=float("nan")), "is not a finite number"),
    "usage ends before it starts": (
        lambda c: c.update(line_item_usage_end_date=c["line_item_usage_start_date"] - timedelta(hours=5)),
        "is before ChargePeriodStart",
    ),
    "usage two years off": (
        lambda c: c.update(
            line_item_usage_start_date=c["line_item_usage_start_date"] + timedelta(days=730),
            line_item_usage_end_date=c["line_item_usage_end_date"] + timedelta(days=730),
        ),
        "not a plausible time",
    ),
}


def cur2_after_a_good_month(home: Path) -> tuple[Path, Path, list]:
    """A CUR 2.0 bucket whose September loaded cleanly, its config, and October's lines to spoil."""
    root = home / "bucket"
    aws_cur_data.write_cur2(root, {"2026-09": aws_cur_data.lines("111122223333", "2026-09")})
    config = write_config(home, f'[sources.aws]\ntype = "aws_cur"\npath = "{root}"')
    good_run(config)
    return root, config, aws_cur_data.lines("111122223333", "2026-10")


@pytest.mark.parametrize("case", list(CUR2_MUTATIONS))
def test_cur2_refuses_a_bad_line(tmp_path, case):
    root, config, bad = cur2_after_a_good_month(tmp_path)
    at = random.Random(f"{SEED}-{case}").randrange(len(bad))
    mutate, reason = CUR2_MUTATIONS[case]
    mutate(bad[at].columns)
    aws_cur_data.write_cur2(root, {"2026-10": bad})
    assert_refused(tmp_path, config, "cost_line_items", f"cur2-00001.snappy.parquet row {at + 1}:", reason)


LEGACY_MUTATIONS = {
    "empty lineItem/UnblendedCost": ("lineItem/UnblendedCost", "", "(lineItem/UnblendedCost) is empty"),
    "text cost": ("lineItem/UnblendedCost", "1,5", "is not a number"),
    "inf cost": ("lineItem/UnblendedCost", "inf", "is not a number"),
    "usage date garbage": ("lineItem/UsageStartDate", "yesterday", "is not a date/time"),
}


@pytest.mark.parametrize("case", list(LEGACY_MUTATIONS))
def test_legacy_cur_refuses_a_bad_line(tmp_path, case):
    root = tmp_path / "bucket"
    with open(aws_cur_data.LEGACY_CSV, newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames, list(reader)[:300]  # the real file's first 300 lines: enough, faster
    base = tmp_path / "base.csv"
    with open(base, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    aws_cur_data.legacy_layout(root, base)
    config = write_config(tmp_path, f'[sources.aws]\ntype = "aws_cur"\npath = "{root}"')
    good_run(config)
    at = random.Random(f"{SEED}-{case}").randrange(len(rows))
    column, value, reason = LEGACY_MUTATIONS[case]
    rows[at][column] = value
    mutated = tmp_path / "bad.csv"
    with open(mutated, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    aws_cur_data.legacy_layout(root, mutated, report="legacy2")
    assert_refused(tmp_path, config, "cost_line_items", f"legacy2-1.csv row {at + 1}:", reason)


def test_aws_cur_manifest_keys_and_links(tmp_path):
    root = tmp_path / "bucket"
    aws_cur_data.write_cur2(root, {"2026-09": aws_cur_data.lines("111122223333", "2026-09")})
    config = write_config(tmp_path, f'[sources.aws]\ntype = "aws_cur"\npath = "{root}"')
    # a dangling symlink nobody needs is no reason to fail
    os.symlink(tmp_path / "nowhere.parquet", root / "stray.parquet")
    good_run(config)
    # a manifest that names a key outside the configured path
    (tmp_path / "secret.csv").write_text("not yours\n")
    manifest = aws_cur_data.legacy_layout(root, aws_cur_data.LEGACY_CSV, report="evil")
    body = json.loads(manifest.read_text())
    body["reportKeys"] = ["../../../secret.csv"]
    manifest.write_text(json.dumps(body))
    assert_refused(tmp_path, config, "cost_line_items", "evil-Manifest.json", "leaves the configured prefix/path")
    # a manifest naming a dangling symlink: named, not a raw FileNotFoundError
    body["reportKeys"] = ["evil/20231101-20231201/dangling.csv"]
    os.symlink(tmp_path / "gone.csv", root / "evil" / "20231101-20231201" / "dangling.csv")
    manifest.write_text(json.dumps(body))
    assert_refused(tmp_path, config, "cost_line_items", "dangling.csv is a symbolic link", "does not exist")


# ---- gcp_billing_export files: flattened CSV and JSONL ---------------------------------------------

GCP_MUTATIONS: dict[str, tuple[str, str, str]] = {
    "empty cost": ("cost", "", "column BilledCost (cost) is empty"),
    "cost abc": ("cost", "abc", "column cost value 'abc' is not a number"),
    "cost inf": ("cost", "inf", "column cost value 'inf' is not a number"),
    "usage ends before it starts": ("usage_end_time", "2022-07-01 00:00:00 UTC", "is before ChargePeriodStart"),
    "usage time garbage": ("usage_end_time", "soon", "is not a date/time"),
}
GCP_FILE = "2022-08-01_5.csv"


@pytest.mark.parametrize("case", list(GCP_MUTATIONS))
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_gcp_export_files_refuse_a_bad_row(tmp_path, case, fmt):
    from gpufinops.ingest.gcp.gcp_export_files import read_flat_csv, to_jsonl

    export = tmp_path / "export"
    export.mkdir()
    copy_consistent_csv(GCP_FILE, export / "good.csv")
    config = write_config(
        tmp_path,
        f'[sources.gcp]\ntype = "gcp_billing_export"\npath = "{export}/*.{"csv" if fmt == "csv" else "jsonl"}"',
    )
    if fmt == "jsonl":
        (export / "good.jsonl").write_bytes(to_jsonl(read_flat_csv("t", str(export / "good.csv")).to_pylist()))
    good_run(config)
    with open(GCP_DATA / GCP_FILE, newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames, list(reader)
    at = random.Random(f"{SEED}-{case}").randrange(len(rows))
    column, value, reason = GCP_MUTATIONS[case]
    rows[at][column] = value
    with open(tmp_path / "bad.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    if fmt == "csv":
        shutil.copy(tmp_path / "bad.csv", export / "bad.csv")
        named = f"bad.csv row {at + 1}:"
    else:
        nested = read_flat_csv("t", str(tmp_path / "bad.csv")).to_pylist()
        (export / "bad.jsonl").write_bytes(to_jsonl(nested))
        named = f"bad.jsonl line {at + 1}:"
    assert_refused(tmp_path, config, "cost_line_items", named, reason)


# ---- gcp_billing_export from BigQuery (the bqemulator API server, real google-cloud-bigquery client) ----


def test_bigquery_rows_are_checked_like_files(tmp_path, bq_emulator):
    from gpufinops.ingest.core.registry import Registry
    from gpufinops.ingest.core.runner import run_source
    from gpufinops.ingest.gcp.gcp_billing_export import GcpBillingExport
    from tests.gcp_loopback import koku_flat_rows
    from tests.test_gcp_billing_export import bq_options

    registry = Registry()
    registry.register(GcpBillingExport)
    table = "gcp_billing_export_v1_0000_FUZZ"
    bq_emulator.create_export_table(table)
    rows = koku_flat_rows(GCP_FILE)
    bq_emulator.insert(table, rows)
    db = tmp_path / "wh.duckdb"
    assert run_source(registry, db, "gcp", "gcp_billing_export", bq_options(bq_emulator, table)).ok
    before = table_digest(db, "cost_line_items")
    late = dict(rows[0], cost=None, export_time="2030-01-01 00:00:00 UTC")  # a late row without its cost
    bq_emulator.insert(table, [late])
    result = run_source(registry, db, "gcp", "gcp_billing_export", bq_options(bq_emulator, table))
    assert result.status == "failed" and f"table test-billing.billing.{table} row " in result.error
    assert "column BilledCost (cost) is empty" in result.error, result.error
    assert table_digest(db, "cost_line_items") == before
    count("refused (exit 1)")


@pytest.fixture(scope="module", autouse=True)
def _outcome_counts(request):
    """Prints the closing note's figures after the module: how many hostile cases ended how."""
    yield
    report_outcomes(request)
