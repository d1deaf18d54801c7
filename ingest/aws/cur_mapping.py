"""AWS Cost and Usage Report → FOCUS 1.2: column dialects and the mapping, as DuckDB SQL.

Three header dialects name the same CUR columns: legacy CUR CSV (``lineItem/UnblendedCost``,
``resourceTags/user:team``), Athena / Parquet legacy CUR (``line_item_unblended_cost``,
``resource_tags_user_team``) and CUR 2.0 (``line_item_unblended_cost`` with ``product`` and
``resource_tags`` MAP columns and ``split_line_item_*``). :func:`canonical_columns` maps every header
onto the CUR 2.0 names; :func:`cur_select` builds one SELECT producing every ``cost_line_items``
column, following the FinOps Foundation's conversion rules (focus_converters
``conversion_rules_aws-cur.csv``): ChargeCategory per line item type, BilledCost = unblended cost,
EffectiveCost amortised over Savings Plans and Reserved Instances, spot usage ``Dynamic``.
"""

from __future__ import annotations

import re

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.focus_values import plain_name_sql, service_sql, subcategory_of, unit_sql
from gpufinops.ingest.core.registry import IngestError
from gpufinops.warehouse import column_types, cost_schema

# canonical CUR 2.0 name -> kind ("s" text, "m" decimal, "t" timestamp)
FIELDS: dict[str, str] = {
    **{name: "s" for name in (
        "bill_payer_account_id", "bill_payer_account_name", "bill_invoice_id", "bill_invoicing_entity",
        "line_item_usage_account_id", "line_item_usage_account_name", "line_item_line_item_type",
        "line_item_product_code", "line_item_usage_type", "line_item_operation", "line_item_availability_zone",
        "line_item_resource_id", "line_item_currency_code", "line_item_line_item_description",
        "line_item_legal_entity", "pricing_unit", "pricing_term", "pricing_rate_code", "pricing_rate_id",
        "pricing_purchase_option", "product_sku", "savings_plan_savings_plan_a_r_n",
        "reservation_reservation_a_r_n", "split_line_item_parent_resource_id")},
    **{name: "m" for name in (
        "line_item_unblended_cost", "line_item_unblended_rate", "line_item_usage_amount",
        "pricing_public_on_demand_cost", "pricing_public_on_demand_rate",
        "savings_plan_savings_plan_effective_cost", "savings_plan_total_commitment_to_date",
        "savings_plan_used_commitment", "reservation_effective_cost",
        "reservation_unused_amortized_upfront_fee_for_billing_period", "reservation_unused_recurring_fee",
        "split_line_item_split_cost", "split_line_item_unused_cost")},
    **{name: "t" for name in (
        "bill_billing_period_start_date", "bill_billing_period_end_date",
        "line_item_usage_start_date", "line_item_usage_end_date")},
}
# product attributes: top-level column product_<key> (legacy, CUR 2.0 for a few) or product[<key>] (CUR 2.0)
PRODUCT_ATTRIBUTES = {
    "instance_type": ("instance_type",), "region": ("region_code", "region"), "location": ("location",),
    "name": ("product_name", "servicename"), "gpu": ("gpu",),
}
REQUIRED = ("line_item_line_item_type", "line_item_unblended_cost", "line_item_usage_start_date",
            "bill_billing_period_start_date", "bill_payer_account_id")
ALIASES = {"savings_plan_savings_plan_arn": "savings_plan_savings_plan_a_r_n",
           "reservation_reservation_arn": "reservation_reservation_a_r_n"}
LEGACY_TAG_PREFIX = "resourceTags/"
ATHENA_TAG_PREFIX = "resource_tags_"

# lineItem/LineItemType -> FOCUS ChargeCategory (conversion_rules_aws-cur.csv), ChargeFrequency
CHARGE_CATEGORY = {
    "Tax": "Tax", "Fee": "Purchase", "SavingsPlanUpfrontFee": "Purchase", "RIFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase", "Usage": "Usage", "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage", "DiscountedUsage": "Usage", "BundledDiscount": "Usage", "Discount": "Usage",
    "PrivateRateDiscount": "Usage", "EdpDiscount": "Usage", "Credit": "Credit", "Refund": "Adjustment",
}
CHARGE_FREQUENCY = {"Fee": "One-Time", "SavingsPlanUpfrontFee": "One-Time", "Refund": "One-Time",
                    "Credit": "One-Time", "RIFee": "Recurring", "SavingsPlanRecurringFee": "Recurring",
                    "Tax": "Recurring"}
