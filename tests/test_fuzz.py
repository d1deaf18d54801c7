"""Hostile input for every file-based ingestor, through the real CLI: exit code, one sentence, nothing lost.

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
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import duckdb
import pytest

from jobs import cli
from tests import aws_cur_data
from tests.conftest import FOCUS_SAMPLE, query, table_digest
from tests.gcp_loopback import GCP_DATA, copy_consistent_csv

SEED = 16
OUTCOMES: dict[str, int] = {}   # outcome -> cases (printed at the end of the module)


def ingest(config: Path) -> tuple[int, str]:
    """``gpufinops --config CONFIG ingest`` in-process: (exit status, stderr)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main(["--config", str(config), "ingest"])
    return code, err.getvalue()


_TEMPLATE: list[Path] = []


def _empty_warehouse(target: Path) -> None:
    """A copy of one migrated, empty warehouse (creating and migrating one costs more than a case)."""
    if not _TEMPLATE:
        import tempfile

        from warehouse import db
        template = Path(tempfile.mkdtemp(prefix="fuzz-template-")) / "wh.duckdb"
        with db.writer(template):
            pass
        _TEMPLATE.append(template)
    shutil.copy(_TEMPLATE[0], target)


def write_config(home: Path, source: str) -> Path:
    if not (home / "wh.duckdb").exists():
        _empty_warehouse(home / "wh.duckdb")
    path = home / "gpufinops.toml"
    path.write_text(f'[warehouse]\npath = "{home / "wh.duckdb"}"\n\n{source}\n')
    return path


def state(db: Path) -> list:
    return query(db, "SELECT source, state FROM ingest_state ORDER BY source")


def assert_refused(home: Path, config: Path, table: str, names: str, reason: str, code: int = 1) -> None:
    db = home / "wh.duckdb"
    before, cursor = table_digest(db, table), state(db)
    status, err = ingest(config)
    lines = [ln for ln in err.splitlines() if ln.startswith("gpufinops:")]
    assert status == code, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert names in lines[0] and reason in lines[0], lines[0]
    assert table_digest(db, table) == before and state(db) == cursor
    OUTCOMES[f"refused (exit {code})"] = OUTCOMES.get(f"refused (exit {code})", 0) + 1


def good_run(config: Path) -> None:
    status, err = ingest(config)
    assert status == 0, err


# ---- FOCUS files (CSV and Parquet) ----------------------------------------------------------------

def focus_rows(n: int = 40) -> tuple[list[str], list[dict]]:
    with open(FOCUS_SAMPLE, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or ()), [r for r, _ in zip(reader, range(n))]


