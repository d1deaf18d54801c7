"""The source specs' facts that code outside ingest reads, generated from the specs.

Each source type's spec (``IngestorMeta``, ingest/core/registry.py) is the one place its facts are
declared. Two readers cannot import ingest: this layer (ingest imports it) and the dashboard; and
``gpufinops init`` builds its flags at every command's start-up, before any source module is worth
importing. So ``python -m gpufinops.ingest.core.docs --write docs/sources/index.md`` writes, beside
that page, each type's freshness and init question to ``data/source_facts.json``, and
tests/test_source_specs.py fails when the file drifts from the specs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

FACTS_PATH = Path(__file__).parent / "data" / "source_facts.json"


@functools.cache
def facts() -> dict[str, dict[str, Any]]:
    """source type -> {"kind", "lag_hours", "init": {"flag", "question", "option", "section"} or None}."""
    loaded: dict[str, dict[str, Any]] = json.loads(FACTS_PATH.read_text(encoding="utf-8"))
    return loaded