# AWS services -> (FOCUS ServiceCategory, ServiceSubcategory), by product code and by product name
# (ServiceName is the product name, else the code): one category and subcategory per ServiceName, as
# FOCUS 1.2 requires, so EBS volumes and snapshots, billed under "Amazon Elastic Compute Cloud", are
# Compute / Virtual Machines like the instances (AWS's own FOCUS export splits EC2 into Compute and
# Storage: tests/data/focus-sample).
AWS_SERVICES: dict[tuple[str, str], tuple[str, str]] = {
    ("AmazonEC2", "Amazon Elastic Compute Cloud"): subcategory_of("Compute", "Virtual Machines"),
    ("AmazonECS", "Amazon Elastic Container Service"): subcategory_of("Compute", "Containers"),
    ("AmazonEKS", "Amazon Elastic Container Service for Kubernetes"): subcategory_of("Compute", "Containers"),
    ("AmazonECR", "Amazon EC2 Container Registry (ECR)"): subcategory_of("Compute", "Containers"),
    ("AWSLambda", "AWS Lambda"): subcategory_of("Compute", "Serverless Compute"),
    ("AmazonSageMaker", "Amazon SageMaker"): subcategory_of("AI and Machine Learning", "Machine Learning"),
    ("AmazonBedrock", "Amazon Bedrock"): subcategory_of("AI and Machine Learning", "Generative AI"),
    ("AmazonS3", "Amazon Simple Storage Service"): subcategory_of("Storage", "Object Storage"),
    ("AmazonEFS", "Amazon Elastic File System"): subcategory_of("Storage", "File Storage"),
    ("AmazonFSx", "Amazon FSx"): subcategory_of("Storage", "File Storage"),
    ("AWSBackup", "AWS Backup"): subcategory_of("Storage", "Backup Storage"),
    ("AmazonRDS", "Amazon Relational Database Service"): subcategory_of("Databases", "Relational Databases"),
    ("AmazonDynamoDB", "Amazon DynamoDB"): subcategory_of("Databases", "NoSQL Databases"),
    ("AmazonElastiCache", "Amazon ElastiCache"): subcategory_of("Databases", "Caching"),
    ("AWSDataTransfer", "AWS Data Transfer"): subcategory_of("Networking", "Network Connectivity"),
    ("AmazonVPC", "Amazon Virtual Private Cloud"): subcategory_of("Networking", "Network Infrastructure"),
    ("AmazonCloudFront", "Amazon CloudFront"): subcategory_of("Networking", "Content Delivery"),
    ("AmazonRoute53", "Amazon Route 53"): subcategory_of("Networking", "Network Routing"),
    ("AWSELB", "Elastic Load Balancing"): subcategory_of("Networking", "Application Networking"),
    ("AmazonCloudWatch", "AmazonCloudWatch"): subcategory_of("Management and Governance", "Observability"),
    ("AWSCloudTrail", "AWS CloudTrail"): subcategory_of("Management and Governance", "Compliance"),
    ("AWSConfig", "AWS Config"): subcategory_of("Management and Governance", "Compliance"),
    ("AWSSupportBusiness", "AWS Support (Business)"): subcategory_of("Management and Governance", "Support"),
    ("AWSSupportEnterprise", "AWS Support (Enterprise)"): subcategory_of("Management and Governance", "Support"),
    ("AWSCostExplorer", "AWS Cost Explorer"): subcategory_of("Management and Governance", "Cost Management"),
    ("AmazonAthena", "Amazon Athena"): subcategory_of("Analytics", "Data Processing"),
    ("AmazonKinesis", "Amazon Kinesis"): subcategory_of("Analytics", "Streaming Analytics"),
    ("AWSGlue", "AWS Glue"): subcategory_of("Analytics", "Data Processing"),
    ("AmazonSNS", "Amazon Simple Notification Service"): subcategory_of("Integration", "Messaging"),
    ("AWSQueueService", "Amazon Simple Queue Service"): subcategory_of("Integration", "Messaging"),
    ("awskms", "AWS Key Management Service"): subcategory_of("Security", "Secret Management"),
    ("AWSSecretsManager", "AWS Secrets Manager"): subcategory_of("Security", "Secret Management"),
}
SERVICES_BY_NAME = {name: pair for (code, name), pair in AWS_SERVICES.items()}
SERVICES_BY_CODE = {code: pair for (code, name), pair in AWS_SERVICES.items()}
# AWS GPU instance families -> GPU model (canonical names of warehouse/gpu_models.py), used when
# instance_types (aws_pricing) has no row for the type.
GPU_FAMILIES = {
    "p2": "K80", "p3": "V100-16GB", "p3dn": "V100-32GB", "p4d": "A100-40GB", "p4de": "A100-80GB",
    "p5": "H100-SXM", "p5e": "H200", "p5en": "H200", "g4dn": "T4", "g5": "A10G", "g6": "L4", "gr6": "L4",
    "g6e": "L40S", "g3": "M60", "g3s": "M60", "g2": "K520",
}
USAGE_TYPE_INSTANCE = r"(?:BoxUsage|SpotUsage|DedicatedUsage|HostUsage|ReservedHostUsage):([a-z0-9-]+\.[a-z0-9-]+)"


