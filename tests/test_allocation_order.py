"""Order does not matter: bills, restated bills, DCGM scrapes with pods and nvidia-smi logs with processes,
loaded through their ingestors in any order, end with the same ``gpu_allocation_hourly``.

Each load recomputes the resource-days it touches inside its own transaction (derived/allocation.py);
these tests drive real loads (``focus_files``, ``dcgm_exporter``, ``nvidia_smi_csv``) and compare the
whole table, row for row.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpufinops.derived import allocation
from gpufinops.ingest.core.focus_files import FocusFiles
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter
from gpufinops.ingest.metrics.nvidia_smi_csv import NvidiaSmiCsv
from gpufinops.warehouse import db, schema
from tests.allocation_fleet import START, Line, exposition, write_focus_csv
from tests.conftest import query, table_digest

HOURS = 4
NAMESPACE_TEAMS = {"ml-train": "vision", "serve": "nlp"}


def dcgm_samples() -> list[dict]:
    """node-a: a pod on GPU 0 for 200 of 240 minutes; two pods time-slicing GPU 1 (dcgm-exporter's virtual
    GPUs: a copy of each series per pod); a 3g.20gb MIG instance of GPU 2 held by a notebook, a 1g.5gb
    instance free; GPU 3 without any pod. The other four GPUs send nothing."""
    rows = []
    for minute in range(HOURS * 60):
        ts = START + timedelta(minutes=minute)
        base = {"ts": ts, "host": "node-a", "util": float(minute % 50), "mem": 1000.0, "sm": 0.25}
        gpu0 = {"uuid": "GPU-a0", "index": "0"}
        if minute < 200:
            gpu0 |= {"namespace": "ml-train", "pod": "train-0", "container": "main"}
        rows.append(base | gpu0)
        rows += [
            base
            | {
                "uuid": "GPU-a1",
                "index": "1",
                "namespace": "serve",
                "pod": f"s-{i}",
                "container": "srv",
                "vgpu": str(i),
            }
            for i in range(2)
        ]
        rows.append(
            base
            | {
                "uuid": "GPU-a2",
                "index": "2",
                "mig": "3g.20gb/1",
                "namespace": "notebooks",
                "pod": "nb-0",
                "container": "jupyter",
            }
        )
        rows.append(base | {"uuid": "GPU-a2", "index": "2", "mig": "1g.5gb/7"})
        rows.append(base | {"uuid": "GPU-a3", "index": "3"})
    return rows


def smi_logs(folder: Path) -> None:
    """node-b: one GPU, two processes on it every sample (time-slicing), one sample a minute."""
    (folder / "gpu").mkdir(parents=True)
    (folder / "apps").mkdir(parents=True)
    gpu = ["timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"]
    apps = ["timestamp, gpu_name, gpu_bus_id, gpu_serial, gpu_uuid, pid, process_name, used_gpu_memory [MiB]"]
    for minute in range(HOURS * 60):
        stamp = (START + timedelta(minutes=minute)).strftime("%Y/%m/%d %H:%M:%S.000")
        gpu.append(f"{stamp}, NVIDIA L40S, GPU-b0, 0, {minute % 30} %, 9000 MiB, 46068 MiB, 120.00 W")
        apps += [
            f"{stamp}, NVIDIA L40S, 00000000:00:09.0, 0, GPU-b0, {pid}, /usr/bin/python3, 4500 MiB"
            for pid in (4242, 4343)
        ]
    (folder / "gpu" / "node-b.csv").write_text("\n".join(gpu) + "\n")
    (folder / "apps" / "node-b.csv").write_text("\n".join(apps) + "\n")


def bill_lines(restated: bool = False) -> list[Line]:
    """Hourly GPU instance lines: node-a 8 GPUs ($32/h, $40/h once restated), node-b 1 GPU ($2/h)."""
    rate = Decimal("40") if restated else Decimal("32")
    return [Line("i-0aaa", h, rate, team="platform", gpu_count=8) for h in range(HOURS)] + [
        Line("i-0bbb", h, Decimal("2"), team="research", gpu_count=1, gpu_model="L40S") for h in range(HOURS)
    ]


class World:
    def __init__(self, tmp: Path, warehouse: Path) -> None:
        self.tmp, self.warehouse = tmp, warehouse
        (tmp / "bills").mkdir()
        (tmp / "dcgm").mkdir()
        (tmp / "dcgm" / "node-a.prom").write_text(exposition(dcgm_samples()))
        smi_logs(tmp / "smi")

    def bill(self, restated: bool = False) -> None:
        write_focus_csv(self.tmp / "bills" / "cur.csv", bill_lines(restated))
        self._run("bills", "focus_files", {"path": str(self.tmp / "bills" / "*.csv")})

    def dcgm(self) -> None:
        self._run(
            "dcgm",
            "dcgm_exporter",
            {
                "targets": [str(self.tmp / "dcgm" / "*.prom")],
                "resource_map": {"node-a": "i-0aaa"},
                "namespace_teams": NAMESPACE_TEAMS,
            },
        )

    def smi(self) -> None:
        self._run(
            "smi",
            "nvidia_smi_csv",
            {"path": str(self.tmp / "smi" / "*" / "*.csv"), "resource_map": {"node-b": "i-0bbb"}},
        )

    sources: tuple[type, ...] = (FocusFiles, DcgmExporter, NvidiaSmiCsv)  # the types the world loads with

    def registry(self) -> Registry:
        registry = Registry()
        for cls in self.sources:
            registry.register(cls)
        return registry

    def _run(self, name: str, kind: str, options: dict, **kwargs) -> None:
        result = run_source(self.registry(), self.warehouse, name, kind, options, team_tag_keys=("team",), **kwargs)
        assert result.status in ("succeeded", "skipped"), result.error


ORDERS = {
    "metrics first": ["dcgm", "smi", "bill:restated"],
    "bill first": ["bill:restated", "dcgm", "smi"],
    "between": ["dcgm", "bill:restated", "smi"],
    "restated after the metrics": ["bill", "dcgm", "smi", "bill:restated"],
    "restated between re-runs": ["smi", "bill", "dcgm", "bill:restated", "dcgm", "smi"],
}


def play(tmp: Path, steps: list[str], world_class: type[World] = World) -> Path:
    """Play ``steps`` ("bill", "bill:restated" or a World method's name) on a fresh warehouse under ``tmp``."""
    warehouse = tmp / "wh" / "gpufinops.duckdb"
    world = world_class(tmp, warehouse)
    for step in steps:
        kind, _, flag = step.partition(":")
        if kind == "bill":
            world.bill(restated=flag == "restated")
        else:
            getattr(world, kind)()
    return warehouse


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Path]:
    return {name: play(tmp_path_factory.mktemp(name.replace(" ", "-")), steps) for name, steps in ORDERS.items()}