def write_focus(path: Path, header: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerows([[r.get(h, "") for h in header] for r in rows])


def to_parquet(csv_path: Path, parquet: Path) -> None:
    """The CSV as Parquet with money as DOUBLE (how a warehouse export would type it)."""
    money = ", ".join(f'TRY_CAST("{c}" AS DOUBLE) AS "{c}"' for c in ("BilledCost", "EffectiveCost", "ListCost"))
    with duckdb.connect() as con:
        con.execute(f"CREATE TABLE t AS SELECT * FROM read_csv('{csv_path}', all_varchar = true, nullstr = ['NULL', ''])")
        con.execute(f"COPY (SELECT * REPLACE ({money}) FROM t) TO '{parquet}' (FORMAT parquet)")


FOCUS_MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "empty BilledCost": (lambda r: r.update(BilledCost=""), "column BilledCost is empty"),
    "empty EffectiveCost": (lambda r: r.update(EffectiveCost="NULL"), "column EffectiveCost is empty"),
    "empty ChargeCategory": (lambda r: r.update(ChargeCategory=""), "column ChargeCategory is empty"),
    "non-numeric cost": (lambda r: r.update(BilledCost="abc"), "'abc'"),
    "inf cost": (lambda r: r.update(BilledCost="inf"), "'inf'"),
    "period reversed": (lambda r: r.update(ChargePeriodEnd="2024-09-01 00:00:00"), "is before ChargePeriodStart"),
    "far outside its billing period": (lambda r: r.update(ChargePeriodStart="2022-01-01 00:00:00",
                                                          ChargePeriodEnd="2022-01-01 01:00:00"),
                                       "outside its billing period"),
    "charge in 1970": (lambda r: r.update(ChargePeriodStart="1970-01-01 00:00:00"), "not a plausible time"),
    "charge in 2100": (lambda r: r.update(ChargePeriodStart="2100-01-01 00:00:00", ChargePeriodEnd="2100-01-01 01:00:00",
                                          BillingPeriodStart="2100-01-01 00:00:00", BillingPeriodEnd="2100-02-01 00:00:00"),
                       "not a plausible time"),
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
    (export / "latin.csv").write_bytes(data[:cut] + b"\xe9" + data[cut + 1:])
    assert_refused(home, config, "cost_line_items", "latin.csv line", "not UTF-8")
    (export / "latin.csv").unlink()
    # a truncated large file (a half-finished upload): named, not blamed on BillingPeriodStart
    write_focus(export / "cut.csv", header, big)
    data = (export / "cut.csv").read_bytes()
    (export / "cut.csv").write_bytes(data[:int(len(data) * (0.6 + rng.random() * 0.3))])
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
    OUTCOMES["valid quirk loaded once"] = OUTCOMES.get("valid quirk loaded once", 0) + 3


def test_skip_rows_quarantines_and_counts(tmp_path):
    header, rows = focus_rows()
    export = tmp_path / "export"
    export.mkdir()
    bad = [dict(r) for r in rows]
    bad[3]["BilledCost"] = ""
    bad[9]["EffectiveCost"] = "twelve"
    bad[17]["ChargePeriodEnd"] = "2024-08-01 00:00:00"
    write_focus(export / "mixed.csv", header, bad)
    config = write_config(tmp_path, f'[sources.focus]\ntype = "focus_files"\npath = "{export}/*.csv"\n'
                                    f'on_invalid = "skip_rows"')
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
    OUTCOMES["quarantined (skip_rows)"] = OUTCOMES.get("quarantined (skip_rows)", 0) + 3


# ---- aws_cur: CUR 2.0 Parquet, legacy CSV ----------------------------------------------------------

CUR2_MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "empty unblended cost": (lambda c: c.update(line_item_unblended_cost=None), "(line_item_unblended_cost) is empty"),
    "inf unblended cost": (lambda c: c.update(line_item_unblended_cost=float("inf")),
                           "column line_item_unblended_cost value 'inf' is not a finite number"),
    "nan unblended cost": (lambda c: c.update(line_item_unblended_cost=float("nan")), "is not a finite number"),
    "usage ends before it starts": (lambda c: c.update(line_item_usage_end_date=c["line_item_usage_start_date"]
                                                       - timedelta(hours=5)), "is before ChargePeriodStart"),
    "usage two years off": (lambda c: c.update(line_item_usage_start_date=c["line_item_usage_start_date"]
                                               + timedelta(days=730), line_item_usage_end_date=c["line_item_usage_end_date"]
                                               + timedelta(days=730)), "not a plausible time"),
}


@pytest.mark.parametrize("case", list(CUR2_MUTATIONS))
def test_cur2_refuses_a_bad_line(tmp_path, case):
    root = tmp_path / "bucket"
    aws_cur_data.write_cur2(root, {"2026-09": aws_cur_data.lines("111122223333", "2026-09")})
    config = write_config(tmp_path, f'[sources.aws]\ntype = "aws_cur"\npath = "{root}"')
    good_run(config)
    bad = aws_cur_data.lines("111122223333", "2026-10")
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
    from ingest.gcp_export_files import read_flat_csv, to_jsonl
    export = tmp_path / "export"
    export.mkdir()
    copy_consistent_csv(GCP_FILE, export / "good.csv")
    config = write_config(tmp_path, f'[sources.gcp]\ntype = "gcp_billing_export"\npath = "{export}/*.{"csv" if fmt == "csv" else "jsonl"}"')
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