def snake(text: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).lower()


def canonical_columns(columns: list[str]) -> tuple[str, dict[str, str], dict[str, str]]:
    """(dialect, {canonical name: raw column}, {tag key: raw column}) of a CUR file's header.

    The dialect is ``legacy`` (slash headers), ``cur2`` (snake_case with a ``product`` map) or
    ``athena`` (snake_case without it); ``focus`` for a FOCUS export; ``unknown`` otherwise.
    """
    names: dict[str, str] = {}
    tags: dict[str, str] = {}
    if "BilledCost" in columns and "ChargePeriodStart" in columns:
        return "focus", {}, {}
    slash = any("/" in c for c in columns)
    for raw in columns:
        if raw.startswith(LEGACY_TAG_PREFIX):
            tags.setdefault(raw[len(LEGACY_TAG_PREFIX):], raw)
            continue
        if slash and "/" in raw:
            category, _, attribute = raw.partition("/")
            name = f"{snake(category)}_{snake(attribute)}"
        elif raw.startswith(ATHENA_TAG_PREFIX):
            tags.setdefault(raw[len(ATHENA_TAG_PREFIX):], raw)
            continue
        else:
            name = raw
        names.setdefault(ALIASES.get(name, name), raw)
    if not all(r in names for r in REQUIRED):
        return "unknown", names, tags
    dialect = "legacy" if slash else ("cur2" if "product" in names else "athena")
    return dialect, names, tags


def check_dialect(what: str, columns: list[str], wanted: str) -> tuple[str, dict[str, str], dict[str, str]]:
    dialect, names, tags = canonical_columns(columns)
    if dialect == "unknown":
        missing = [r for r in REQUIRED if r not in names]
        raise IngestError(f"{what}: unknown column dialect: neither CUR 2.0 (line_item_unblended_cost), legacy "
                          f"CUR (lineItem/UnblendedCost) nor FOCUS (BilledCost) headers; missing "
                          f"{', '.join(missing)}")
    family = "focus" if dialect == "focus" else ("cur2" if dialect == "cur2" else "legacy")
    if wanted not in ("auto", family) and not (wanted == "cur2" and dialect == "athena"):
        raise IngestError(f"{what}: holds a {family} export but the source is configured with format = {wanted!r}")
    return dialect, names, tags


# CUR 2.0 Parquet holds money as double. A plain CAST to DECIMAL keeps the binary noise
# (21.957642 → 21.957642000000002); this keeps the value's 15 significant digits — the decimal the
# double was written from, exactly, for any amount of up to 15 significant digits — without going
# through text (4x slower): round(x · 10^s) as an integer, s = 14 − ⌊log10 |x|⌋ (at most 15), then
# scaled to DECIMAL(38,15) by exact integer and decimal arithmetic.
_SCALE = "least(15, 14 - floor(log10(abs({x}))))"
DOUBLE_TO_DECIMAL = ("CASE WHEN {x} = 0 THEN CAST(0 AS DECIMAL(38,15)) ELSE CAST(CAST(CAST(round({x} * pow(10, "
                     + _SCALE + ")) AS HUGEINT) * CAST(pow(10, 15 - " + _SCALE + ") AS HUGEINT) AS DECIMAL(38,0)) "
                     "* CAST(0.000000000000001 AS DECIMAL(38,15)) AS DECIMAL(38,15)) END")


