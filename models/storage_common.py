"""What the storage models share: the bill's own storage rates, which storage belongs to GPU work, and the
inventory read once into plain rows (the recommend steps get no connection).

**Rates** are the bill's: for each (provider, region, meter) the EffectiveCost over the PricingQuantity of
the last 30 days of storage lines, the meter being the usage type (CUR ``line_item_usage_type`` in
``SkuMeter``: ``EBS:VolumeUsage.io2``, ``EBS:VolumeP-IOPS.io2``, ``EBS:SnapshotUsage``,
``TimedStorage-GIR-ByteHrs`` …, region prefixes such as ``USE1-`` dropped) or, for Google Cloud, the SKU
description (``SSD backed PD Capacity``, ``Coldline Storage …``). A meter the bill does not carry is not
guessed: the finding is withheld as ``unpriced``.

**Scope**: a volume belongs to GPU work when the instance it is attached to now, or was last attached to, is
a GPU resource (its type carries GPUs in the shipped inventory, the catalogue or the bill); a snapshot when
its source volume does or its tags name a team; a bucket prefix when the configuration names it. The rest is
out of scope: counted, never examined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import duckdb

from gpufinops.kernel import providers, storage_facts
from gpufinops.kernel.storage_facts import (  # noqa: F401  (the models' names for the meters)
    AWS_STORAGE_METER,
    GCP_DISK_METER,
    GCP_SNAPSHOT_METER,
    GCS_CLASS_METER,
    S3_CLASS_METER,
)
from gpufinops.models.recommendation import Recommendation, stable_id

GP3_BASELINE_IOPS = 3000.0
GP3_BASELINE_MIBPS = 125.0
AWS_IOPS_METER = {"io1": "EBS:VolumeP-IOPS.piops", "io2": "EBS:VolumeP-IOPS.io2", "gp3": "EBS:VolumeP-IOPS.gp3"}
GP3_THROUGHPUT_METER = "EBS:VolumeP-Throughput.gp3"
SNAPSHOT_METER = storage_facts.AWS.snapshot_meter
GIB_PER_BYTE = Decimal(1) / Decimal(2**30)

RATES_SQL = """
WITH lines AS (
  SELECT lower(ProviderName) AS provider_name, RegionId AS region,
         COALESCE(NULLIF(SkuMeter, ''), ChargeDescription) AS meter, ResourceId AS resource_id,
         EffectiveCost AS cost, PricingQuantity AS quantity, ChargePeriodStart AS t
  FROM cost_line_items
  WHERE ChargeCategory = 'Usage' AND PricingQuantity > 0
    AND (COALESCE(SkuMeter, '') ~ '.*(EBS:|TimedStorage-| LRS Disk|Provisioned Capacity|Data Stored|LRS Snapshot).*'
         OR ChargeDescription ~ '.*(PD Capacity|PD Snapshot| Storage).*')
), recent AS (SELECT * FROM lines WHERE t >= (SELECT max(t) FROM lines) - INTERVAL 30 DAY)
SELECT provider_name, region, meter, sum(cost) AS cost, sum(quantity) AS quantity FROM recent GROUP BY ALL
"""
RESOURCE_COST_SQL = """
SELECT ResourceId, COALESCE(NULLIF(SkuMeter, ''), ChargeDescription) AS meter, sum(EffectiveCost) AS cost,
       sum(PricingQuantity) AS quantity, min(ChargePeriodStart) AS first, max(ChargePeriodEnd) AS last
FROM cost_line_items
WHERE ChargeCategory = 'Usage' AND ResourceId IN (SELECT snapshot_id FROM storage_snapshots)
  AND ChargePeriodStart >= (SELECT max(ChargePeriodStart) FROM cost_line_items) - INTERVAL 30 DAY
GROUP BY ALL
"""

# An Azure container is written 'account/container': its storage account's bill lines (ResourceId
# .../providers/Microsoft.Storage/storageAccounts/<account>) say where it is and in which region it is billed
ACCOUNT_SQL = """
SELECT b.bucket, any_value(c.ResourceId), any_value(c.RegionId)
FROM (SELECT DISTINCT bucket FROM storage_objects WHERE contains(bucket, '/')) b
JOIN cost_line_items c
  ON lower(rtrim(c.ResourceId, '/')) LIKE '%/providers/microsoft.storage/storageaccounts/' || lower(split_part(b.bucket, '/', 1))
