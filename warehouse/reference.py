"""Reference tables shipped with gpufinops, kept in step with their bundled CSVs.

``gpu_specs`` holds GPU datasheet figures (``data/gpu_specs.csv``); ``gpu_instance_reference`` holds
what each instance type carries, from every registered provider's ``inventory`` file (kernel/providers.py:
AWS and Google Cloud in ``data/gpu_instance_types.csv``, sources in ``data/GPU_INSTANCE_TYPES_SOURCES.md``;
Azure in ``data/azure_gpu_sizes.csv``, sources in docs/sources/azure.md), so a bill without GPU attributes and a first day
without pricing credentials still resolve GPU model, count and memory. Each table is replaced in one
transaction, only when its CSV's sha256 changed since the last load (recorded in ``ingest_state``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv

from gpufinops.kernel import providers
from gpufinops.warehouse import reference_schema
from gpufinops.warehouse.gpu_models import CANONICAL_GPU_MODELS, GPU_SPECS_PATH, load_gpu_specs

log = logging.getLogger(__name__)

KARPENTER_PRICES_PATH: Path = Path(__file__).parent / "data" / "aws_ondemand_karpenter.csv"
GPU_INSTANCE_TYPES_PATH: Path = Path(__file__).parent / "data" / "gpu_instance_types.csv"
ACCELERATORS = ("gpu", "trainium", "inferentia")
# GCP N1 rows are an N1 host with attached GPUs: "n1+<accelerator type>x<count>"; their vCPUs and
# memory come from the n1 machine type the bill names separately, so those two columns stay NULL.
N1_PREFIX = "n1+"

_GPU_SPECS_STATE = "_reference:gpu_specs"
_INSTANCE_TYPES_STATE = "_reference:gpu_instance_types"


def refresh_gpu_specs(con: duckdb.DuckDBPyConnection) -> bool:
    """Load ``gpu_specs`` when the bundled CSV changed since the last load; returns whether it did."""
    return _refresh(con, "gpu_specs", [GPU_SPECS_PATH], load_gpu_specs, _GPU_SPECS_STATE)


def refresh_gpu_instance_types(con: duckdb.DuckDBPyConnection) -> bool:
    """Replace the rows of ``gpu_instance_reference`` when the bundled CSV changed; returns whether it did.

    The CSV is parsed and validated before anything is written: a bad file raises ``ValueError`` and
    leaves the table and its recorded digest as they were, so the next run retries.
    """
    return _refresh(
        con,
        "gpu_instance_reference",
        inventory_paths(),
        load_gpu_instance_types,
        _INSTANCE_TYPES_STATE,
    )


def stale(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a reference table lags its bundled CSV (works on a read-only connection)."""
    return (
        not _loaded(con, [GPU_SPECS_PATH], _GPU_SPECS_STATE)[0]
        or not _loaded(con, inventory_paths(), _INSTANCE_TYPES_STATE)[0]
    )


def inventory_paths() -> list[Path]:
    """The GPU inventory files of the registered providers, each once, in registration order (the AWS and
    Google Cloud file is ``GPU_INSTANCE_TYPES_PATH``, which a test may point elsewhere)."""
    paths: list[Path] = []
    for spec in providers.registered():
        if spec.inventory is None:
            continue
        path = GPU_INSTANCE_TYPES_PATH if spec.inventory.name == "gpu_instance_types.csv" else spec.inventory
        if path not in paths:
            paths.append(path)
    return paths


def _loaded(con: duckdb.DuckDBPyConnection, paths: list[Path], state_key: str) -> tuple[bool, str]:
    """(whether the table holds ``paths`` as they are now, their digest)."""
    hashed = hashlib.sha256()
    for path in paths:
        hashed.update(path.read_bytes())
    digest = hashed.hexdigest()
    try:
        rows = con.execute("SELECT state FROM ingest_state WHERE source = ?", [state_key]).fetchall()
    except duckdb.CatalogException:  # no warehouse tables yet
        return False, digest
    return bool(rows) and json.loads(rows[0][0]).get("sha256") == digest, digest


