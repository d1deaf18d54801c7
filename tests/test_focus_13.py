"""`export focus --focus-version 1.3`: shared GPU lines split into FOCUS 1.3 allocated rows.

Each origin line is told apart by a unique ChargeDescription written before the export (a dimension,
so every allocated row keeps it); the expected sums are the warehouse's own lines, read with Python
Decimal, never the export's arithmetic. The 1.3 requirements model's rules (tests/focus_rules_13.py)
and the 1.2 validator's rules run over the demo with shared GPUs (slow: the demo takes ~40 s).
"""

from __future__ import annotations

import csv
import json
import random
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpufinops.derived import allocation
from gpufinops.interfaces.cli import main as cli
from gpufinops.jobs.export import focus, focus13
from gpufinops.warehouse import db, schema
from tests import focus_rules, focus_rules_13
from tests.allocation_fleet import Fleet, GpuHour, Line, Work, hourly_lines
from tests.demo_cache import demo_copy
from tests.test_allocation import random_fleet

HOSTILE_POD = 'pod\r\n\x00\x07,"quoted";\u00e9\u2028'
MODEL_13 = focus_rules_13.Model13()


def _build(warehouse: Path, fleet: Fleet, **settings) -> None:
    with db.writer(warehouse) as con:
        fleet.insert(con)
        con.execute("""UPDATE cost_line_items SET "ChargeDescription" = 'line-' || CAST(rowid AS VARCHAR)""")
        allocation.reallocate_all(con, allocation.AllocationSettings(**settings))


def _export(warehouse: Path, out: Path, fmt: str = "parquet", version: str = "1.3") -> int:
    with db.reader(warehouse) as con:
        return focus.export(con, out, fmt, version=version)