def _quote(raw: str) -> str:
    return '"' + raw.replace('"', '""') + '"'


def _typed(raw: str | None, kind: str, types: dict[str, str]) -> str:
    if raw is None:
        return {"s": "CAST(NULL AS VARCHAR)", "m": "CAST(NULL AS DECIMAL(38,15))", "t": "CAST(NULL AS TIMESTAMPTZ)"}[kind]
    col = _quote(raw)
    source_type = types.get(raw, "VARCHAR").upper()
    if kind == "s":
        return f"NULLIF(CAST({col} AS VARCHAR), '')"
    if kind == "t":
        return f"CAST({col} AS TIMESTAMPTZ)"
    if source_type in ("DOUBLE", "FLOAT", "REAL"):
        return DOUBLE_TO_DECIMAL.format(x=col)
    return f"CAST({col} AS DECIMAL(38,15))"


def _product(key: str, names: dict[str, str], types: dict[str, str]) -> str:
    parts = []
    for attribute in PRODUCT_ATTRIBUTES[key]:
        if f"product_{attribute}" in names:
            parts.append(_typed(names[f"product_{attribute}"], "s", types))
    if "product" in names and types.get(names["product"], "").upper().startswith("MAP"):
        parts += [f"NULLIF(map_extract_value({_quote(names['product'])}, {sql_literal(a)}), '')"
                  for a in PRODUCT_ATTRIBUTES[key]]
    return f"COALESCE({', '.join(parts)})" if parts else "CAST(NULL AS VARCHAR)"


def _tags(names: dict[str, str], tags: dict[str, str], types: dict[str, str]) -> str:
    if "resource_tags" in names and types.get(names["resource_tags"], "").upper().startswith("MAP"):
        return f"CAST({_quote(names['resource_tags'])} AS MAP(VARCHAR, VARCHAR))"
    if not tags:
        return "CAST(NULL AS MAP(VARCHAR, VARCHAR))"
    entries = ", ".join(f"{{'k': {sql_literal(key)}, 'v': CAST({_quote(raw)} AS VARCHAR)}}" for key, raw in tags.items())
    return f"map_from_entries(list_filter([{entries}], lambda e: e.v IS NOT NULL AND e.v <> ''))"