def _refresh(
    con: duckdb.DuckDBPyConnection, table_name: str, paths: list[Path], load: Callable[[], pa.Table], state_key: str
) -> bool:
    loaded, digest = _loaded(con, paths, state_key)
    if loaded:
        return False
    table = load()  # validated before the transaction: a bad CSV changes nothing
    view = f"_{table_name}_csv"
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(f"DELETE FROM {table_name}")
        con.register(view, table)
        con.execute(f"INSERT INTO {table_name} BY NAME SELECT * FROM {view}")
        con.unregister(view)
        con.execute("DELETE FROM ingest_state WHERE source = ?", [state_key])
        con.execute("INSERT INTO ingest_state VALUES (?, ?, now())", [state_key, json.dumps({"sha256": digest})])
        con.execute("COMMIT")
    except BaseException:
        try:  # never mask the cause (a full disk) with "cannot rollback - no transaction is active"
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise
    log.info("%s loaded: %d rows", table_name, table.num_rows)
    return True


def load_gpu_instance_types(path: Path | None = None) -> pa.Table:
    """Read and validate the GPU instance inventory with explicit column types.

    Args:
        path: One CSV to read instead of every registered provider's inventory file (``inventory_paths``).

    Returns:
        A table with the columns and types of :data:`reference_schema.GPU_INSTANCE_REFERENCE`; empty fields are null.

    Raises:
        ValueError: One sentence naming the file, row, column and value, when the header differs, a value
            does not parse, or a row breaks the inventory's rules (see :func:`row_problem`).
    """
    if path is None:
        tables = [_inventory_file(p) for p in inventory_paths()]
        return pa.concat_tables(tables) if tables else reference_schema.GPU_INSTANCE_REFERENCE.empty_table()
    return _inventory_file(path)


def _inventory_file(csv_path: Path) -> pa.Table:
    expected = reference_schema.GPU_INSTANCE_REFERENCE
    try:
        table = pacsv.read_csv(
            csv_path,
            convert_options=pacsv.ConvertOptions(
                column_types={field.name: field.type for field in expected}, strings_can_be_null=True
            ),
        )
    except pa.ArrowInvalid as exc:
        raise ValueError(f"{csv_path}: {exc}") from exc
    if table.column_names != expected.names:
        raise ValueError(f"{csv_path}: expected columns {expected.names}, got {table.column_names}")
    table = table.cast(expected)
    seen: set[tuple[str, str]] = set()
    for index, row in enumerate(table.to_pylist()):
        key = (row["provider"], row["instance_type"])
        problem = ("instance_type", "a duplicate of an earlier row") if key in seen else row_problem(row)
        if problem is not None:
            column, reason = problem
            raise ValueError(
                f"{csv_path}: row {index + 2} ({row['provider']} {row['instance_type']}), "
                f"column {column}: value {row[column]!r} is {reason}"
            )
        seen.add(key)
    log.debug("loaded %d GPU instance types from %s", table.num_rows, csv_path)
    return table


def row_problem(row: dict) -> tuple[str, str] | None:
    """The first rule one inventory row breaks, as (column, reason), or None for a valid row."""
    codes = inventory_providers()
    if row["provider"] not in codes:
        return "provider", f"not one of {codes}"
    if not row["instance_type"]:
        return "instance_type", "empty"
    if row["accelerator"] not in ACCELERATORS:
        return "accelerator", f"not one of {ACCELERATORS}"
    problem = _gpu_problem(row) if row["accelerator"] == "gpu" else _chip_problem(row)
    if problem is not None:
        return problem
    n1 = row["provider"] == "gcp" and row["instance_type"].startswith(N1_PREFIX)
    for column in ("vcpus", "memory_gib"):
        if n1 and row[column] is not None:
            return column, "set on an n1+GPU row (the n1 machine type carries it)"
        if not n1 and (row[column] is None or row[column] <= 0):
            return column, "not a positive number"
    url = row["source_url"] or ""
    if not url.startswith("https://") or " " in url:
        return "source_url", "not an https URL"
    return None