def _rows(path: Path) -> list[dict]:
    source = (
        f"read_parquet('{path.as_posix()}')"
        if path.suffix == ".parquet"
        else f"read_csv('{path.as_posix()}', all_varchar := true)"
    )
    cur = duckdb.execute(f"SELECT COLUMNS(*)::VARCHAR FROM {source}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _lines(warehouse: Path) -> dict[str, dict]:
    with db.reader(warehouse) as con:
        cur = con.execute(f"""SELECT "ChargeDescription", {", ".join(f'CAST("{c}" AS VARCHAR)' for c in focus13.SUMMABLE)},
            CASE WHEN "ChargeCategory" = 'Usage' AND ("x_GpuCount" > 0 OR "x_GpuModel" IS NOT NULL) THEN "ResourceId" END,
            epoch_us("ChargePeriodStart") // 3600000000 AS hour_n FROM cost_line_items""")
        return {  # ResourceId: only a GPU usage line's (the lines an allocation splits)
            r[0]: {**{c: r[1 + k] for k, c in enumerate(focus13.SUMMABLE)}, "ResourceId": r[-2], "hour_n": r[-1]}
            for r in cur.fetchall()
        }


def _allocated_hours(warehouse: Path) -> set[tuple]:
    with db.reader(warehouse) as con:
        sql = "SELECT DISTINCT resource_id, epoch_us(hour) // 3600000000 FROM gpu_allocation_hourly"
        return {tuple(r) for r in con.execute(sql).fetchall()}


def _check_split(warehouse: Path, rows: list[dict]) -> int:
    """Every allocated row's origin line, summed per summable column, is that line exactly; every GPU
    line of an allocated resource-hour was split; unsplit lines are written once, unchanged."""
    lines, shared_hours = _lines(warehouse), _allocated_hours(warehouse)
    by_line: dict[str, list[dict]] = {}
    for r in rows:
        by_line.setdefault(r["ChargeDescription"], []).append(r)
    assert set(by_line) == set(lines)
    split = 0
    for key, group in by_line.items():
        line = lines[key]
        is_shared = (line["ResourceId"], line["hour_n"]) in shared_hours
        assert all((r["AllocatedMethodId"] is not None) == is_shared for r in group), key
        if not is_shared:
            assert len(group) == 1
        split += is_shared
        for column in focus13.SUMMABLE:
            if line[column] is None:
                assert all(r[column] is None for r in group), (key, column)
                continue
            assert sum(Decimal(r[column]) for r in group) == Decimal(line[column]), (key, column)
        if is_shared:  # dimensions, unit prices and Tags: the origin's on every allocated row
            kept = [n for n, _, _ in schema.FOCUS_12_COLUMNS if n not in focus13.SUMMABLE]
            assert len({tuple(r[n] for n in kept) for r in group}) == 1, key
            ratios = [json.loads(r["AllocatedMethodDetails"])["Elements"][0]["AllocatedRatio"] for r in group]
            assert sum(ratios) == pytest.approx(1, abs=1e-9), key
    return split


@pytest.mark.parametrize("seed", range(6))
def test_every_shared_line_splits_into_rows_that_sum_to_it_exactly(warehouse, tmp_path, seed):
    """Random fleets: several lines an hour (credits too), on-prem GPUs with their own lines, MIG,
    time-slicing, 15-decimal costs, both unallocated settings."""
    rng = random.Random(seed)
    _build(warehouse, random_fleet(rng), unallocated=rng.choice(["show", "spread"]))
    out = tmp_path / "focus.parquet"
    rows = _export(warehouse, out)
    assert rows == len(_rows(out))
    assert _check_split(warehouse, _rows(out)) > 0


def _mig_day(fleet: Fleet, pod: str = "train-0") -> None:
    for hour, cost in enumerate(hourly_lines(Decimal("33.33"))):
        fleet.lines.append(Line("i-a100", hour, cost, team="platform"))
        for mig in ("4g.20gb/1", "1g.5gb/2"):
            fleet.gpu_hours.append(GpuHour("i-a100", hour, "GPU-a100", mig))
    fleet.work += [Work(h, "GPU-a100", "ml-train", pod, mig_instance="4g.20gb/1") for h in range(2)]
    fleet.work += [Work(h, "GPU-a100", "inference", "serve-0", mig_instance="1g.5gb/2") for h in range(2, 8)]
    fleet.lines.append(Line("i-cpu", 0, Decimal("5"), team="web", gpu_count=None, gpu_model=None))


@pytest.fixture
def mig_export(warehouse: Path, tmp_path: Path) -> Path:
    """The MIG day (:func:`_mig_day`) built and exported as FOCUS 1.3 Parquet."""
    fleet = Fleet()
    _mig_day(fleet)
    _build(warehouse, fleet)
    out = tmp_path / "focus.parquet"
    _export(warehouse, out)
    return out


def test_each_allocation_row_is_an_allocated_row_and_the_unallocated_share_its_own(warehouse, mig_export):
    rows = _rows(mig_export)
    assert _check_split(warehouse, rows) == 24
    with db.reader(warehouse) as con:
        allocated = con.execute("""SELECT epoch_us(hour) // 3600000000, coalesce(pod, ''),
            CASE WHEN basis = 'unallocated' THEN '' ELSE mig_instance END, basis, CAST(sum(cost_usd) AS VARCHAR)
            FROM gpu_allocation_hourly GROUP BY ALL""").fetchall()
    got: dict[tuple, Decimal] = {}
    for r in rows:
        if r["AllocatedMethodId"]:
            e = json.loads(r["AllocatedMethodDetails"])["Elements"][0]
            hour = int(datetime.fromisoformat(r["ChargePeriodStart"]).timestamp()) // 3600
            mig = "" if e["x_Basis"] == "unallocated" else e["x_MigInstance"]
            key = (hour, e.get("x_Pod", ""), mig, e["x_Basis"])
            got[key] = got.get(key, Decimal(0)) + Decimal(r["EffectiveCost"])
    # one line an hour: the allocated rows are the allocation's own split, to the 1e-15 (its unallocated rows merged)
    assert got == {(hour, pod, mig, basis): Decimal(cost) for hour, pod, mig, basis, cost in allocated}
    idle = [r for r in rows if r["AllocatedMethodId"] and "x_Pod" not in r["AllocatedMethodDetails"]]
    assert len(idle) == 24  # every hour's line has one unallocated row of its own
    for r in idle:
        element = json.loads(r["AllocatedMethodDetails"])["Elements"][0]
        assert element["x_Basis"] == "unallocated" and r["AllocatedResourceId"] is None
        assert r["AllocatedResourceName"] is None and json.loads(r["AllocatedTags"]) == {"team": "platform"}
    train = next(r for r in rows if r["AllocatedResourceName"] == "train-0")
    assert train["AllocatedResourceId"] == "GPU-a100/4g.20gb/1/ml-train/train-0"
    assert train["AllocatedResourceName"] == "train-0" and train["AllocatedMethodId"] == focus13.METHOD_ID
    assert json.loads(train["AllocatedTags"]) == {"team": "platform", "namespace": "ml-train"}
    assert json.loads(train["AllocatedMethodDetails"])["Elements"][0]["x_Basis"] == "mig"
    cpu = [r for r in rows if r["ResourceId"] == "i-cpu"]
    assert len(cpu) == 1 and cpu[0]["AllocatedMethodId"] is None and cpu[0]["HostProviderName"] == "AWS"


def test_the_columns_are_focus_13s_in_order_and_the_model_requires_the_added_ones(warehouse, mig_export):
    names = [d[0] for d in duckdb.sql(f"DESCRIBE SELECT * FROM '{mig_export.as_posix()}'").fetchall()]
    assert names == list(focus13.EXPORT_COLUMNS) and len(focus13.FOCUS_COLUMNS) == 65
    assert focus13.FOCUS_COLUMNS == tuple(sorted(focus13.FOCUS_COLUMNS))
    present = {
        r["ValidationCriteria"]["Requirement"]["ColumnName"]
        for r in MODEL_13.rules.values()
        if r["ValidationCriteria"]["Requirement"].get("CheckFunction") == "ColumnPresent"
    }
    assert present == set(focus13.ADDED)
    spec_12 = [n for n, _, _ in schema.FOCUS_12_COLUMNS]
    assert [n for n in focus13.FOCUS_COLUMNS if n not in focus13.ADDED] == spec_12


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_hostile_workload_names_survive_as_data(warehouse, tmp_path, fmt):
    fleet = Fleet()
    _mig_day(fleet, pod=HOSTILE_POD)
    _build(warehouse, fleet)
    out = tmp_path / f"focus.{fmt}"
    rows = _export(warehouse, out, fmt)
    back = _rows(out)
    assert len(back) == rows
    hostile = [r for r in back if r["AllocatedResourceName"] == HOSTILE_POD]
    assert len(hostile) == 2  # the pod's two hours, each one row
    for r in hostile:
        assert json.loads(r["AllocatedMethodDetails"])["Elements"][0]["x_Pod"] == HOSTILE_POD
        assert r["AllocatedResourceId"].endswith("/ml-train/" + HOSTILE_POD)
    if fmt == "csv":
        with open(out, newline="", encoding="utf-8") as f:
            records = list(csv.DictReader(f))
        assert len(records) == rows and sum(r["AllocatedResourceName"] == HOSTILE_POD for r in records) == 2
    _check_split(warehouse, back)


def test_12_stays_the_default_and_the_version_is_checked(tmp_path):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    warehouse = home / "data" / "gpufinops.duckdb"
    fleet = Fleet()
    _mig_day(fleet)
    _build(warehouse, fleet)
    config = home / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse.as_posix()}"\n')
    base = ["--config", str(config), "export", "focus", "--out"]
    assert cli([*base, str(tmp_path / "default.parquet")]) == 0
    assert cli([*base, str(tmp_path / "v12.parquet"), "--focus-version", "1.2"]) == 0
    assert cli([*base, str(tmp_path / "v13.parquet"), "--focus-version", "1.3"]) == 0
    default, v12, v13 = (_rows(tmp_path / f"{n}.parquet") for n in ("default", "v12", "v13"))
    key = sorted(focus.EXPORT_COLUMNS)
    assert list(default[0]) == list(focus.EXPORT_COLUMNS)
    assert sorted(tuple(r[k] for k in key) for r in default) == sorted(tuple(r[k] for k in key) for r in v12)
    assert len(default) == 25 and len(v13) > len(default)
    with pytest.raises(focus.ExportError, match="--focus-version 1.4"):
        _export(warehouse, tmp_path / "x.parquet", version="1.4")
    with pytest.raises(SystemExit):
        cli([*base, str(tmp_path / "y.parquet"), "--focus-version", "2"])
    assert cli(["--config", str(config), "export", "json", "--focus-version", "1.3"]) == 2