# ---- nvidia-smi logs (query-gpu and compute-apps) -------------------------------------------------

SMI_HEADER = "timestamp, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"


def smi_log(minutes: int = 30, start: datetime = datetime(2026, 11, 20, 10)) -> list[str]:
    return [f"{(start + timedelta(minutes=m)).strftime('%Y/%m/%d %H:%M:%S')}.000, GPU-1, NVIDIA H100 80GB HBM3, "
            f"{(m * 7) % 100} %, {1000 + m} MiB, 81559 MiB, 300.00 W" for m in range(minutes)]


SMI_MUTATIONS: dict[str, tuple[Callable[[list[str]], list[str]], str]] = {
    "utilisation 150": (lambda f: f[:3] + ["150 %"] + f[4:], "column utilization.gpu [%] value '150.0' is outside 0–100"),
    "utilisation -5": (lambda f: f[:3] + ["-5 %"] + f[4:], "is outside 0–100"),
    "utilisation NaN": (lambda f: f[:3] + ["NaN"] + f[4:], "value 'nan' is not a finite number"),
    "memory inf": (lambda f: f[:4] + ["inf MiB"] + f[5:], "value 'inf' is not a finite number"),
    "memory above total": (lambda f: f[:4] + ["90000 MiB"] + f[5:], "is more than memory.total [MiB]"),
    "power negative": (lambda f: f[:6] + ["-1.00 W"], "column power.draw [W] value '-1.0' is below 0"),
    "time in 1999": (lambda f: ["1999/01/01 00:00:00.000"] + f[1:], "not a plausible time"),
    "time next year": (lambda f: ["2027/12/01 00:00:00.000"] + f[1:], "not a plausible time"),
    "utilisation abc": (lambda f: f[:3] + ["abc"] + f[4:], "'abc'"),
}


@pytest.mark.parametrize("case", list(SMI_MUTATIONS))
def test_nvidia_smi_refuses_a_bad_sample(tmp_path, case):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node1.csv").write_text("\n".join([SMI_HEADER] + smi_log()) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/*.csv"')
    good_run(config)
    lines = smi_log()
    at = random.Random(f"{SEED}-{case}").randrange(len(lines))
    mutate, reason = SMI_MUTATIONS[case]
    lines[at] = ", ".join(mutate([f.strip() for f in lines[at].split(",")]))
    (logs / "node2.csv").write_text("\n".join([SMI_HEADER] + lines) + "\n")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", f"node2.csv line {at + 2}:", reason)


def test_nvidia_smi_file_level_faults(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "node1.csv").write_text("\n".join([SMI_HEADER] + smi_log()) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/**/*.csv"')
    good_run(config)
    (logs / "dup.csv").write_text("\n".join([SMI_HEADER + ", uuid"] + [ln + ", GPU-2" for ln in smi_log()]) + "\n")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dup.csv", "has column 'uuid' twice")
    (logs / "dup.csv").unlink()
    (logs / "empty.csv").write_text("")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "empty.csv", "is empty")
    (logs / "empty.csv").unlink()
    os.symlink(logs / "gone.csv", logs / "dangling.csv")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dangling.csv is a symbolic link", "does not exist")
    (logs / "dangling.csv").unlink()
    # a BOM loads; a symlink loop and a second path to node1.csv do not double its samples
    (logs / "bom.csv").write_bytes(b"\xef\xbb\xbf" + ("\n".join([SMI_HEADER] + [ln.replace("GPU-1", "GPU-9")
                                                                               for ln in smi_log()]) + "\n").encode())
    (logs / "sub").mkdir()
    os.symlink(logs, logs / "sub" / "loop")
    os.symlink(logs / "node1.csv", logs / "sub" / "node1-again.csv")
    good_run(config)
    samples = dict(query(tmp_path / "wh.duckdb", "SELECT gpu_uuid, sum(samples) FROM gpu_metrics_hourly GROUP BY 1"))
    assert samples == {"GPU-1": 30, "GPU-9": 30}
    OUTCOMES["valid quirk loaded once"] = OUTCOMES.get("valid quirk loaded once", 0) + 2