def _case(column: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {sql_literal(v)}" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE {default} END"


def cur_select(relation: str, columns: list[str], types: dict[str, str], tag_keys: tuple[str, ...],
               only: tuple[str, ...] | None = None, carry: tuple[str, ...] = ()) -> str:
    """SELECT over one CUR file producing the cost_line_items columns (without x_Source / x_IngestRunId).

    ``only`` restricts the output to those columns (the push-down rollup needs a few, and must not
    carry expressions the remote engine need not evaluate)."""
    _, names, tags = canonical_columns(columns)
    inner = [f"{_typed(names.get(name), kind, types)} AS {name}" for name, kind in FIELDS.items()]
    inner += [f"{_product(key, names, types)} AS p_{key}" for key in PRODUCT_ATTRIBUTES]
    inner.append(f"{_tags(names, tags, types)} AS tags_map")
    inner += [_quote(c) for c in carry]  # passed through unchanged (validation's row numbers)
    lt = "line_item_line_item_type"
    split = "split_line_item_parent_resource_id IS NOT NULL"
    billed = f"CASE WHEN {split} THEN COALESCE(split_line_item_split_cost, 0) + COALESCE(split_line_item_unused_cost, 0) " \
             f"ELSE line_item_unblended_cost END"
    effective = (f"CASE WHEN {split} THEN {billed} "
                 f"WHEN {lt} = 'SavingsPlanCoveredUsage' THEN savings_plan_savings_plan_effective_cost "
                 f"WHEN {lt} = 'SavingsPlanRecurringFee' THEN savings_plan_total_commitment_to_date - savings_plan_used_commitment "
                 f"WHEN {lt} IN ('SavingsPlanNegation', 'SavingsPlanUpfrontFee') THEN 0 "
                 f"WHEN {lt} = 'DiscountedUsage' THEN reservation_effective_cost "
                 f"WHEN {lt} = 'RIFee' THEN COALESCE(reservation_unused_amortized_upfront_fee_for_billing_period, 0) "
                 f"+ COALESCE(reservation_unused_recurring_fee, 0) "
                 f"WHEN {lt} = 'Fee' AND reservation_reservation_a_r_n IS NOT NULL THEN 0 "
                 f"ELSE line_item_unblended_cost END")
    spot = ("(line_item_usage_type LIKE '%SpotUsage%' OR pricing_term = 'Spot' "
            "OR lower(pricing_purchase_option) LIKE '%spot%')")
    pricing_category = (f"CASE WHEN {lt} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Committed' "
                        f"WHEN {spot} THEN 'Dynamic' WHEN {lt} = 'Usage' THEN 'Standard' END")
    commitment_id = "COALESCE(savings_plan_savings_plan_a_r_n, reservation_reservation_a_r_n)"
    instance = f"COALESCE(p_instance_type, NULLIF(regexp_extract(line_item_usage_type, {sql_literal(USAGE_TYPE_INSTANCE)}, 1), ''))"
    service = plain_name_sql("COALESCE(p_name, line_item_product_code)")
    by_code = {part: _case("line_item_product_code", {c: p[part] for c, p in SERVICES_BY_CODE.items()}, "NULL")
               for part in (0, 1)}
    team = ", ".join(f"map_extract_value(tags_map, {sql_literal(k)})" for k in tag_keys) or "NULL"
    unit = unit_sql("pricing_unit")
    list_cost = "COALESCE(pricing_public_on_demand_cost, line_item_unblended_cost)"
    outputs = {
        "AvailabilityZone": "line_item_availability_zone",
        "BilledCost": billed,
        "BillingAccountId": "bill_payer_account_id",
        "BillingAccountName": "bill_payer_account_name",
        "BillingCurrency": "COALESCE(line_item_currency_code, 'USD')",
        "BillingPeriodEnd": "bill_billing_period_end_date",
        "BillingPeriodStart": "bill_billing_period_start_date",
        "ChargeCategory": _case(lt, CHARGE_CATEGORY, "'Usage'"),
        "ChargeClass": f"CASE WHEN {lt} = 'Refund' THEN 'Correction' END",
        "ChargeDescription": "line_item_line_item_description",
        "ChargeFrequency": _case(lt, CHARGE_FREQUENCY, "'Usage-Based'"),
        "ChargePeriodEnd": "line_item_usage_end_date",
        "ChargePeriodStart": "line_item_usage_start_date",
        "CommitmentDiscountCategory": "CASE WHEN savings_plan_savings_plan_a_r_n IS NOT NULL THEN 'Spend' "
                                      "WHEN reservation_reservation_a_r_n IS NOT NULL THEN 'Usage' END",
        "CommitmentDiscountId": commitment_id,
        "CommitmentDiscountStatus": f"CASE WHEN {lt} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Used' "
                                    f"WHEN {lt} IN ('RIFee', 'SavingsPlanRecurringFee') AND ({effective}) > 0 THEN 'Unused' END",
        "CommitmentDiscountType": "CASE WHEN savings_plan_savings_plan_a_r_n IS NOT NULL THEN 'Savings Plan' "
                                  "WHEN reservation_reservation_a_r_n IS NOT NULL THEN 'Reserved Instance' END",
        "ConsumedQuantity": f"CASE WHEN {lt} IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage') THEN line_item_usage_amount END",
        "ConsumedUnit": f"CASE WHEN {lt} IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage') THEN {unit} END",
        "ContractedCost": f"CASE WHEN {lt} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN {list_cost} ELSE {billed} END",
        "ContractedUnitPrice": "line_item_unblended_rate",
        "EffectiveCost": effective,
        "InvoiceId": "bill_invoice_id",
        "InvoiceIssuerName": "COALESCE(bill_invoicing_entity, 'Amazon Web Services, Inc.')",
        "ListCost": list_cost,
        "ListUnitPrice": "pricing_public_on_demand_rate",
        "PricingCategory": pricing_category,
        "PricingCurrency": "COALESCE(line_item_currency_code, 'USD')",
        "PricingQuantity": f"CASE WHEN {lt} <> 'Tax' THEN line_item_usage_amount END",  # FOCUS: NULL for tax
        "PricingUnit": f"CASE WHEN {lt} <> 'Tax' THEN {unit} END",
        "ProviderName": "'AWS'",
        "PublisherName": "COALESCE(line_item_legal_entity, 'Amazon Web Services, Inc.')",
        "RegionId": "p_region",
        "RegionName": "p_location",
        "ResourceId": f"CASE WHEN {split} THEN split_line_item_parent_resource_id ELSE line_item_resource_id END",
        "ResourceName": f"CASE WHEN {split} THEN line_item_resource_id END",
        "ServiceCategory": service_sql(service, SERVICES_BY_NAME, 0, by_code[0]),
        "ServiceName": service,
        "ServiceSubcategory": service_sql(service, SERVICES_BY_NAME, 1, by_code[1]),
        "SkuId": "product_sku",
        "SkuMeter": "line_item_usage_type",  # EBS:VolumeUsage.io2, TimedStorage-ByteHrs …: the storage models' meter
        "SkuPriceId": "COALESCE(pricing_rate_code, pricing_rate_id)",
        "SubAccountId": "line_item_usage_account_id",
        "SubAccountName": "line_item_usage_account_name",
        "Tags": "CASE WHEN cardinality(tags_map) > 0 THEN to_json(tags_map) END",
        "x_InstanceType": instance,
        "x_GpuModel": "CAST(NULL AS VARCHAR)",
        "x_GpuCount": "TRY_CAST(p_gpu AS INTEGER)",
        "x_Team": f"COALESCE({team})",
    }
    items = []
    for field in cost_schema.COST_LINE_ITEMS:
        if field.name in ("x_Source", "x_IngestRunId") or (only is not None and field.name not in only):
            continue
        expr = outputs.get(field.name, "NULL")
        items.append(f'CAST({expr} AS {column_types.sql_type(field)}) AS "{field.name}"')
    items += [_quote(c) for c in carry]
    return f"SELECT {', '.join(items)} FROM (SELECT {', '.join(inner)} FROM {relation})"


# FOCUS column -> the CUR column it is read from (canonical names), for validation messages
ORIGIN = {"BilledCost": "line_item_unblended_cost", "EffectiveCost": "line_item_unblended_cost",
          "ListCost": "pricing_public_on_demand_cost", "ChargeCategory": "line_item_line_item_type",
          "ChargePeriodStart": "line_item_usage_start_date", "ChargePeriodEnd": "line_item_usage_end_date",
          "BillingPeriodStart": "bill_billing_period_start_date", "BillingPeriodEnd": "bill_billing_period_end_date",
          "BillingAccountId": "bill_payer_account_id", "ServiceName": "line_item_product_code",
          "x_GpuCount": "product gpu"}


def origin(columns: list[str]) -> dict[str, str]:
    """FOCUS column -> the column of this file it comes from (its own header spelling)."""
    _, names, _ = canonical_columns(columns)
    return {focus: names.get(canonical, canonical) for focus, canonical in ORIGIN.items()}


def casts(columns: list[str], types: dict[str, str]) -> list[tuple[str, str, str]]:
    """(raw column, kind) the mapping parses: money and times held as text, money held as a double."""
    _, names, _ = canonical_columns(columns)
    out = []
    for canonical, kind in FIELDS.items():
        raw = names.get(canonical)
        if raw is None or kind == "s":
            continue
        source_type = types.get(raw, "VARCHAR").upper()
        if source_type == "VARCHAR":
            out.append((_quote(raw), raw, "number" if kind == "m" else "time"))
        elif kind == "m" and source_type in ("DOUBLE", "FLOAT", "REAL"):
            out.append((_quote(raw), raw, "finite"))
    return out


def gpu_family_values() -> str:
    """The GPU_FAMILIES table as a SQL VALUES list (family, gpu_model)."""
    return ", ".join(f"({sql_literal(f)}, {sql_literal(m)})" for f, m in sorted(GPU_FAMILIES.items()))
