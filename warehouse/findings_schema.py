"""What the models concluded: recommendations and the decisions on them, the on-prem comparison, the
findings withheld and why, and the results stored for the dashboard.

Written by the model runs (``models/``) and the decisions people make (``warehouse/store.py``).
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_groups import FINDING_CHANGE, MODEL_RUN_STAMP
from gpufinops.warehouse.column_types import JSON_META, UTC_TS

RECOMMENDATIONS = pa.schema(
    [
        ("id", pa.string()),
        ("kind", pa.string()),
        ("team", pa.string()),
        ("provider", pa.string()),
        ("resource_id", pa.string()),
        ("workload", pa.string()),
        *FINDING_CHANGE,
        ("risk", pa.string()),
        pa.field("evidence", pa.string(), metadata=JSON_META),
        ("created_at", UTC_TS),
        ("status", pa.string()),
        # v4: which model version made the finding, and a fingerprint of what a decision was made on
        # (a dismissed finding reopens only when this changes).
        ("model_version", pa.string()),
        ("evidence_hash", pa.string()),
        # v8: one plan per resource (models/plans.py): primary | step | alternative, and the plan's id
        ("plan", pa.string()),
        ("plan_id", pa.string()),
    ]
)

# v8: the on-prem comparison: every node group's (and workload's) verdict of the last model run —
# keep, shrink, burst — with its cost per used GPU-hour and break-even. Facts, not recommendations.
ONPREM_COMPARISON = pa.schema(
    [
        ("id", pa.string()),
        ("team", pa.string()),
        ("resource_id", pa.string()),
        ("workload", pa.string()),
        ("pattern", pa.string()),
        ("action", pa.string()),
        *FINDING_CHANGE,
        pa.field("evidence", pa.string(), metadata=JSON_META),
        *MODEL_RUN_STAMP,
    ]
)

DECISIONS = pa.schema(
    [
        ("recommendation_id", pa.string()),
        ("decision", pa.string()),
        ("reason", pa.string()),
        ("actor", pa.string()),
        ("decided_at", UTC_TS),
    ]
)

# v6: what each model run examined but did not recommend, why, and which fact / source was missing
# (replaced per kind by every model run, like the open recommendations).
WITHHELD_FINDINGS = pa.schema(
    [
        ("kind", pa.string()),
        ("resource_id", pa.string()),
        ("team", pa.string()),
        ("provider", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("missing", pa.string()),
        ("source_hint", pa.string()),
        *MODEL_RUN_STAMP,
    ]
)

# v15: results the load job computes for the dashboard (dashboard/precomputed.py), an Arrow IPC frame each.
STORED_RESULTS = pa.schema(
    [
        ("name", pa.string()),
        ("scope", pa.string()),
        ("data_version", pa.string()),
        ("computed_at", UTC_TS),
        ("seconds", pa.float64()),
        pa.field("frame", pa.binary(), metadata={"sql_type": "BLOB"}),
    ]
)