def inventory_providers() -> tuple[str, ...]:
    """The codes of the registered providers that ship a GPU inventory."""
    return tuple(s.code for s in providers.registered() if s.inventory is not None)


def _gpu_problem(row: dict) -> tuple[str, str] | None:
    if row["gpu_model"] not in CANONICAL_GPU_MODELS:
        return "gpu_model", "not a canonical GPU model (warehouse/gpu_models.py)"
    if row["gpu_count"] is None or row["gpu_count"] < 1:
        return "gpu_count", "not a whole number of GPUs of at least 1"
    fraction = row["gpu_fraction"]
    if fraction is None or not 0 < fraction <= 1:
        return "gpu_fraction", "not in (0, 1]"
    if fraction < 1 and row["gpu_count"] != 1:
        return "gpu_count", "not 1 on a fractional-GPU row"
    if row["gpu_memory_gib"] is None or row["gpu_memory_gib"] <= 0:
        return "gpu_memory_gib", "not a positive number"
    for column in ("accelerator_model", "accelerator_count", "accelerator_memory_gib"):
        if row[column] is not None:
            return column, "set on a GPU row (accelerator_* describe Trainium/Inferentia chips)"
    return None


def _chip_problem(row: dict) -> tuple[str, str] | None:
    if row["gpu_count"] != 0:
        return "gpu_count", "not 0 on a Trainium/Inferentia row (its chips are not GPUs)"
    for column in ("gpu_model", "gpu_fraction", "gpu_memory_gib"):
        if row[column] is not None:
            return column, "set on a Trainium/Inferentia row"
    if not row["accelerator_model"]:
        return "accelerator_model", "empty"
    if row["accelerator_count"] is None or row["accelerator_count"] < 1:
        return "accelerator_count", "not a whole number of chips of at least 1"
    memory = row["accelerator_memory_gib"]
    if memory is not None and memory <= 0:
        return "accelerator_memory_gib", "not a positive number"
    return None


# A billed instance type's GPU model and count: the price catalogue's row (aws_pricing, gcp_catalog)
# when one was loaded, else the shipped inventory (gpu_instance_types.csv). A relation with
# (instance_type, gpu_model, gpu_count, origin = 'catalogue' | 'inventory'). Loads fill what a bill
# leaves out from it (COALESCE(bill, this)); the models' queries let a catalogue row win over the bill
# (resolved_gpu_count), so the answer is the same whichever of the two was loaded first.
INSTANCE_GPUS_SQL = """(
    SELECT instance_type, arg_min(gpu_model, rank) AS gpu_model, arg_min(gpu_count, rank) AS gpu_count,
           arg_min(origin, rank) AS origin
    FROM (SELECT instance_type, any_value(gpu_model) AS gpu_model, max(gpu_count) AS gpu_count,
                 'catalogue' AS origin, 1 AS rank
          FROM instance_types WHERE gpu_count > 0 GROUP BY 1
          UNION ALL
          SELECT instance_type, gpu_model, gpu_count, 'inventory' AS origin, 2 AS rank FROM gpu_instance_reference
          WHERE accelerator = 'gpu' AND gpu_count > 0)
    GROUP BY instance_type)"""


def resolved_gpu_count(bill_count: str, inventory: str) -> str:
    """SQL: GPUs per instance — the catalogue, else the bill (``bill_count``), else the inventory
    (``inventory`` is an alias of INSTANCE_GPUS_SQL joined on the instance type)."""
    return (
        f"CASE WHEN {inventory}.origin = 'catalogue' THEN {inventory}.gpu_count "
        f"ELSE COALESCE({bill_count}, {inventory}.gpu_count) END"
    )
