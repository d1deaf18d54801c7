"""The same hostile values through every registered ingestor: the one validation layer must hold for each.

For every source type in the registry (its real input from tests/test_conformance.py's FIXTURES, which
must cover the registry) and every class of bad value the declared domains name (warehouse/domains.py:
NaN, ±infinity, 1e308, negative, out of range, control characters, a huge string, a time in 1970 or
9999, money beyond the ledger's DECIMAL), the ingestor's own batch is taken as it would be loaded and
one value of its first row is replaced by the hostile one, in the first column of the target table
whose domain that value violates. The run must fail with one short sentence naming the source and the
column (or, for money past the DECIMAL, the type), leave the table and the cursor as they were, and
the next, honest run must load. A new registered ingestor is fuzzed here without new code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpufinops.ingest.core.registry import Batch, IngestContext, Registry, default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.warehouse import column_types, schema
from gpufinops.warehouse.domains import DOMAINS
from tests.conftest import query, table_digest
from tests.fuzz_harness import _empty_warehouse
from tests.test_conformance import FIXTURES, TYPES

REGISTRY = default_registry()
_INPUTS: dict[str, tuple[dict, Any]] = {}


def _classes(table: str) -> dict[str, list[str]]:
    """hostile class -> the table's columns whose domain it violates, in declaration order."""
    out: dict[str, list[str]] = {}
    for column, domain in DOMAINS.get(table, {}).items():
        for name in domain.hostile():
            out.setdefault(name, []).append(column)
    return out


CASES = [(source_type, name) for source_type in TYPES for name in _classes(REGISTRY.get(source_type).meta.target_table)]


# Inputs that are an account in the process's moto backends, which every other AWS input resets: planted
# again for each test rather than reused.
LIVE_ACCOUNTS = frozenset({"aws_storage", "cloudwatch_gpu"})


def _inputs(source_type: str, warehouse: Path) -> dict:
    """The type's conformance input, built once; an input that fills the test's own warehouse (a source
    costed from metrics already loaded) is built for each test, beside it, as the conformance suite does."""
    if source_type in _INPUTS and source_type not in LIVE_ACCOUNTS:
        return _INPUTS[source_type][0]
    made = FIXTURES[source_type](_mkdir(warehouse.parent.parent / f"input-{source_type}"))
    if not warehouse.exists():
        _INPUTS[source_type] = made
    return made[0]


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _as_sql(ctx: IngestContext, batch: Batch, n: int) -> tuple[str, list]:
    if isinstance(batch.data, str):
        return batch.data, list(batch.params)
    name = f"_hostile_batch_{n}"
    ctx.con.register(name, batch.data)
    return f"SELECT * FROM {name}", []


def tampered(source_type: str, hostile: str, planted: list[str]) -> Registry:
    """A registry whose ``source_type`` loads its own rows with one value replaced (recorded in ``planted``)."""
    base = REGISTRY.get(source_type)
    table = base.meta.target_table
    candidates = _classes(table)[hostile]
    target = {f.name: column_types.sql_type(f) for f in schema.TABLES[table].schema}

    def fetch(self, ctx: IngestContext):
        result = base.fetch(self, ctx)
        for n, batch in enumerate(result.batches):
            if batch.table != table or batch.data is None:
                continue
            sql, params = _as_sql(ctx, batch, n)
            types = {r[0]: r[1] for r in ctx.con.execute(f"DESCRIBE {sql}", params).fetchall()}
            column = next((c for c in candidates if c in types), None)
            if column is None:
                continue
            literal = DOMAINS[table][column].hostile()[hostile]
            batch.data = (
                f"SELECT * EXCLUDE (__fz) REPLACE (CASE WHEN __fz = 1 THEN CAST({literal} AS {target[column]}) "
                f'ELSE "{column}" END AS "{column}") FROM (SELECT *, row_number() OVER () AS __fz FROM ({sql}))'
            )
            batch.params = params
            planted.append(column)
            break
        return result

    registry = Registry()
    registry.register(type(base.__name__, (base,), {"fetch": fetch}))
    return registry


def _before(warehouse: Path, table: str) -> tuple:
    if not warehouse.exists():  # an empty, migrated warehouse
        warehouse.parent.mkdir(parents=True, exist_ok=True)
        _empty_warehouse(warehouse)
    return table_digest(warehouse, table), query(warehouse, "SELECT source, state FROM ingest_state ORDER BY source")


@pytest.mark.parametrize(("source_type", "hostile"), CASES)
def test_a_hostile_value_fails_cleanly(source_type, hostile, warehouse):
    options = _inputs(source_type, warehouse)
    table = REGISTRY.get(source_type).meta.target_table
    planted: list[str] = []
    before = _before(warehouse, table)
    result = run_source(tampered(source_type, hostile, planted), warehouse, "conf", source_type, options)
    if not planted:
        pytest.skip(f"{source_type}'s batches have none of the columns {hostile!r} applies to")
    column = planted[0]
    error = result.error or ""
    assert result.status == "failed", (column, hostile)
    assert error.startswith("conf: ") and "\n" not in error and len(error) < 700, error
    assert "LINE 1" not in error and "^^^" not in error and not re.search(r"\d{20}", error), error
    assert "Exception" not in error, error
    if DOMAINS[table][column].kind == "money":
        assert "DECIMAL(38,15)" in error or column in error, error
    else:
        assert f"column {column} value '" in error, error
    assert _before(warehouse, table) == before


@pytest.mark.parametrize("source_type", TYPES)
def test_the_next_run_after_a_refused_one_loads(source_type, warehouse):
    options = _inputs(source_type, warehouse)
    hostile = next((name for t, name in CASES if t == source_type), None)
    if hostile is None:
        pytest.skip(f"{source_type}'s table declares no domain")
    planted: list[str] = []
    refused = run_source(tampered(source_type, hostile, planted), warehouse, "conf", source_type, options)
    assert refused.status == "failed" or not planted
    honest = run_source(REGISTRY, warehouse, "conf", source_type, options)
    assert honest.status == "succeeded" and honest.rows > 0, honest.error