# ---- the rules: the demo with shared GPUs -----------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory) -> dict[str, Path]:
    """The demo's warehouse with pods on most of its GPU-hours (control characters in the names), exported as 1.3."""
    root = tmp_path_factory.mktemp("focus13")
    demo_copy(tmp_path_factory, root / "demo", days=7)
    warehouse = root / "demo" / "data" / "gpufinops.duckdb"
    with db.writer(warehouse) as con:  # each line told apart by its ChargeDescription (see _check_split)
        con.execute(
            """UPDATE cost_line_items SET "ChargeDescription" = "ChargeDescription" || ' #' || CAST(rowid AS VARCHAR)"""
        )
        con.execute("""INSERT INTO gpu_workloads_hourly BY NAME
            SELECT hour, gpu_uuid, mig_instance, host, ['ml-train', 'inference', 'batch'][CAST(1 + hash(gpu_uuid) % 3 AS BIGINT)] AS namespace,
                   'job-' || CAST(hash(gpu_uuid, hour) % 5 AS VARCHAR) || E'\\r\\n\\t' AS pod, samples // 2 + 1 AS samples,
                   samples // 2 + 1 AS occupied_samples, source
            FROM gpu_metrics_hourly WHERE hash(gpu_uuid, hour) % 4 <> 0 AND samples > 1""")
        allocation.reallocate_all(con, allocation.AllocationSettings())
    out = {"warehouse": warehouse}
    for fmt in ("parquet", "csv"):
        out[fmt] = root / f"focus13.{fmt}"
        _export(warehouse, out[fmt], fmt)
    return out