GROUP BY 1
"""


def meter_key(provider: str, meter: str | None) -> str | None:
    """A bill line's meter as its provider's storage facts name it (kernel/storage_facts.py): AWS's usage type
    without its region prefix, a SKU description's or meter name's leading words; None: not a storage meter."""
    facts = storage_of(provider)
    return facts.meter_key(meter) if meter and facts else None


def storage_of(provider: str | None) -> storage_facts.StorageFacts | None:
    """The provider spec's storage facts (None: its storage is not examined)."""
    spec = providers.spec(provider)
    return spec.storage if spec else None


def _provider(name: str | None) -> str:
    from gpufinops.models.recommendation import provider_code

    return provider_code(name) or ""


@dataclass
class StorageInputs:
    """Everything the storage models read from the warehouse, as plain rows (picklable, no connection)."""

    now: datetime
    rates: dict[tuple[str, str, str], Decimal] = field(
        default_factory=dict
    )  # (provider, region, meter) -> $/unit-month
    gpu_types: set[str] = field(default_factory=set)
    instance_teams: dict[str, str] = field(default_factory=dict)  # GPU resource id -> its team on the bill
    volumes: list[dict[str, Any]] = field(default_factory=list)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)
    ops: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # volume id -> hourly rows
    reads: dict[tuple[str, str], float] = field(default_factory=dict)  # (bucket, prefix) -> GETs over the days
    read_days: dict[tuple[str, str], int] = field(default_factory=dict)
    snapshot_bills: dict[str, Decimal] = field(default_factory=dict)  # snapshot id -> its last 30 days' cost
    bucket_regions: dict[str, str] = field(default_factory=dict)  # bucket -> the region its bill lines name
    # an Azure 'account/container' -> the bill's resource id of its storage account (its subscription, group)
    bucket_accounts: dict[str, str] = field(default_factory=dict)

    def rate(self, provider: str, region: str | None, meter: str | None) -> Decimal | None:
        return self.rates.get((provider, region or "", meter or "")) if meter else None

    def is_gpu(self, instance_type: str | None) -> bool:
        return bool(instance_type) and instance_type in self.gpu_types


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _billed(con: duckdb.DuckDBPyConnection, column: str, resources: str) -> dict[str, Any]:
    """A cost-line column's value (any one) per resource the ``resources`` query lists, where the bill has one."""
    return dict(
        con.execute(
            f"SELECT ResourceId, any_value({column}) FROM cost_line_items WHERE {column} IS NOT NULL AND "
            f"ResourceId IN ({resources}) GROUP BY 1"
        ).fetchall()
    )


def _has(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]).fetchone()
    return bool(found and found[0])


def load(con: duckdb.DuckDBPyConnection, _settings: Any = None) -> StorageInputs:
    now = datetime.now(UTC)
    inputs = StorageInputs(now=now)
    if not _has(con, "storage_volumes"):
        return inputs
    observed = con.execute(
        "SELECT max(observed_at) FROM (SELECT observed_at FROM storage_volumes UNION ALL "
        "SELECT observed_at FROM storage_objects UNION ALL SELECT observed_at FROM storage_snapshots)"
    ).fetchone()
    inputs.now = (observed[0] if observed else None) or now
    for row in _rows(con, RATES_SQL):
        provider = _provider(row["provider_name"])
        key = meter_key(provider, row["meter"])
        if key and row["quantity"]:
            inputs.rates[(provider, row["region"] or "", key)] = Decimal(row["cost"]) / Decimal(row["quantity"])
    inputs.gpu_types = {
        r[0]
        for r in con.execute(
            "SELECT instance_type FROM gpu_instance_reference WHERE gpu_count > 0 OR accelerator_count > 0 "
            "UNION SELECT instance_type FROM instance_types WHERE gpu_count > 0 "
            "UNION SELECT x_InstanceType FROM cost_line_items WHERE x_GpuCount > 0"
        ).fetchall()
        if r[0]
    }
    inputs.instance_teams = _billed(con, "x_Team", "SELECT last_instance_id FROM storage_volumes")
    inputs.volumes = _rows(con, "SELECT * FROM storage_volumes ORDER BY volume_id")
    inputs.snapshots = _rows(con, "SELECT * FROM storage_snapshots ORDER BY snapshot_id")
    inputs.objects = _rows(con, "SELECT * FROM storage_objects ORDER BY bucket, prefix, run, checkpoint")
    for row in _rows(con, "SELECT * FROM storage_volume_ops_hourly ORDER BY volume_id, hour"):
        inputs.ops.setdefault(row["volume_id"], []).append(row)
    for row in _rows(
        con,
        "SELECT bucket, prefix, sum(get_requests) AS gets, count(*) AS days "
        "FROM storage_prefix_reads_daily GROUP BY ALL",
    ):
        inputs.reads[(row["bucket"], row["prefix"])] = float(row["gets"])
        inputs.read_days[(row["bucket"], row["prefix"])] = int(row["days"])
    for row in _rows(con, RESOURCE_COST_SQL):
        inputs.snapshot_bills[row["ResourceId"]] = inputs.snapshot_bills.get(row["ResourceId"], Decimal(0)) + Decimal(
            row["cost"] or 0
        )
    inputs.bucket_regions = _billed(con, "RegionId", "SELECT bucket FROM storage_objects")
    for bucket, resource_id, region in con.execute(ACCOUNT_SQL).fetchall():
        inputs.bucket_accounts[bucket] = resource_id
        inputs.bucket_regions.setdefault(bucket, region)
    return inputs


