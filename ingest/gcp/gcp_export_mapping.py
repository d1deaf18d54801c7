"""GCP billing export → FOCUS 1.2, as SQL over the export's own (nested) columns.

Two steps, both plain SQL so the same text can later be pushed down (issue 10: BigQuery runs the
row mapping and only rollups come home):

1. :func:`conform_select` turns any relation holding export rows — a BigQuery result as Arrow, an
   exported Parquet or JSONL file, the flattened CSV built by :mod:`ingest.gcp.gcp_export_files` — into
   the *canonical* export shape (:data:`CANONICAL`): the standard/detailed export's column names and
   nesting (``service.description``, ``credits[].amount``, ``project.labels[]``…), money as exact
   ``DECIMAL(38,15)``, times as UTC ``TIMESTAMPTZ``. Missing columns (``resource`` and ``price`` exist
   only in the detailed export, ``cost_at_list`` only since 2023) become NULL.
2. :func:`focus_select` maps canonical rows to the ``cost_line_items`` columns: ``BilledCost = cost``,
   ``EffectiveCost = cost + Σ credits[].amount``, ``ListCost = cost_at_list``, ``ResourceId =
   resource.name``, labels / project labels / system labels → ``Tags`` and ``x_Team``, GPU SKUs
   recognised from ``sku.description`` (the Cloud Billing Catalog's wording, as listed in
   Cyclenerd's ``sku_mapping.csv``) → ``x_GpuModel``, spot/preemptible → ``Dynamic``, commitments →
   ``Committed``, the machine type from the ``compute.googleapis.com/machine_spec`` system label.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa

from gpufinops.ingest.aws.cur_mapping import DOUBLE_TO_DECIMAL
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.focus_values import cost_line_items_select, service_sql, subcategory_of, unit_sql
from gpufinops.ingest.gcp.gcp_machines import GPU_MACHINE_TYPES

KV = "STRUCT(key VARCHAR, value VARCHAR)[]"
MONEY = "DECIMAL(38,15)"
# The canonical export row: column -> leaf kind (s string, t timestamp, m exact decimal, f double,
# kv key/value list) or a dict for a STRUCT, or ("list", {...}) for a repeated RECORD.
CANONICAL: dict = {
    "billing_account_id": "s",
    "service": {"id": "s", "description": "s"},
    "sku": {"id": "s", "description": "s"},
    "usage_start_time": "t",
    "usage_end_time": "t",
    "project": {"id": "s", "number": "s", "name": "s", "labels": "kv", "ancestry_numbers": "s"},
    "labels": "kv",
    "system_labels": "kv",
    "location": {"location": "s", "country": "s", "region": "s", "zone": "s"},
    "resource": {"name": "s", "global_name": "s"},
    "export_time": "t",
    "cost": "m",
    "currency": "s",
    "currency_conversion_rate": "f",
    "usage": {"amount": "m", "unit": "s", "amount_in_pricing_units": "m", "pricing_unit": "s"},
    "credits": ("list", {"name": "s", "amount": "m", "full_name": "s", "id": "s", "type": "s"}),
    "invoice": {"month": "s"},
    "cost_type": "s",
    "cost_at_list": "m",
    "transaction_type": "s",
    "seller_name": "s",
    "price": {"effective_price": "m", "tier_start_amount": "m", "unit": "s", "pricing_unit_quantity": "m"},
}
_LEAF_TYPES = {"s": "VARCHAR", "t": "TIMESTAMPTZ", "m": MONEY, "f": "DOUBLE", "kv": KV}

# sku.description → GPU model (canonical names of warehouse/gpu_models.py). Longest first: the
# Catalog's GPU SKUs read "[Commitment v1: ]Nvidia [Tesla ]<model> GPU running in …",
# "… GPU attached to Spot Preemptible VMs running in …" (tests/data/gcp-pricing-cyclenerd/sku_mapping.csv);
# Google bills the G4 series' RTX PRO 6000 as "RTX 6000 96GB …".
GPU_SKU_MODELS = (
    ("a100 80gb", "A100-80GB"),
    ("a100", "A100-40GB"),
    ("h100 80gb mega", "H100-SXM"),
    ("h100 80gb", "H100-SXM"),
    ("h100", "H100-SXM"),
    ("h200", "H200"),
    ("b200", "B200"),
    ("l4", "L4"),
    ("t4", "T4"),
    ("v100", "V100-16GB"),
    ("p100", "P100"),
    ("p4", "P4"),
    ("k80", "K80"),
    ("rtx 6000", "RTX-PRO-6000"),
)
GPU_SKU_PATTERN = (
    r"^(?:commitment v1: )?(?:nvidia )?(?:tesla )?("
    + "|".join(k for k, _ in GPU_SKU_MODELS)
    + r")(?: \d+gb)?(?: mega)?(?: gpu)? (?:running|attached|in|for)\b"
)
SPOT_PATTERN = r"(?i)\b(spot|preemptible)\b"
COMMITMENT_PATTERN = r"(?i)^commitment\b"
MACHINE_SPEC_LABEL = "compute.googleapis.com/machine_spec"

# service.description -> (FOCUS ServiceCategory, ServiceSubcategory): one per ServiceName, as FOCUS 1.2
# requires, so Compute Engine's disk and image SKUs are Compute / Virtual Machines like its VMs.
SERVICES: dict[str, tuple[str, str]] = {
    "Compute Engine": subcategory_of("Compute", "Virtual Machines"),
    "Kubernetes Engine": subcategory_of("Compute", "Containers"),
    "Cloud Run": subcategory_of("Compute", "Serverless Compute"),
    "Cloud Functions": subcategory_of("Compute", "Serverless Compute"),
    "App Engine": subcategory_of("Web", "Application Platforms"),
    "Artifact Registry": subcategory_of("Developer Tools", "Developer Platforms"),
    "Cloud Storage": subcategory_of("Storage", "Object Storage"),
    "Filestore": subcategory_of("Storage", "File Storage"),
    "BigQuery": subcategory_of("Databases", "Data Warehouses"),
    "BigQuery Reservation API": subcategory_of("Databases", "Data Warehouses"),
    "Cloud Dataflow": subcategory_of("Analytics", "Data Processing"),
    "Cloud Pub/Sub": subcategory_of("Integration", "Messaging"),
    "Networking": subcategory_of("Networking", "Network Connectivity"),
    "Cloud DNS": subcategory_of("Networking", "Network Routing"),
    "Cloud CDN": subcategory_of("Networking", "Content Delivery"),
    "Cloud SQL": subcategory_of("Databases", "Relational Databases"),
    "Cloud Spanner": subcategory_of("Databases", "Relational Databases"),
    "Vertex AI": subcategory_of("AI and Machine Learning", "AI Platforms"),
    "Cloud Logging": subcategory_of("Management and Governance", "Observability"),
    "Cloud Monitoring": subcategory_of("Management and Governance", "Observability"),
    "Stackdriver Logging": subcategory_of("Management and Governance", "Observability"),
    "Stackdriver Monitoring": subcategory_of("Management and Governance", "Observability"),
    "Support": subcategory_of("Management and Governance", "Support"),
    "Security Command Center": subcategory_of("Security", "Security Posture Management"),
    "Secret Manager": subcategory_of("Security", "Secret Management"),
    "Cloud Key Management Service (KMS)": subcategory_of("Security", "Secret Management"),
}
# cost_type -> ChargeCategory (focus_converters' conversion_rules_gcp.csv)
CHARGE_CATEGORY = {
    "regular": "Usage",
    "tax": "Tax",
    "adjustment": "Adjustment",
    "credit": "Adjustment",
    "rounding_error": "Adjustment",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def canonical_type(kind) -> str:
    """The DuckDB type of one canonical column."""
    if isinstance(kind, str):
        return _LEAF_TYPES[kind]
    if isinstance(kind, tuple):
        return canonical_type(kind[1]) + "[]"
    return "STRUCT(" + ", ".join(f"{_quote(k)} {canonical_type(v)}" for k, v in kind.items()) + ")"


def _null(kind) -> str:
    return f"CAST(NULL AS {canonical_type(kind)})"


def _leaf(expr: str, kind: str, source: pa.DataType, tolerant: bool = False) -> str:
    cast = "TRY_CAST" if tolerant else "CAST"  # tolerant: a bad value is NULL (on_invalid = "skip_rows" rejects it)
    if kind == "m":
        if pa.types.is_floating(source):
            converted = DOUBLE_TO_DECIMAL.format(x=expr)
            return f"CASE WHEN isfinite({expr}) THEN {converted} END" if tolerant else converted
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            return f"{cast}(NULLIF(trim({expr}), '') AS {MONEY})"
        return f"CAST({expr} AS {MONEY})"
    if kind == "s":
        return f"NULLIF(CAST({expr} AS VARCHAR), '')"
    if kind == "kv":
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)) or not pa.types.is_struct(
            source.value_type
        ):
            return _null(kind)
        names = {source.value_type.field(i).name for i in range(source.value_type.num_fields)}
        if not {"key", "value"} <= names:
            return _null(kind)
        if source.value_type == pa.struct([("key", pa.string()), ("value", pa.string())]):
            return expr  # already the canonical shape: a lambda per row costs a third of the conform step
        return f"list_transform({expr}, lambda e: {{'key': CAST(e.key AS VARCHAR), 'value': CAST(e.value AS VARCHAR)}})"
    if kind == "t" and (pa.types.is_string(source) or pa.types.is_large_string(source)):
        # BigQuery writes TIMESTAMP to JSON/CSV as "2022-08-01 03:00:00 UTC"
        return f"{cast}(regexp_replace(NULLIF(trim({expr}), ''), ' UTC$', '+00:00') AS TIMESTAMPTZ)"
    if kind == "t" and pa.types.is_timestamp(source) and source.tz is None:
        return f"timezone('UTC', {expr})"  # a naive export timestamp is UTC (BigQuery TIMESTAMP is)
    return f"CAST({expr} AS {_LEAF_TYPES[kind]})"


def _conform(expr: str, kind, source: pa.DataType | None, tolerant: bool = False) -> str:
    if source is None or pa.types.is_null(source):
        return _null(kind)
    if isinstance(kind, str):
        return _leaf(expr, kind, source, tolerant)
    if isinstance(kind, tuple):
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            return _null(kind)
        inner = _conform("e", kind[1], source.value_type, tolerant)
        return f"list_transform({expr}, lambda e: {inner})"
    if not pa.types.is_struct(source):
        return _null(kind)
    fields = {source.field(i).name: source.field(i).type for i in range(source.num_fields)}
    parts = ", ".join(
        f"{_quote(k)} := {_conform(f'{expr}.{_quote(k)}', v, fields.get(k), tolerant)}" for k, v in kind.items()
    )
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE struct_pack({parts}) END"


def conform_select(relation: str, source_schema: pa.Schema, carry: tuple[str, ...] = (), tolerant: bool = False) -> str:
    """SELECT over ``relation`` giving exactly the canonical export columns (see the module doc), and
    the ``carry`` columns unchanged; ``tolerant``: a value that does not parse is NULL."""
    present = {f.name: f.type for f in source_schema}
    items = [
        f"CAST({_conform(_quote(name), kind, present.get(name), tolerant)} AS {canonical_type(kind)}) AS {_quote(name)}"
        for name, kind in CANONICAL.items()
    ]
    items += [_quote(c) for c in carry]
    return f"SELECT {', '.join(items)} FROM {relation}"


def _case(expr: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {sql_literal(v)}" for k, v in mapping.items())
    return f"CASE {expr} {whens} ELSE {default} END"


@functools.lru_cache(maxsize=1)
def gpu_machine_types() -> dict[str, tuple[str, int]]:
    """Every Compute Engine machine type with GPUs built in: the shipped inventory's GCP rows
    (warehouse/data/gpu_instance_types.csv: a2, a3, a4, g2, g4, …), with the shapes the catalogue prices
    (GPU_MACHINE_TYPES) on top. N1 attaches GPUs to any shape, so the bill's n1 machine type says nothing
    about them (their GPU SKU lines carry the GPU model)."""
    from gpufinops.warehouse.reference import N1_PREFIX, load_gpu_instance_types

    rows = load_gpu_instance_types().to_pylist()
    found = {
        r["instance_type"]: (r["gpu_model"], r["gpu_count"])
        for r in rows
        if r["provider"] == "gcp" and r["accelerator"] == "gpu" and not r["instance_type"].startswith(N1_PREFIX)
    }
    return {**found, **GPU_MACHINE_TYPES}


def machine_type_values() -> str:
    """gpu_machine_types() as a SQL VALUES list (machine_type, gpu_model, gpu_count): a literal, so the
    same mapping runs in DuckDB and, transpiled, in BigQuery."""
    return ", ".join(f"({sql_literal(t)}, {sql_literal(m)}, {n})" for t, (m, n) in sorted(gpu_machine_types().items()))


def focus_select(
    canonical: str, tag_keys: tuple[str, ...], only: tuple[str, ...] | None = None, carry: tuple[str, ...] = ()
) -> str:
    """SELECT over canonical export rows producing the cost_line_items columns (without x_Source / x_IngestRunId).

    Tags: the row's labels win over its project's labels; system labels keep their own
    ``goog-``/``compute.googleapis.com/`` keys. ``x_Team`` is the first of ``tag_keys`` found in Tags.
    ``only`` restricts the output to those columns: the BigQuery push-down (:mod:`ingest.gcp.gcp_pushdown`)
    runs this same text, transpiled, for the rollup's columns, and must not carry expressions (the
    ``Tags`` JSON of a MAP) that BigQuery need not — and can not — evaluate.
    """
    credits = "COALESCE(list_sum(list_transform(credits, lambda c: COALESCE(c.amount, 0))), 0)"
    own_keys = "list_transform(COALESCE(labels, []), lambda l: l.key)"
    tags = (
        "map_from_entries(list_concat(COALESCE(system_labels, []), "
        f"list_filter(COALESCE(project.labels, []), lambda p: NOT list_contains({own_keys}, p.key)), "
        "COALESCE(labels, [])))"
    )
    gpu_key = f"lower(regexp_extract(sku.description, {sql_literal('(?i)' + GPU_SKU_PATTERN)}, 1))"
    inner = (
        f"SELECT *, NULLIF(map_extract_value(tags_map, {sql_literal(MACHINE_SPEC_LABEL)}), '') AS machine_type "
        f"FROM (SELECT *, {tags} AS tags_map, {credits} AS credits_total, {gpu_key} AS gpu_key FROM ({canonical}))"
    )
    spot = f"regexp_matches(sku.description, {sql_literal(SPOT_PATTERN)})"
    commitment = f"regexp_matches(sku.description, {sql_literal(COMMITMENT_PATTERN)})"
    regular = "COALESCE(cost_type, 'regular') = 'regular'"
    pricing_category = (
        f"CASE WHEN NOT {regular} THEN NULL WHEN {commitment} THEN 'Committed' "
        f"WHEN {spot} THEN 'Dynamic' ELSE 'Standard' END"
    )
    month_start = "strptime(invoice.month || '01', '%Y%m%d')"
    team = ", ".join(f"map_extract_value(tags_map, {sql_literal(k)})" for k in tag_keys) or "NULL"
    gpu_model = f"COALESCE({_case('gpu_key', dict(GPU_SKU_MODELS), 'NULL')}, mt.gpu_model)"
    outputs = {
        "AvailabilityZone": "location.zone",
        "BilledCost": "cost",
        "BillingAccountId": "billing_account_id",
        "BillingCurrency": "currency",
        "BillingPeriodStart": f"timezone('UTC', {month_start})",
        "BillingPeriodEnd": f"timezone('UTC', {month_start} + INTERVAL 1 MONTH)",
        "ChargeCategory": _case("COALESCE(cost_type, 'regular')", CHARGE_CATEGORY, "'Usage'"),
        "ChargeClass": "CASE WHEN cost_type IN ('adjustment', 'rounding_error') THEN 'Correction' END",
        "ChargeDescription": "sku.description",
        "ChargeFrequency": f"CASE WHEN {regular} THEN 'Usage-Based' ELSE 'One-Time' END",
        "ChargePeriodStart": "usage_start_time",
        "ChargePeriodEnd": "usage_end_time",
        "CommitmentDiscountCategory": f"CASE WHEN {regular} AND {commitment} THEN 'Usage' END",
        "CommitmentDiscountType": f"CASE WHEN {regular} AND {commitment} THEN 'Committed Use Discount' END",
        "ConsumedQuantity": f"CASE WHEN {regular} THEN usage.amount_in_pricing_units END",
        "ConsumedUnit": f"CASE WHEN {regular} THEN {unit_sql('usage.pricing_unit')} END",
        "ContractedCost": "cost",
        "ContractedUnitPrice": "price.effective_price",
        "EffectiveCost": "cost + credits_total",
        "InvoiceId": "invoice.month",
        # Google invoices Marketplace purchases too: the seller is their publisher, not the issuer
        "InvoiceIssuerName": "'Google Cloud'",
        "ListCost": "COALESCE(cost_at_list, cost)",
        # the export has no list rate column: list cost over the quantity in pricing units
        "ListUnitPrice": (
            f"CASE WHEN {regular} AND usage.amount_in_pricing_units > 0 AND cost_at_list IS NOT NULL THEN "
            + DOUBLE_TO_DECIMAL.format(x="CAST(cost_at_list AS DOUBLE) / CAST(usage.amount_in_pricing_units AS DOUBLE)")
            + " END"
        ),
        "PricingCategory": pricing_category,
        "PricingCurrency": "currency",
        "PricingQuantity": "CASE WHEN COALESCE(cost_type, 'regular') <> 'tax' THEN usage.amount_in_pricing_units END",
        "PricingUnit": f"CASE WHEN COALESCE(cost_type, 'regular') <> 'tax' THEN {unit_sql('usage.pricing_unit')} END",
        "ProviderName": "'Google Cloud'",
        "PublisherName": "COALESCE(seller_name, 'Google Cloud')",
        "RegionId": "COALESCE(location.region, location.location)",
        "RegionName": "location.location",
        "ResourceId": "resource.name",
        "ResourceName": "resource.name",
        "ServiceCategory": service_sql("service.description", SERVICES, 0),
        "ServiceName": "service.description",
        "ServiceSubcategory": service_sql("service.description", SERVICES, 1),
        "SkuId": "sku.id",
        "SkuPriceId": "sku.id",
        "SubAccountId": "project.id",
        "SubAccountName": "project.name",
        "Tags": "CASE WHEN cardinality(tags_map) > 0 THEN to_json(tags_map) END",
        "x_InstanceType": "machine_type",
        "x_GpuModel": gpu_model,
        "x_GpuCount": "mt.gpu_count",
        "x_Team": f"COALESCE({team})",
    }
    items = cost_line_items_select(outputs, only)
    items += [f"r.{_quote(c)}" for c in carry]
    return (
        f"SELECT {', '.join(items)} FROM ({inner}) r LEFT JOIN (VALUES {machine_type_values()}) "
        f"mt(machine_type_name, gpu_model, gpu_count) ON mt.machine_type_name = r.machine_type"
    )


# FOCUS column -> the export column it is read from, for validation messages (ingest/core/validate.py)
ORIGIN = {
    "BilledCost": "cost",
    "EffectiveCost": "cost",
    "ListCost": "cost_at_list",
    "ChargeCategory": "cost_type",
    "ChargePeriodStart": "usage_start_time",
    "ChargePeriodEnd": "usage_end_time",
    "BillingPeriodStart": "invoice.month",
    "BillingPeriodEnd": "invoice.month",
    "BillingAccountId": "billing_account_id",
    "BillingCurrency": "currency",
    "ServiceName": "service.description",
}


# How a leaf the conform step parses is read, by (kind, held as text); what makes a list element bad.
_PARSED = {("t", True): ("regexp_replace(trim({v}), ' UTC$', '+00:00')", "time"), ("m", True): ("trim({v})", "number")}
_BAD_ELEMENT = {
    "time": "TRY_CAST({x} AS TIMESTAMPTZ) IS NULL",
    "number": f"TRY_CAST({{x}} AS {MONEY}) IS NULL",
    "finite": "NOT isfinite({x})",
}
Leaf = tuple[str, str, str, pa.DataType, str | None]  # (SQL, label, kind, arrow type, list element field)


def _leaf_cast(leaf: Leaf) -> tuple[str, str, str] | None:
    """(SQL over the raw rows, label, what it must be) of one leaf, or None when it is not parsed."""
    expr, label, kind, source, element = leaf
    text = pa.types.is_string(source) or pa.types.is_large_string(source)
    floating = kind == "m" and not text and pa.types.is_floating(source)
    parsed = ("{v}", "finite") if floating else _PARSED.get((kind, text))
    if parsed is None:
        return None
    value, what = parsed
    if element is None:
        return value.format(v=expr), label, what
    bad = _BAD_ELEMENT[what].format(x=value.format(v=f"c.{element}"))
    return f"list_filter({expr}, lambda c: c.{element} IS NOT NULL AND {bad})[1].{element}", label, what


def _leaves(field: pa.Field) -> Iterator[Leaf]:
    """The money and time leaves of one export column: itself, a struct's fields, or a list of structs' fields."""
    kind = CANONICAL.get(field.name)
    if isinstance(kind, str):
        yield _quote(field.name), field.name, kind, field.type, None
    elif isinstance(kind, dict) and pa.types.is_struct(field.type):
        for sub in (field.type.field(i) for i in range(field.type.num_fields)):
            if isinstance(kind.get(sub.name), str):
                expr = f"{_quote(field.name)}.{_quote(sub.name)}"
                yield expr, f"{field.name}.{sub.name}", kind[sub.name], sub.type, None
    elif isinstance(kind, tuple) and pa.types.is_list(field.type) and pa.types.is_struct(field.type.value_type):
        struct = field.type.value_type
        for sub in (struct.field(i) for i in range(struct.num_fields)):
            if isinstance(kind[1].get(sub.name), str):
                yield _quote(field.name), f"{field.name}[].{sub.name}", kind[1][sub.name], sub.type, sub.name


def casts(source_schema: pa.Schema) -> list[tuple[str, str, str]]:
    """(SQL over the raw rows, column label, kind) for each money or time leaf the conform step parses:
    text that must be a number or a time, a double that must be finite (credits[].amount included)."""
    found = (_leaf_cast(leaf) for field in source_schema for leaf in _leaves(field))
    return [cast for cast in found if cast is not None]
