"""The column groups several warehouse tables carry: one concept each, declared once here and composed
into the tables' schemas (``warehouse/*_schema.py``, and the metrics sample files) in the place each
table stores them. A group's columns keep their order in every table, so a table's DDL is the same as
when it spelled them out (tests/test_migrations.py checks a fresh warehouse against these schemas).
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_types import JSON_META, UTC_TS

# Which configured source loaded a row, and the ingest run that did (the slice a re-load replaces).
LOADED_BY: tuple[pa.Field, ...] = (
    pa.field("source", pa.string()),
    pa.field("ingest_run_id", pa.string()),
)

# The Kubernetes pod a row belongs to, by namespace and name (NULL: not a pod).
POD: tuple[pa.Field, ...] = (
    pa.field("namespace", pa.string()),
    pa.field("pod", pa.string()),
)

# The Kubernetes workload a row belongs to, from the exporter's labels: the pod and its container.
KUBERNETES_WORKLOAD: tuple[pa.Field, ...] = (*POD, pa.field("container", pa.string()))

# The metrics exporter's own hints at what a GPU belongs to: the billed resource and provider ids, and
# the workload; resource_id / team are derived from them at every load (derived/attribution.py).
EXPORTER_HINTS: tuple[pa.Field, ...] = (
    pa.field("resource_hint", pa.string()),
    pa.field("provider_id", pa.string()),
    *KUBERNETES_WORKLOAD,
)

# The change a finding proposes for one resource: what runs now and what it would become (JSON), the
# monthly saving and the model's confidence (recommendations, the on-prem comparison).
FINDING_CHANGE: tuple[pa.Field, ...] = (
    pa.field("current", pa.string(), metadata=JSON_META),
    pa.field("proposed", pa.string(), metadata=JSON_META),
    pa.field("monthly_savings_usd", pa.decimal128(18, 2)),
    pa.field("confidence", pa.float64()),
)

# The model version that wrote a model run's row, and when.
MODEL_RUN_STAMP: tuple[pa.Field, ...] = (
    pa.field("model_version", pa.string()),
    pa.field("created_at", UTC_TS),
)

# One inference server's model in one pod and hour (the serving counters' key, and their costs').
SERVING_KEY: tuple[pa.Field, ...] = (
    pa.field("hour", UTC_TS),
    pa.field("server", pa.string()),  # vllm | tgi | triton | sglang
    pa.field("model", pa.string()),
    *POD,
)

# What an inference server's counters grew by in an hour: tokens, requests and the engine's time.
SERVING_COUNTERS: tuple[pa.Field, ...] = (
    pa.field("input_tokens", pa.float64()),
    pa.field("output_tokens", pa.float64()),
    pa.field("requests", pa.float64()),
    pa.field("prefill_seconds", pa.float64()),
    pa.field("decode_seconds", pa.float64()),  # NULL: the server does not export them
)


def settings_schema() -> pa.Schema:
    """A settings table: the ``key`` / ``value`` pairs of one config section a load computes with."""
    return pa.schema([pa.field("key", pa.string()), pa.field("value", pa.string())])


def names(group: tuple[pa.Field, ...]) -> tuple[str, ...]:
    """The column names of a group, in order."""
    return tuple(f.name for f in group)