def finding(kind: str, provider: str, resource_id: str, team: str | None, **what: Any) -> Recommendation:
    """A storage finding on one volume or snapshot (no workload), its id from the kind, provider and
    resource; ``what``: its current, proposed, monthly_savings_usd, confidence, risk and evidence."""
    return Recommendation(
        id=stable_id(kind, provider, resource_id),
        kind=kind,
        team=team,
        provider=provider,
        resource_id=resource_id,
        workload=None,
        **what,
    )


def gpu_resource(inputs: StorageInputs, volume: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the GPU resource a volume is or was attached to, its type), or (None, None): not GPU work."""
    instance = volume.get("attached_instance_id") or volume.get("last_instance_id")
    kind = volume.get("last_instance_type")
    return (instance, kind) if instance and inputs.is_gpu(kind) else (None, None)


def volume_team(inputs: StorageInputs, volume: dict[str, Any]) -> str | None:
    instance = volume.get("attached_instance_id") or volume.get("last_instance_id")
    return volume.get("team") or inputs.instance_teams.get(instance or "")


def volume_monthly_cost(
    inputs: StorageInputs,
    v: dict[str, Any],
    volume_type: str | None = None,
    iops: float | None = None,
    mibps: float | None = None,
) -> tuple[Decimal | None, str]:
    """A volume's monthly cost at the bill's rates (its own shape, or ``volume_type``/``iops``/``mibps``);
    (None, the meter the bill lacks) when a rate is missing."""
    provider, region = v["provider"], v["region"]
    kind = volume_type or v["volume_type"]
    size = Decimal(str(v["size_gib"] or 0))
    iops = v.get("iops") if iops is None else iops
    mibps = v.get("throughput_mibps") if mibps is None else mibps
    facts = storage_of(provider)
    billed = facts.disk_meter(kind or "", float(size)) if facts else None
    rate = inputs.rate(provider, region, billed[0]) if billed else None
    if billed is None or rate is None:
        return None, billed[0] if billed else f"volume type {kind}"
    cost = rate * Decimal(str(billed[1]))
    extra_iops = Decimal(str(iops or 0)) - (Decimal(str(GP3_BASELINE_IOPS)) if kind == "gp3" else 0)
    if kind in AWS_IOPS_METER and extra_iops > 0:
        iops_rate = inputs.rate(provider, region, AWS_IOPS_METER[kind])
        if iops_rate is None:
            return None, AWS_IOPS_METER[kind]
        cost += iops_rate * extra_iops
    extra_mibps = Decimal(str(mibps or 0)) - Decimal(str(GP3_BASELINE_MIBPS))
    if kind == "gp3" and extra_mibps > 0:
        t_rate = inputs.rate(provider, region, GP3_THROUGHPUT_METER)
        if t_rate is None:
            return None, GP3_THROUGHPUT_METER
        cost += t_rate * extra_mibps
    return cost, ""


def scope_counts(inputs: StorageInputs) -> dict[str, int]:
    """How much of the inventory is GPU work (examined) and how much is out of scope (listed, not examined)."""
    volumes = sum(1 for v in inputs.volumes if gpu_resource(inputs, v)[0])
    gone = {v["volume_id"] for v in inputs.volumes}
    snapshots = sum(1 for s in inputs.snapshots if s.get("team") or s["volume_id"] in gone)
    return {
        "volumes_in_scope": volumes,
        "volumes_out_of_scope": len(inputs.volumes) - volumes,
        "snapshots_in_scope": snapshots,
        "snapshots_out_of_scope": len(inputs.snapshots) - snapshots,
        "prefixes": len({(o["bucket"], o["prefix"]) for o in inputs.objects}),
    }
