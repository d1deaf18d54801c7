"""A derived table registered in derived/registry.py is kept current by every load, in any arrival order, with no
other edit; and a changed config section re-applies only the tables that declared it (docs/architecture.md,
*Add a derived table*).

The dummy table counts GPU-hours per UTC day and team. Its team comes from the attribution of each GPU-hour,
which changes when a bill arrives or is restated (tests/order_fleet.py: the restatement moves ``SPARE`` from
team ``nlp`` to ``speech``), so it must follow the bill's loads as well as the metrics' — through the registry
alone: the runner, the job and the warehouse's own code are untouched by it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from gpufinops.derived import registry as derived
from gpufinops.derived.allocation import AllocationSettings
from gpufinops.derived.carbon_settings import CarbonSettings
from gpufinops.derived.spec import Change, DerivedSpec, Touched
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.jobs.ingest_run import configure_derived
from gpufinops.warehouse import db
from tests import order_fleet as of
from tests.conftest import query

REGISTRY = default_registry()
TEAM_KEYS = ("team", "user:team", "user_team", "k8s_label_team")
US_PER_DAY = 86_400_000_000
DAYS = "_test_dummy_days"
ORDERS = {
    "metrics, bill, restated bill": ("metrics", "bill", "restated"),
    "bill, metrics, restated bill": ("bill", "metrics", "restated"),
    "bill, restated bill, metrics": ("bill", "restated", "metrics"),
}
COUNT_SQL = (
    f"SELECT epoch_us(hour) // {US_PER_DAY} AS day_n, coalesce(team, '') AS team, count(*) AS gpu_hours "
    "FROM gpu_metrics_hourly WHERE {where} GROUP BY ALL"
)


@dataclass(frozen=True)
class DummySettings:
    minimum_hours: int = 0  # days with fewer GPU-hours are left out


def _day_of(table: str) -> str:
    return 'epoch_us("ChargePeriodStart")' if table == "cost_line_items" else "epoch_us(hour)"


def _capture(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    """The UTC days of the rows a batch replaced (before the delete) and holds now (after the insert)."""
    touched.note("dummy", lambda: None)
    if change.where is None:
        return
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {DAYS} (day_n BIGINT)")
    con.execute(
        f"INSERT INTO {DAYS} SELECT DISTINCT {_day_of(change.table)} // {US_PER_DAY} FROM {change.table} "
        f"WHERE {change.where}",
        change.params,
    )


def _minimum(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT minimum_hours FROM dummy_settings").fetchall()[0][0])


def _apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    if "dummy" not in touched.notes:
        return 0
    applied.append(touched.source)
    days = f"day_n IN (SELECT day_n FROM {DAYS})"
    con.execute(f"DELETE FROM dummy_gpu_hours WHERE {days}")
    where = f"epoch_us(hour) // {US_PER_DAY} IN (SELECT day_n FROM {DAYS})"
    sql = COUNT_SQL.format(where=where) + f" HAVING count(*) >= {_minimum(con)}"
    written = con.execute(f"INSERT INTO dummy_gpu_hours {sql}").fetchall()[0][0]
    con.execute(f"DROP TABLE {DAYS}")
    return int(written)


def _configure(path, settings: DummySettings, *, memory_limit: str | None = None) -> bool:
    with db.transaction(path, memory_limit=memory_limit) as con:
        if _minimum(con) == settings.minimum_hours:
            return False
        con.execute("UPDATE dummy_settings SET minimum_hours = ?", [settings.minimum_hours])
        con.execute("DELETE FROM dummy_gpu_hours")
        sql = COUNT_SQL.format(where="TRUE") + f" HAVING count(*) >= {settings.minimum_hours}"
        con.execute(f"INSERT INTO dummy_gpu_hours {sql}")
        applied.append("configure")
    return True


applied: list[str] = []
DUMMY = DerivedSpec(
    name="dummy_gpu_hours",
    follows=("gpu_metrics_hourly", "cost_line_items"),
    capture=_capture,
    apply=_apply,
    section="dummy",
    configure=_configure,
    doc="GPU-hours per UTC day and team (a test's)",
)


@pytest.fixture
def dummy():
    applied.clear()
    derived.register(DUMMY)
    yield DUMMY
    derived.unregister(DUMMY.name)


def _warehouse(path: Path) -> Path:
    with db.writer(path) as con:  # the dummy's own little tables, beside the warehouse's
        con.execute("CREATE TABLE dummy_gpu_hours (day_n BIGINT, team VARCHAR, gpu_hours BIGINT)")
        con.execute("CREATE TABLE dummy_settings (minimum_hours BIGINT)")
        con.execute("INSERT INTO dummy_settings VALUES (0)")
    return path


def _feed(warehouse: Path, order: tuple[str, ...], folder: Path) -> None:
    metrics = of.write_dcgm(folder / "dcgm")
    for step in order:
        if step == "metrics":
            result = run_source(REGISTRY, warehouse, "gpus", "dcgm_exporter", metrics)
        else:
            cur = of.write_cur(folder / "cur", 1 if step == "bill" else 2)
            result = run_source(REGISTRY, warehouse, "cur", "aws_cur", cur, team_tag_keys=TEAM_KEYS)
        assert result.status == "succeeded", (step, result.error)


def _rows(warehouse: Path) -> list[tuple]:
    return sorted(query(warehouse, "SELECT day_n, team, gpu_hours FROM dummy_gpu_hours"))


def _from_scratch(warehouse: Path) -> list[tuple]:
    return sorted(query(warehouse, COUNT_SQL.format(where="TRUE")))


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
def test_a_registered_table_is_kept_current_in_every_arrival_order(dummy, tmp_path, order):
    warehouse = _warehouse(tmp_path / "w.duckdb")
    _feed(warehouse, order, tmp_path)
    rows = _rows(warehouse)
    assert rows == _from_scratch(warehouse)
    teams = {team for _day, team, _hours in rows}
    assert of.SPARE.team_v2 in teams and of.SPARE.team_v1 not in teams  # the restatement reached it
    assert sum(hours for *_, hours in rows) == of.DAYS * 24 * sum(box.gpus for box in of.FLEET)
    assert applied.count("cur") == 2 and applied.count("gpus") == 1  # one apply per load, in the load


def test_a_changed_section_re_applies_only_the_table_that_declared_it(dummy, tmp_path):
    warehouse = _warehouse(tmp_path / "w.duckdb")
    _feed(warehouse, ("bill", "metrics"), tmp_path)
    built_in = {"allocation": AllocationSettings(), "carbon": CarbonSettings(), "unit_costs": None}
    configure_derived({**built_in, "dummy": DummySettings()}, warehouse)  # the settings every table starts with
    assert configure_derived({**built_in, "dummy": DummySettings()}, warehouse) == []
    before = _rows(warehouse)

    assert configure_derived({**built_in, "dummy": DummySettings(minimum_hours=30)}, warehouse) == [DUMMY.name]
    assert _rows(warehouse) == [row for row in before if row[2] >= 30] != before
    allocated = query(warehouse, "SELECT count(*) FROM gpu_allocation_hourly")

    applied.clear()
    changed = {**built_in, "allocation": AllocationSettings(unallocated="spread")}
    assert configure_derived({**changed, "dummy": DummySettings(minimum_hours=30)}, warehouse) == [
        "gpu_allocation_hourly"
    ]
    assert applied == []  # the dummy's rows were not recomputed for a section it did not declare
    assert query(warehouse, "SELECT count(*) FROM gpu_allocation_hourly") == allocated
    assert DUMMY.fingerprint(DummySettings(30)) != DUMMY.fingerprint(DummySettings(0))


ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = ARCHITECTURE.read_text()
    start = text.index(f"\n## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def _derived_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpufinops.derived"):
            found |= {f"{node.module}.{a.name}".removeprefix("gpufinops.derived.") for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("gpufinops.derived.") for a in node.names if a.name.startswith("gpufinops.derived")
            }
    return {name.split(".")[0] for name in found}


@pytest.mark.parametrize("path", ["ingest/core/runner.py", "jobs/ingest_run.py"])
def test_the_runner_and_the_ingest_job_name_no_derived_table(path):
    """They reach every derived table through the registry (and its spec classes), never by its module."""
    assert _derived_imports(ROOT / path) <= {"registry", "spec"}


def test_the_architecture_page_lists_the_registry_and_its_recipe_files_exist():
    listed = _section("Derived tables")
    assert [spec.name for spec in derived.BUILT_IN] == [
        name for name in re.findall(r"`([a-z_]+)` \(", listed) if name in {s.name for s in derived.BUILT_IN}
    ]
    recipe = _section("Add a derived table")
    named = {p for p in re.findall(r"`((?:derived|kernel|warehouse|jobs|tests)/[a-z_/]+\.py)`", recipe)}
    assert {"derived/registry.py", "warehouse/schema.py", "jobs/config.py"} <= named
    assert [p for p in sorted(named) if not (ROOT / p).is_file()] == []
