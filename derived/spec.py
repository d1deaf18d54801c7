"""What one derived table is: its spec, ``DerivedSpec``, holding every fact the ingest runner and job need.

A derived table is a pure function of the tables it follows (and of its config section's settings, stored
beside it): every load that replaces rows of a followed table tells it what changed (:meth:`capture`, before
the old rows are deleted and after the new ones are inserted), and after the load's last batch it brings its
rows in step (:meth:`apply`), inside the load's own transaction, in the registry's order
(:mod:`gpufinops.derived.registry`). A changed config section re-applies the whole table (:meth:`configure`),
only for the tables that declared that section. The spec classes live here, apart from the registry, so that a
table's module imports nothing that imports it back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import duckdb


@dataclass(frozen=True)
class Change:
    """Rows of one followed table that a load's batch replaces: ``where``/``params`` select them (``inserted``
    False: the old rows, just before their delete; True: the rows the batch holds now, just after its insert).
    ``where`` is None when the batch owns no rows of its own (a reference table loaded whole)."""

    table: str
    source: str
    where: str | None
    params: list
    slice_expr: str  # the SQL of one slice of the table (e.g. its UTC hour)
    slices: tuple  # the slices the batch replaces (empty: everything the source holds there)
    inserted: bool


@dataclass
class Touched:
    """What one load changed, collected by the captures and read by the applies: each table's own notes under
    its name (a table that follows another's notes reads them under that table's name)."""

    source: str
    tables: set[str] = field(default_factory=set)  # the followed tables whose rows this load replaced
    notes: dict[str, Any] = field(default_factory=dict)

    def note(self, name: str, factory: Callable[[], Any]) -> Any:
        """The notes kept under ``name``, made by ``factory`` the first time."""
        if name not in self.notes:
            self.notes[name] = factory()
        return self.notes[name]


Capture = Callable[[duckdb.DuckDBPyConnection, Change, Touched], None]
Apply = Callable[[duckdb.DuckDBPyConnection, Touched], int]


class Configure(Protocol):
    """Store the section's settings; when they changed, re-apply the whole table (True: it did)."""

    def __call__(
        self, warehouse_path: str | os.PathLike, settings: Any, *, memory_limit: str | None = None
    ) -> bool: ...


def _nothing_to_capture(con: duckdb.DuckDBPyConnection, change: Change, touched: Touched) -> None:
    return None


def fingerprint(settings: Any) -> str:
    """A settings object's fingerprint: the SHA-256 of its canonical JSON (None: the defaults' absence)."""
    is_instance = dataclasses.is_dataclass(settings) and not isinstance(settings, type)
    value = dataclasses.asdict(settings) if is_instance else settings
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class DerivedSpec:
    """One derived table. ``follows``: the tables whose loads it follows (their batches are captured);
    ``capture``: what a batch of one of them touched; ``apply``: bring the table in step with what was
    touched (rows written); ``section``: its config section (None: it has no settings), whose settings
    ``configure`` stores and, when their fingerprint changed, re-applies the whole table with."""

    name: str
    follows: tuple[str, ...]
    apply: Apply
    capture: Capture = _nothing_to_capture
    section: str | None = None
    configure: Configure | None = None
    doc: str = ""  # one line: what the table holds (docs/architecture.md lists them)

    def __post_init__(self) -> None:
        if (self.section is None) != (self.configure is None):
            raise ValueError(f"derived table {self.name}: a config section and its configure go together")

    def captures(self, table: str) -> bool:
        return table in self.follows

    def fingerprint(self, settings: Any) -> str:
        """The fingerprint of this table's settings: a change of it re-applies this table and no other."""
        return fingerprint(settings)
