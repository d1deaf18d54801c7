"""One conformance suite for every registered ingestor (like the Meltano SDK's tap tests).

Each ingestor type must have a fixture below that builds real input for it; the suite then checks
what every source promises: the rows match the table's schema, keys are unique, timestamps are UTC,
usage costs are non-negative, a second run changes nothing and a full refresh reproduces the rows.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.warehouse import column_types, schema
from tests import (
    aws_conformance,
    azure_arm_loopback,
    azure_focuscost_data,
    azure_prices_loopback,
    conformance_serving,
    conformance_utilisation,
    gcp_loopback,
    onprem_data,
)
from tests.conftest import DATA, FOCUS_SAMPLE, query, table_digest

REGISTRY = default_registry()


def focus_files_input(tmp: Path) -> tuple[dict, datetime]:
    shutil.copy(FOCUS_SAMPLE, tmp / "focus.csv")
    return {"path": str(tmp / "*.csv")}, datetime(2024, 9, 1, tzinfo=UTC)


def nvidia_smi_input(tmp: Path) -> tuple[dict, datetime]:
    for capture in sorted((DATA / "nvidia-smi").glob("*query-gpu.csv")):
        shutil.copy(capture, tmp / capture.name.replace("__", "-"))
    return {"path": str(tmp / "*.csv")}, datetime(2026, 7, 3, 8, tzinfo=UTC)


FIXTURES: dict[str, Callable[[Path], tuple[dict, datetime]]] = {
    "focus_files": focus_files_input,
    "nvidia_smi_csv": nvidia_smi_input,
    "dcgm_exporter": conformance_utilisation.dcgm_exporter_input,
    "prometheus": conformance_utilisation.prometheus_input,
    "prometheus_serving": conformance_serving.prometheus_serving_input,
    "serving_exporter": conformance_serving.serving_exporter_input,
    **aws_conformance.FIXTURES,
    **gcp_loopback.FIXTURES,
    "onprem": onprem_data.conformance_input,
    "azure_cost_export": azure_focuscost_data.conformance_input,
    "azure_prices": azure_prices_loopback.conformance_input,
    "azure_storage": azure_arm_loopback.conformance_input,
}
TYPES = REGISTRY.names()


def _negative_usage_rows(folder: Path) -> int:
    count = 0
    for path in folder.glob("*.csv"):
        with open(path, newline="") as f:
            count += sum(
                1 for r in csv.DictReader(f) if r["ChargeCategory"] == "Usage" and r["BilledCost"].startswith("-")
            )
    return count


NEGATIVE_USAGE_IN_INPUT = {
    "focus_files": _negative_usage_rows,
    **aws_conformance.NEGATIVE_USAGE,
    **gcp_loopback.NEGATIVE_USAGE,
    "onprem": lambda _: 0,
    "azure_cost_export": lambda _: 0,  # the generated VM days are all billed positive
}


def test_every_registered_ingestor_has_a_conformance_fixture():
    assert sorted(FIXTURES) == TYPES


@pytest.mark.parametrize("source_type", TYPES)
def test_ingestor_conformance(source_type, tmp_path, warehouse):
    meta = REGISTRY.get(source_type).meta
    table = schema.TABLES[meta.target_table]
    inputs = tmp_path / "input"
    inputs.mkdir()
    options, earliest = FIXTURES[source_type](inputs)

    first = run_source(REGISTRY, warehouse, "conf", source_type, options)
    assert first.status == "succeeded", first.error
    assert first.rows > 0
    owned = f'WHERE "{meta.source_column}" = ?' if meta.source_column else ""  # reference tables: no source column
    assert query(warehouse, f"SELECT count(*) FROM {table.name} {owned}", ["conf"] if owned else [])[0][0] == first.rows

    # the key is unique within the source
    keys = ", ".join(f'"{k}"' for k in meta.key)
    dupes = query(warehouse, f"SELECT {keys}, count(*) FROM {table.name} GROUP BY ALL HAVING count(*) > 1")
    assert dupes == []

    # timestamps are UTC-aware and where the input put them
    for field in table.schema:
        if column_types.sql_type(field) == "TIMESTAMPTZ":
            values = [
                r[0]
                for r in query(
                    warehouse, f'SELECT "{field.name}" FROM {table.name} WHERE "{field.name}" IS NOT NULL LIMIT 50'
                )
            ]
            assert all(v.utcoffset().total_seconds() == 0 for v in values), field.name
    time_column = (
        "ChargePeriodStart"
        if table.name == "cost_line_items"
        else {**aws_conformance.TIME_COLUMNS, **gcp_loopback.TIME_COLUMNS}.get(table.name, "hour")
    )
    assert query(warehouse, f'SELECT min("{time_column}") FROM {table.name}')[0][0] >= earliest

    if table.name == "cost_line_items":
        # Usage costs are non-negative unless the provider billed them negative: the real FOCUS sample
        # has 12 negative Microsoft usage rows without ChargeClass 'Correction'. Signs pass through as billed.
        negative = query(
            warehouse,
            """SELECT count(*) FROM cost_line_items
                                       WHERE "ChargeCategory" = 'Usage' AND "BilledCost" < 0""",
        )[0][0]
        assert negative == NEGATIVE_USAGE_IN_INPUT[source_type](inputs)

    before = table_digest(warehouse, table.name)
    second = run_source(REGISTRY, warehouse, "conf", source_type, options)
    assert second.status == "skipped" and table_digest(warehouse, table.name) == before

    run_columns = ("x_IngestRunId", "ingest_run_id")
    content = table_digest(warehouse, table.name, exclude=run_columns)
    refreshed = run_source(REGISTRY, warehouse, "conf", source_type, options, full_refresh=True)
    assert refreshed.status == "succeeded" and refreshed.rows == first.rows
    assert table_digest(warehouse, table.name, exclude=run_columns) == content


UTILISATION_TYPES = [t for t in TYPES if REGISTRY.get(t).meta.target_table == "gpu_metrics_hourly"]


@pytest.mark.parametrize("source_type", UTILISATION_TYPES)
def test_arrival_order_does_not_matter(source_type, tmp_path):
    """Metrics before the bill (the live order) or after it: the same gpu_metrics_hourly, attributed."""
    outcomes = []
    for order in (("metrics", "bill"), ("bill", "metrics")):
        folder = tmp_path / "-".join(order)
        (folder / "input").mkdir(parents=True)
        options, _ = FIXTURES[source_type](folder / "input")
        bills = conformance_utilisation.write_bills(folder / "cur")
        warehouse = folder / "wh" / "gpufinops.duckdb"
        for step in order:
            result = (
                run_source(REGISTRY, warehouse, "conf", source_type, options)
                if step == "metrics"
                else run_source(REGISTRY, warehouse, "bills", "aws_cur", bills, team_tag_keys=("user_team",))
            )
            assert result.status == "succeeded", (step, result.error)
        outcomes.append(
            (
                table_digest(warehouse, "gpu_metrics_hourly", exclude=("ingest_run_id",)),
                query(warehouse, "SELECT count(resource_id), count(team) FROM gpu_metrics_hourly")[0],
            )
        )
    assert outcomes[0] == outcomes[1]