APPS_HEADER = "timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"


@pytest.mark.parametrize("value, reason", [("inf MiB", "is not a finite number"), ("-5 MiB", "is below 0"),
                                           ("lots", "'lots'")])
def test_compute_apps_log_refuses_a_bad_sample(tmp_path, value, reason):
    logs = tmp_path / "logs"
    (logs / "apps").mkdir(parents=True)
    rows = [f"2026/11/20 10:{m:02d}:00.000, NVIDIA H100, 00000000:00:09.0, 123, GPU-1, 4242, python, {100 + m} MiB"
            for m in range(20)]
    (logs / "apps" / "node1.csv").write_text("\n".join([APPS_HEADER] + rows) + "\n")
    config = write_config(tmp_path, f'[sources.smi]\ntype = "nvidia_smi_csv"\npath = "{logs}/*/*.csv"')
    good_run(config)
    at = random.Random(f"{SEED}-{value}").randrange(len(rows))
    rows[at] = rows[at].rsplit(", ", 1)[0] + f", {value}"
    (logs / "apps" / "node2.csv").write_text("\n".join([APPS_HEADER] + rows) + "\n")
    assert_refused(tmp_path, config, "gpu_processes_hourly", f"node2.csv line {at + 2}:", reason)


# ---- dcgm_exporter: exposition files and scrapes ---------------------------------------------------

def exposition(minutes: int = 10, util: str | None = None, at: int = -1, stamp_cut: bool = False) -> str:
    start = int(datetime(2026, 11, 20, 10, tzinfo=timezone.utc).timestamp() * 1000)
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    labels = 'gpu="0",UUID="GPU-7",modelName="NVIDIA H100 80GB HBM3",Hostname="node7"'
    for m in range(minutes):
        ts = start + m * 60_000
        value = util if (util is not None and m == at) else str((m * 9) % 100)
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {value} {ts}")
        lines.append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {2000 + m} {ts}")
        lines.append(f"DCGM_FI_DEV_FB_FREE{{{labels}}} {79000 - m} {ts}")
    if stamp_cut:
        lines[-1] = lines[-1][:-11]  # the last line cut inside its timestamp
    return "\n".join(lines) + "\n"


DCGM_CASES = {
    "utilisation NaN": ("NaN", "DCGM_FI_DEV_GPU_UTIL value 'NaN' is not a finite number"),
    "utilisation +Inf": ("+Inf", "value '+Inf' is not a finite number"),
    "utilisation 150": ("150", "value '150' is outside 0–100"),
    "utilisation -1": ("-1", "is outside 0–100"),
    "utilisation garbage": ("lots", "the sample value 'lots' is not a number"),
}


@pytest.mark.parametrize("case", list(DCGM_CASES))
def test_dcgm_exposition_refuses_a_bad_sample(tmp_path, case):
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "node7.prom").write_text(exposition())
    config = write_config(tmp_path, f'[sources.dcgm]\ntype = "dcgm_exporter"\ntargets = ["{prom}/*.prom"]')
    good_run(config)
    value, reason = DCGM_CASES[case]
    at = random.Random(f"{SEED}-{case}").randrange(10)
    (prom / "node8.prom").write_text(exposition(util=value, at=at).replace("node7", "node8").replace("GPU-7", "GPU-8"))
    assert_refused(tmp_path, config, "gpu_metrics_hourly", f"node8.prom: line {3 + 3 * at}:", reason)