def test_every_order_gives_the_same_allocation(outcomes):
    digests = {name: table_digest(path, "gpu_allocation_hourly") for name, path in outcomes.items()}
    assert len(set(digests.values())) == 1, digests
    rows = digests["bill first"][0]
    assert rows > 0


def test_every_order_gives_the_same_carbon_rows(outcomes):
    """carbon_hourly is rebuilt with the allocation (derived/carbon.py): the same rows in every order."""
    digests = {name: table_digest(path, "carbon_hourly") for name, path in outcomes.items()}
    assert len(set(digests.values())) == 1, digests
    assert digests["bill first"][0] > 0


def test_the_allocation_is_the_restated_bill_split_as_measured(outcomes):
    warehouse = outcomes["restated between re-runs"]
    sums = query(
        warehouse,
        """
        WITH bill AS (SELECT "ResourceId" AS resource_id, "ChargePeriodStart" AS hour, sum("EffectiveCost") AS cost
                      FROM cost_line_items GROUP BY ALL)
        SELECT a.resource_id, a.hour, sum(a.cost_usd), any_value(b.cost) FROM gpu_allocation_hourly a
        JOIN bill b USING (resource_id, hour) GROUP BY ALL""",
    )
    assert len(sums) == 2 * HOURS and all(got == bill for _, _, got, bill in sums)
    per = {
        (r[0], r[1], r[2], r[3]): (r[4], r[5])
        for r in query(
            warehouse,
            """
        SELECT resource_id, coalesce(pod, process, '-'), basis, team, sum(cost_usd), sum(share)
        FROM gpu_allocation_hourly GROUP BY ALL""",
        )
    }
    per_gpu = Decimal("40") / 8 * HOURS  # $5 a GPU-hour once restated, over the four hours

    def cost(*key) -> Decimal:
        return per[key][0]

    near = {"abs": Decimal("1e-12")}
    assert cost("i-0aaa", "train-0", "whole", "vision") == pytest.approx(per_gpu * 200 / 240, **near)
    assert cost("i-0aaa", "s-0", "timeslice", "nlp") == cost("i-0aaa", "s-1", "timeslice", "nlp") == per_gpu / 2
    assert cost("i-0aaa", "nb-0", "mig", "platform") == pytest.approx(per_gpu * 3 / 7, **near)
    # GPU 0 after its pod left, GPU 2's free slices, GPU 3 and the four GPUs without metrics: the owner's idle capacity
    idle = sum(v[0] for k, v in per.items() if k[0] == "i-0aaa" and k[2] == "unallocated")
    assert idle == pytest.approx(per_gpu * (Decimal(40) / 240 + Decimal(4) / 7 + 1 + 4), **near)
    assert {k[3] for k in per if k[2] == "unallocated"} == {"platform"}
    assert cost("i-0bbb", "/usr/bin/python3", "timeslice", "research") == Decimal("2") * HOURS
    assert set(per) == {
        ("i-0aaa", "train-0", "whole", "vision"),
        ("i-0aaa", "s-0", "timeslice", "nlp"),
        ("i-0aaa", "s-1", "timeslice", "nlp"),
        ("i-0aaa", "nb-0", "mig", "platform"),
        ("i-0aaa", "-", "unallocated", "platform"),
        ("i-0bbb", "/usr/bin/python3", "timeslice", "research"),
    }


