"""What the product tells people, and whether it got there: alerts and their deliveries, the weekly
report's deliveries, and the webhook pushes of new recommendations.
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_types import DECIMAL, JSON_META, UTC_TS

# A delivery's state (pending | sending | sent | failed | cancelled) and the tries it took so far.
_DELIVERY_STATE: tuple[pa.Field, ...] = (
    pa.field("status", pa.string()),
    pa.field("attempts", pa.int32()),
)

# v7: alerts (models/alerts.py rules, jobs/alerts delivery): one row per (rule, scope, period, threshold),
# its state open | resolved | expired | superseded, and what it said when it opened and when it closed.
ALERTS = pa.schema(
    [
        ("alert_id", pa.string()),
        ("rule", pa.string()),
        ("scope", pa.string()),
        ("period", pa.string()),
        ("threshold", pa.string()),
        ("severity", pa.string()),
        pa.field("teams", pa.list_(pa.string()), metadata={b"sql_type": b"VARCHAR[]"}),  # [] = no team: finance only
        ("title", pa.string()),
        ("summary", pa.string()),
        ("value_usd", DECIMAL),
        ("limit_usd", DECIMAL),
        pa.field("details", pa.string(), metadata=JSON_META),
        ("status", pa.string()),
        ("resolution", pa.string()),
        ("opened_at", UTC_TS),
        ("evaluated_at", UTC_TS),
        ("closed_at", UTC_TS),
    ]
)

# The alert delivery ledger: one row per (alert, event, channel, target), written as 'pending' in the
# transaction that opens or resolves the alert; the alerts of one notification share its id.
ALERT_DELIVERIES = pa.schema(
    [
        ("notification_id", pa.string()),
        ("alert_id", pa.string()),
        ("event", pa.string()),  # opened | resolved
        ("channel", pa.string()),
        ("target", pa.string()),  # email + address | slack / webhook + a hash of the URL
        *_DELIVERY_STATE,
        ("message_id", pa.string()),
        ("http_status", pa.int32()),
        ("error", pa.string()),
        ("created_at", UTC_TS),
        ("updated_at", UTC_TS),
        ("sent_at", UTC_TS),
    ]
)

# The weekly report: one row per (week, recipient) — sent once, even across re-runs and restarts.
REPORT_DELIVERIES = pa.schema(
    [
        ("report", pa.string()),
        ("week", pa.string()),
        ("recipient", pa.string()),
        *_DELIVERY_STATE,
        ("message_id", pa.string()),
        ("sent_at", UTC_TS),
        ("error", pa.string()),
        ("updated_at", UTC_TS),
    ]
)

# Webhook pushes of new recommendations (signed, retried).
WEBHOOK_DELIVERIES = pa.schema(
    [
        ("delivery_id", pa.string()),
        ("url", pa.string()),
        ("payload_sha256", pa.string()),
        ("recommendation_ids", pa.string()),
        *_DELIVERY_STATE,
        ("last_attempt_at", UTC_TS),
        ("http_status", pa.int32()),
        ("error", pa.string()),
    ]
)