def _judge13(path: Path) -> focus_rules.Report:
    with duckdb.connect() as con:
        reader = "read_parquet" if path.suffix == ".parquet" else "read_csv"
        con.execute(f"CREATE VIEW focus AS SELECT * FROM {reader}('{path.as_posix()}')")
        return focus_rules_13.validate(con, "focus", model=MODEL_13)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_focus_13_rules_pass_and_the_12_rules_still_hold(shared_demo, fmt):
    from tests.test_focus_conformance import EXCEPTIONS, MODEL

    assert _check_split(shared_demo["warehouse"], _rows(shared_demo[fmt])) > 1000
    report = _judge13(shared_demo[fmt])
    assert not report.failed(), report.failed()
    assert report.count("pass") >= 20, report.summary()
    with duckdb.connect() as con:
        reader = "read_parquet" if fmt == "parquet" else "read_csv"
        con.execute(f"CREATE VIEW focus AS SELECT * FROM {reader}('{shared_demo[fmt].as_posix()}')")
        old = focus_rules.validate(con, "focus", model=MODEL, exceptions=EXCEPTIONS)
    assert not old.failed(), old.failed()
    print(f"1.3 {fmt}: {report.summary()}; 1.2 rules on the 1.3 file: {old.summary()}")


@pytest.mark.slow
def test_the_docs_list_every_rule_the_check_cannot_judge(shared_demo):
    page = (Path(__file__).parent.parent / "docs" / "focus-1.3.md").read_text()
    report = _judge13(shared_demo["parquet"])
    unchecked = sorted(rid for rid, v in report.verdicts.items() if v.status == "n/a")
    assert unchecked and not [rid for rid in unchecked if rid not in page]
    checked = sorted(rid for rid, v in report.verdicts.items() if v.status == "pass")
    assert not [rid for rid in checked if rid not in page]


@pytest.mark.slow
def test_the_13_rules_catch_broken_details(shared_demo, tmp_path):
    broken = tmp_path / "broken.parquet"
    duckdb.sql(f"""COPY (SELECT * REPLACE (
        CASE WHEN "AllocatedMethodDetails" LIKE '%x_Pod%' THEN replace("AllocatedMethodDetails", '"x_Pod"', '"Pod"')
             WHEN "AllocatedMethodDetails" IS NOT NULL THEN '{{"Elements": {{"AllocatedRatio": "half"}}}}' END
             AS "AllocatedMethodDetails",
        length("HostProviderName") AS "HostProviderName")
        FROM '{shared_demo["parquet"].as_posix()}') TO '{broken.as_posix()}' (FORMAT parquet)""")
    failed = set(_judge13(broken).leaf_failures(MODEL_13))
    assert {
        "CAU-AllocatedMethodDetailsObject-O-001-M",
        "CAU-AllocatedMethodDetailsObject-O-009-C",
        "CAU-HostProviderName-C-001-M",
    } <= failed, failed
