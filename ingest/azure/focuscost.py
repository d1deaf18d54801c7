"""What a Cost Management ``FocusCost`` export holds, per dataset version, and how its rows become FOCUS 1.2.

The export's ``manifest.json`` names the dataset version (``exportConfig.dataVersion``); the columns that find a
row's VM size differ by it: 1.0 and 1.0r2 carry ``x_SkuMeterName`` and ``x_SkuDetails`` (JSON text whose
``ServiceType`` is the size, ``Standard_ND96isr_H100_v5``); 1.2-preview renames ``x_SkuMeterName`` to
``SkuMeter`` (and ``x_InvoiceId``, ``x_PricingCurrency`` to ``InvoiceId``, ``PricingCurrency``); 1.2 drops
``x_SkuDetails``, leaving the meter ("ND96isr H100 v5", "NC24ads A100 v4 Spot") to name the size. Every
Microsoft ``x_`` column is kept in the row's ``x_ProviderColumns`` (JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.focus_values import SUBCATEGORIES


@dataclass(frozen=True)
class Layout:
    meter: str  # the column holding the meter's name
    details: str | None  # the column holding the SKU details JSON, or None (1.2)


LAYOUTS = {
    "1.0": Layout(meter="x_SkuMeterName", details="x_SkuDetails"),
    "1.0r2": Layout(meter="x_SkuMeterName", details="x_SkuDetails"),
    "1.2-preview": Layout(meter="SkuMeter", details="x_SkuDetails"),
    "1.2": Layout(meter="SkuMeter", details=None),
}
# 1.0 names of columns FOCUS 1.2 makes its own: read into the FOCUS column when the file has only the old name
RENAMED = {"InvoiceId": "x_InvoiceId", "PricingCurrency": "x_PricingCurrency", "SkuMeter": "x_SkuMeterName"}
# a meter's price-model suffix, not part of the size ("NC24ads A100 v4 Spot", "… Low Priority")
METER_SUFFIX = r"\s+(Spot|Low Priority)$"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def vm_size_sql(layout: Layout, columns: list[str]) -> str:
    """SQL: the row's VM size from its SKU details' ``ServiceType``, else from a Virtual Machines meter
    ("ND96isr H100 v5" -> ``Standard_ND96isr_H100_v5``; a meter naming two sizes, "D2 v3/D2s v3", names none)."""
    present = set(columns)
    found = []
    if layout.details and layout.details in present:
        details = f"CAST({_q(layout.details)} AS VARCHAR)"
        found.append(f"CASE WHEN json_valid({details}) THEN json_extract_string({details}, '$.ServiceType') END")
    if layout.meter in present and "x_SkuMeterCategory" in present:
        meter = f"trim(regexp_replace(CAST({_q(layout.meter)} AS VARCHAR), {sql_literal(METER_SUFFIX)}, ''))"
        found.append(
            f"CASE WHEN \"x_SkuMeterCategory\" = 'Virtual Machines' AND {meter} NOT LIKE '%/%' "
            f"THEN 'Standard_' || replace({meter}, ' ', '_') END"
        )
    return f"NULLIF(trim(COALESCE({', '.join(found)})), '')" if found else "CAST(NULL AS VARCHAR)"


def provider_columns_sql(columns: list[str]) -> str:
    """SQL: Microsoft's ``x_`` columns of the row as one JSON object (``x_ProviderColumns``)."""
    extensions = [c for c in columns if c.startswith("x_") and c not in ("x_InstanceType", "x_ProviderColumns")]
    if not extensions:
        return "CAST(NULL AS VARCHAR)"
    pairs = ", ".join(f"{sql_literal(c)}, CAST({_q(c)} AS VARCHAR)" for c in extensions)
    return f"CAST(json_object({pairs}) AS VARCHAR)"


def vmss_instance_sql(layout: Layout, columns: list[str]) -> str | None:
    """SQL: a scale-set instance's ResourceId, ``<scale set>/virtualmachines/<instance id>`` (lower-cased, as a
    Kubernetes providerID is compared): a row billed to the instance itself (FOCUS 1.2 writes its ARM id,
    ``…/virtualMachineScaleSets/<name>/virtualMachines/<n>``), or billed to a Virtual Machine Scale Set whose SKU
    details name the instance (``VMName`` ``<scale set name>_<instance id>``: AKS node pools, 1.0 to 1.2-preview);
    the row's own ResourceId otherwise (a scale-set row without SKU details keeps the scale set's id). None when
    the file has no ResourceId."""
    if "ResourceId" not in columns:
        return None
    rid = "rtrim(lower(CAST(\"ResourceId\" AS VARCHAR)), '/')"
    scale_sets = "/providers/microsoft\\.compute/virtualmachinescalesets/"
    cases = [f"WHEN regexp_matches({rid}, '{scale_sets}[^/]+/virtualmachines/[0-9]+$') THEN {rid}"]
    if layout.details and layout.details in columns:
        details = f"CAST({_q(layout.details)} AS VARCHAR)"
        vm = f"CASE WHEN json_valid({details}) THEN json_extract_string({details}, '$.VMName') END"
        scale_set = f"regexp_extract({rid}, '{scale_sets}([^/]+)$', 1)"
        instance = f"regexp_extract(lower({vm}), '^(.+)_([0-9]+)$', ['set', 'id'])"
        cases.append(
            f"WHEN {scale_set} <> '' AND {instance}.set = {scale_set} THEN {rid} || '/virtualmachines/' || {instance}.id"
        )
    return f'CASE {" ".join(cases)} ELSE "ResourceId" END'


