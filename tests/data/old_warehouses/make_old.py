"""Run inside an old commit's checkout: build a small warehouse with that commit's own schema code."""
import sys
from decimal import Decimal
from datetime import datetime, timezone
from warehouse import db
try:
    from warehouse import rollups
except ImportError:  # before schema version 5
    rollups = None
path = sys.argv[1]
t = datetime(2026, 11, 1, tzinfo=timezone.utc)
with db.writer(path) as con:
    for i, (team, gpu) in enumerate((("research", 8), ("ml", 0), ("research", 1))):
        con.execute('INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "ProviderName", "ServiceName", '
                    '"ChargeCategory", "BilledCost", "EffectiveCost", "ListCost", "ResourceId", "x_GpuCount", "x_GpuModel", '
                    '"x_Team", "x_Source", "x_InstanceType") VALUES (?, ? + INTERVAL 1 HOUR, \'AWS\', \'Amazon EC2\', \'Usage\', '
                    '?, ?, ?, ?, ?, ?, ?, \'cur\', ?)',
                    [t, t, Decimal(f"{i + 1}.123456789012345"), Decimal(f"{i + 1}.123456789012345"), Decimal("9.5"),
                     f"i-{i}", gpu, "A100" if gpu else None, team, "p4d.24xlarge" if gpu else "m5.large"])
    con.execute("INSERT INTO recommendations (id, kind, team, status, monthly_savings_usd) VALUES ('r1', 'idle_gpu', 'research', 'dismissed', 12.34)")
    con.execute("INSERT INTO decisions VALUES ('r1', 'dismiss', 'kept on purpose', 'alice', ?)", [t])
    con.execute("INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, resource_id, source) VALUES (?, 'GPU-1', 'i-0', 'dcgm')", [t])
    if rollups is not None:
        rollups.refresh_cost_daily(con, "cur")
    con.execute("CHECKPOINT")
