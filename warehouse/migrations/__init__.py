"""The warehouse's migrations, one frozen module per schema version.

Each ``vNNN_<what>.py`` holds the statements its version ran when it shipped, as literal SQL (never
generated from today's schemas), so an old warehouse is upgraded by exactly what a fresh one was built
with. A schema change is a new module numbered after the last (found by its file name, nothing else to
edit); a shipped one is never edited (tests/test_migrations.py: every old version, and real warehouse
files made by old commits, migrated to head equal a fresh warehouse; a fresh warehouse has the columns
warehouse/schema.py declares).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from types import ModuleType

# Every ``vNNN_<what>`` module of this package, in version order: a new one is found by its file name.
_MODULES: tuple[ModuleType, ...] = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if re.fullmatch(r"v\d{3}_\w+", info.name)
)


def _statements(module: ModuleType) -> Callable[[], list[str]]:
    def statements() -> list[str]:
        return list(module.STATEMENTS)

    statements.__name__ = f"migration_{module.VERSION}"
    return statements


# Index i migrates version i to i + 1: each entry returns its version's statements.
MIGRATIONS: list[Callable[[], list[str]]] = [_statements(m) for m in _MODULES]
SCHEMA_VERSION = len(MIGRATIONS)
assert [m.VERSION for m in _MODULES] == list(range(1, SCHEMA_VERSION + 1)), "migrations out of order"