def test_dcgm_exposition_file_faults(tmp_path):
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "node7.prom").write_text(exposition())
    config = write_config(tmp_path, f'[sources.dcgm]\ntype = "dcgm_exporter"\ntargets = ["{prom}/*.prom"]')
    good_run(config)
    (prom / "cut.prom").write_text(exposition(stamp_cut=True).replace("GPU-7", "GPU-8"))
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "cut.prom: line 32:", "not a plausible time")
    (prom / "cut.prom").unlink()
    for name, body in (("empty.prom", ""), ("comments.prom", "# HELP x\n# TYPE x gauge\n")):
        (prom / name).write_text(body)
        assert_refused(tmp_path, config, "gpu_metrics_hourly", name, "holds no samples")
        (prom / name).unlink()
    os.symlink(prom / "gone.prom", prom / "dangling.prom")
    assert_refused(tmp_path, config, "gpu_metrics_hourly", "dangling.prom is a symbolic link", "does not exist")


class _Exporter(BaseHTTPRequestHandler):
    """A DCGM exporter's /metrics over loopback behind HTTP Basic auth (user:s3cret-passw0rd)."""
    body = exposition()

    def do_GET(self):  # noqa: N802
        import base64
        expected = "Basic " + base64.b64encode(b"user:s3cret-passw0rd").decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        data = type(self).body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_dcgm_scrape_credentials_authenticate_and_never_leak(tmp_path):
    with serve(_Exporter) as address:
        config = write_config(tmp_path, f'[sources.dcgm]\ntype = "dcgm_exporter"\n'
                                        f'targets = ["http://user:s3cret-passw0rd@{address}/metrics"]\nretries = 1')
        good_run(config)  # the credentials went as Basic auth
        _Exporter.body = exposition(util="NaN", at=4).replace("GPU-7", "GPU-8")
        try:
            assert_refused(tmp_path, config, "gpu_metrics_hourly", f"http://***@{address}/metrics: line 15:",
                           "is not a finite number")
            code, err = ingest(config)
        finally:
            _Exporter.body = exposition()
    errors = query(tmp_path / "wh.duckdb", "SELECT string_agg(error, ' ') FROM ingest_runs")[0][0]
    assert "s3cret-passw0rd" not in errors and "s3cret-passw0rd" not in err and code == 1


# ---- prometheus answers --------------------------------------------------------------------------