def test_a_namespace_rule_change_and_a_settings_change_reallocate(tmp_path):
    warehouse = play(tmp_path, ["bill", "dcgm"])
    world = World.__new__(World)
    world.tmp, world.warehouse = tmp_path, warehouse
    world._run(
        "dcgm",
        "dcgm_exporter",
        {
            "targets": [str(tmp_path / "dcgm" / "*.prom")],
            "resource_map": {"node-a": "i-0aaa"},
            "namespace_teams": {**NAMESPACE_TEAMS, "notebooks": "research"},
        },
    )
    teams = dict(
        query(warehouse, "SELECT pod, any_value(team) FROM gpu_allocation_hourly WHERE pod IS NOT NULL GROUP BY 1")
    )
    assert teams["nb-0"] == "research" and teams["train-0"] == "vision"
    before = query(warehouse, "SELECT count(*) FROM gpu_allocation_hourly WHERE method = 'spread'")[0][0]
    # a changed [allocation] applies before a job's loads, even when no source has anything new
    assert allocation.configure(warehouse, allocation.AllocationSettings(unallocated="spread"))
    after = query(warehouse, "SELECT count(*), sum(cost_usd) FROM gpu_allocation_hourly WHERE method = 'spread'")[0]
    assert before == 0 and after[0] > 0 and after[1] > 0


def test_a_version_6_warehouse_upgrades_and_allocates_on_its_next_loads(tmp_path):
    warehouse = tmp_path / "wh" / "gpufinops.duckdb"
    warehouse.parent.mkdir(parents=True)
    con = duckdb.connect(str(warehouse))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    for version, migrate in enumerate(schema.MIGRATIONS[:6], start=1):
        for statement in migrate():
            con.execute(statement)
        con.execute("INSERT INTO schema_version VALUES (?, now())", [version])
    con.execute("INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, source) VALUES (?, 'GPU-old', 'old')", [START])
    con.close()
    db.prepare(warehouse)  # a process's start upgrades it (a writer alone refuses an old warehouse)
    with db.writer(warehouse) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(schema.SCHEMA_VERSION,)]
        assert con.execute("SELECT gpu_uuid FROM gpu_metrics_hourly").fetchall() == [("GPU-old",)]
        for table in ("gpu_workloads_hourly", "gpu_allocation_hourly", "allocation_settings"):
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)]
    world = World(tmp_path, warehouse)
    world.bill()
    world.dcgm()
    assert query(warehouse, "SELECT count(DISTINCT resource_id) FROM gpu_allocation_hourly")[0][0] == 1