def subcategory_sql() -> str:
    """SQL: a 1.0 / 1.0r2 row's ServiceSubcategory (those versions have none): its ServiceName where that name is
    one of FOCUS 1.2's subcategories of the row's ServiceCategory ("Virtual Machines" under Compute, as the 1.2
    exports name it), else the spec's catch-all ``Other (<category>)``; so a ServiceName keeps one subcategory in
    a warehouse holding runs of both versions (ServiceName-C-008-C)."""
    pairs = " ".join(
        f"WHEN {sql_literal(category)} THEN list_contains([{', '.join(sql_literal(n) for n in names)}], name)"
        for category, names in SUBCATEGORIES.items()
    )
    category = 'CAST("ServiceCategory" AS VARCHAR)'
    return (
        f"(SELECT CASE WHEN (CASE {category} {pairs} ELSE false END) THEN name "
        f"ELSE 'Other (' || {category} || ')' END FROM (SELECT CAST(\"ServiceName\" AS VARCHAR) AS name))"
    )


def relation(source_relation: str, layout: Layout, columns: list[str]) -> tuple[str, list[str]]:
    """(the file's rows with the FOCUS 1.2 names, the VM size as ``x_InstanceType`` and the ``x_`` columns as
    ``x_ProviderColumns``, the columns that relation has)."""
    present = set(columns)
    added = {new: f"{_q(old)} AS {_q(new)}" for new, old in RENAMED.items() if new not in present and old in present}
    if "ServiceSubcategory" not in present and {"ServiceName", "ServiceCategory"} <= present:
        added["ServiceSubcategory"] = f'{subcategory_sql()} AS "ServiceSubcategory"'
    extra = [
        *added.values(),
        f"{vm_size_sql(layout, columns)} AS x_InstanceType",
        f"{provider_columns_sql(columns)} AS x_ProviderColumns",
    ]
    dropped = [c for c in ("x_InstanceType", "x_ProviderColumns") if c in present]
    star = f"* EXCLUDE ({', '.join(_q(c) for c in dropped)})" if dropped else "*"
    instance = vmss_instance_sql(layout, columns)
    star += f' REPLACE ({instance} AS "ResourceId")' if instance else ""
    sql = f"(SELECT {star}, {', '.join(extra)} FROM {source_relation})"
    return sql, [c for c in columns if c not in dropped] + [*added, "x_InstanceType", "x_ProviderColumns"]


# A VM's usage line of a day is spread into its 24 hours, the grain every model reads (Cost Management exports
# are daily); each hour takes a 24th truncated to the column's 15 decimals, the last hour the rest, so the day
# sums to the cent exactly as billed. Unit prices and every other column stay as billed.
SPREAD = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "PricingQuantity", "ConsumedQuantity")
_DAILY_VM = (
    "(d.\"ChargeCategory\" = 'Usage' AND d.x_InstanceType IS NOT NULL "
    'AND d."ChargePeriodEnd" - d."ChargePeriodStart" = INTERVAL 1 DAY)'
)


def _hour_share(column: str) -> str:
    scaled = f'CAST(CAST(d."{column}" AS DECIMAL(38,15)) * 1000000000000000 AS HUGEINT)'
    return f"CAST({scaled} // 24 AS DECIMAL(38,0)) * CAST('0.000000000000001' AS DECIMAL(38,15))"


def hourly_sql(rows: str) -> str:
    """SQL: ``rows`` with each daily VM usage line spread into 24 hourly lines (``SPREAD``'s columns split)."""
    spread = [
        f'CASE WHEN NOT {_DAILY_VM} OR d."{c}" IS NULL THEN d."{c}" WHEN h.i < 23 THEN {_hour_share(c)} '
        f'ELSE d."{c}" - 23 * {_hour_share(c)} END AS "{c}"'
        for c in SPREAD
    ]
    return (
        f'SELECT d.* REPLACE (d."ChargePeriodStart" + to_hours(h.i) AS "ChargePeriodStart", '
        f'CASE WHEN {_DAILY_VM} THEN d."ChargePeriodStart" + to_hours(h.i + 1) ELSE d."ChargePeriodEnd" END '
        f'AS "ChargePeriodEnd", {", ".join(spread)}) '
        f"FROM ({rows}) d, LATERAL (SELECT unnest(CASE WHEN {_DAILY_VM} THEN range(24) ELSE [0] END) AS i) h"
    )