class _Prometheus(BaseHTTPRequestHandler):
    """Prometheus' HTTP API over loopback, answering DCGM_FI_DEV_GPU_UTIL queries with ``value``
    (a real Prometheus answers NaN/+Inf as these strings; loading such samples into one is slower
    than this whole suite, so the wire format is served here)."""
    value = "42"

    def do_GET(self):  # noqa: N802
        from urllib.parse import parse_qs, urlparse
        url = urlparse(self.path)
        if url.path.endswith("buildinfo"):
            payload = {"status": "success", "data": {"version": "3.1.0"}}
        else:
            q = parse_qs(url.query)
            start, end, step = float(q["start"][0]), float(q["end"][0]), int(q["step"][0])
            result = []
            if "DCGM_FI_DEV_GPU_UTIL" in q["query"][0] and "count_over_time" not in q["query"][0]:
                stamps = [start + i * step for i in range(int((end - start) // step) + 1)]
                result = [{"metric": {"UUID": "GPU-P", "Hostname": "p1", "gpu": "0"},
                           "values": [[t, type(self).value] for t in stamps]}]
            elif "count_over_time(DCGM_FI_DEV_GPU_UTIL" in q["query"][0]:
                stamps = [start + i * step for i in range(int((end - start) // step) + 1)]
                result = [{"metric": {"UUID": "GPU-P", "Hostname": "p1", "gpu": "0"}, "values": [[t, "60"] for t in stamps]}]
            payload = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("value, reason", [("NaN", "which is not a finite number"), ("+Inf", "not a finite number"),
                                           ("150", "which is outside 0–100")])
def test_prometheus_answers_refused(tmp_path, value, reason):
    with serve(_Prometheus) as address:
        config = write_config(tmp_path, f'[sources.prom]\ntype = "prometheus"\nurl = "http://admin:hunter2-hunter2@'
                                        f'{address}"\nbackfill_days = 0.125\nretries = 1')
        _Prometheus.value = "42"
        good_run(config)
        _Prometheus.value = value
        try:
            assert_refused(tmp_path, config, "gpu_metrics_hourly", f"Prometheus at http://***@{address} answered", reason)
        finally:
            _Prometheus.value = "42"
    assert "hunter2-hunter2" not in query(tmp_path / "wh.duckdb", "SELECT string_agg(error, ' ') FROM ingest_runs")[0][0]


# ---- onprem config and config errors -------------------------------------------------------------

@pytest.mark.parametrize("line, named", [
    ("pue = nan", "sources.dc1.pue"), ("energy_usd_per_kwh = inf", "sources.dc1.energy_usd_per_kwh"),
    ("idle_power_fraction = 2", "sources.dc1.idle_power_fraction")])
def test_onprem_config_values_refused(tmp_path, line, named):
    key = line.split(" = ")[0]
    base = {"pue": "1.4", "energy_usd_per_kwh": "0.11", "idle_power_fraction": "0.1"}
    base[key] = line.split(" = ")[1]
    body = "\n".join(f"{k} = {v}" for k, v in base.items())
    config = write_config(tmp_path, f'[sources.dc1]\ntype = "onprem"\n{body}\namortisation_years = 4\n'
                                    f'[[sources.dc1.node_groups]]\nname = "g"\nnodes = ["n1"]\n'
                                    f'gpu_model = "A100-SXM4-80GB"\ngpus_per_node = 8\nserver_price_usd = 60000\n')
    assert_refused(tmp_path, config, "cost_line_items", named, "must be")


@pytest.mark.parametrize("body, named", [
    ('[warehouse]\npath = 5\n', "warehouse.path: must be a file path"),
    ('[warehouse]\nmemory_limit = "lots"\n', "warehouse.memory_limit: 'lots' is not a memory size"),
    ('[sources.f]\ntype = "focus_files"\npath = 5\n', "sources.f.path: must be a string or a list of strings"),
    ('[sources.f]\ntype = "focus_files"\npath = "x"\non_invalid = "ignore"\n', "sources.f.on_invalid"),
    ('warehouse = 5\n', "warehouse: must be a table")])
def test_config_errors_exit_2_naming_the_key(tmp_path, body, named):
    config = tmp_path / "gpufinops.toml"
    config.write_text(body)
    code, err = ingest(config)
    lines = [ln for ln in err.splitlines() if ln.startswith("gpufinops:")]
    assert code == 2 and len(lines) == 1 and named in lines[0] and "Traceback" not in err, err
    OUTCOMES["refused (exit 2)"] = OUTCOMES.get("refused (exit 2)", 0) + 1


# ---- gcp_billing_export from BigQuery (the bqemulator API server, real google-cloud-bigquery client) ----

def test_bigquery_rows_are_checked_like_files(tmp_path, bq_emulator):
    from ingest.gcp_billing_export import GcpBillingExport
    from ingest.registry import Registry
    from ingest.runner import run_source
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
    OUTCOMES["refused (exit 1)"] = OUTCOMES.get("refused (exit 1)", 0) + 1


@pytest.fixture(scope="module", autouse=True)
def _outcome_counts(request):
    """Prints the closing note's figures after the module: how many hostile cases ended how."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and OUTCOMES:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(f"\nfuzz outcomes: {json.dumps(OUTCOMES, sort_keys=True)}")
