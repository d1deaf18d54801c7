"""AWS Cost and Usage Report → FOCUS 1.2: the mapping, as DuckDB SQL (the header dialects are
``cur_columns.py``, what the values mean ``cur_values.py``).

Three header dialects name the same CUR columns: legacy CUR CSV (``lineItem/UnblendedCost``,
``resourceTags/user:team``), Athena / Parquet legacy CUR (``line_item_unblended_cost``,
``resource_tags_user_team``) and CUR 2.0 (``line_item_unblended_cost`` with ``product`` and
``resource_tags`` MAP columns and ``split_line_item_*``). ``cur_columns.canonical_columns`` maps every
header onto the CUR 2.0 names; :func:`cur_select` builds one SELECT producing every ``cost_line_items``
column, following the FinOps Foundation's conversion rules (focus_converters
``conversion_rules_aws-cur.csv``): ChargeCategory per line item type, BilledCost = unblended cost,
EffectiveCost amortised over Savings Plans and Reserved Instances, spot usage ``Dynamic``.
"""

from __future__ import annotations

from gpufinops.ingest.aws.cur_columns import FIELDS, PRODUCT_ATTRIBUTES, canonical_columns, quote_identifier
from gpufinops.ingest.aws.cur_values import (
    CHARGE_CATEGORY,
    CHARGE_FREQUENCY,
    SERVICES_BY_CODE,
    SERVICES_BY_NAME,
    USAGE_TYPE_INSTANCE,
)
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.focus_values import cost_line_items_select, plain_name_sql, service_sql, unit_sql

# CUR 2.0 Parquet holds money as double. A plain CAST to DECIMAL keeps the binary noise
# (21.957642 → 21.957642000000002); this keeps the value's 15 significant digits — the decimal the
# double was written from, exactly, for any amount of up to 15 significant digits — without going
# through text (4x slower): round(x · 10^s) as an integer, s = 14 − ⌊log10 |x|⌋ (at most 15), then
# scaled to DECIMAL(38,15) by exact integer and decimal arithmetic.
_SCALE = "least(15, 14 - floor(log10(abs({x}))))"
DOUBLE_TO_DECIMAL = (
    "CASE WHEN {x} = 0 THEN CAST(0 AS DECIMAL(38,15)) ELSE CAST(CAST(CAST(round({x} * pow(10, "
    + _SCALE
    + ")) AS HUGEINT) * CAST(pow(10, 15 - "
    + _SCALE
    + ") AS HUGEINT) AS DECIMAL(38,0)) "
    "* CAST(0.000000000000001 AS DECIMAL(38,15)) AS DECIMAL(38,15)) END"
)


def _typed(raw: str | None, kind: str, types: dict[str, str]) -> str:
    if raw is None:
        return {"s": "CAST(NULL AS VARCHAR)", "m": "CAST(NULL AS DECIMAL(38,15))", "t": "CAST(NULL AS TIMESTAMPTZ)"}[
            kind
        ]
    col = quote_identifier(raw)
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
        parts += [
            f"NULLIF(map_extract_value({quote_identifier(names['product'])}, {sql_literal(a)}), '')"
            for a in PRODUCT_ATTRIBUTES[key]
        ]
    return f"COALESCE({', '.join(parts)})" if parts else "CAST(NULL AS VARCHAR)"


def _tags(names: dict[str, str], tags: dict[str, str], types: dict[str, str]) -> str:
    if "resource_tags" in names and types.get(names["resource_tags"], "").upper().startswith("MAP"):
        return f"CAST({quote_identifier(names['resource_tags'])} AS MAP(VARCHAR, VARCHAR))"
    if not tags:
        return "CAST(NULL AS MAP(VARCHAR, VARCHAR))"
    entries = ", ".join(
        f"{{'k': {sql_literal(key)}, 'v': CAST({quote_identifier(raw)} AS VARCHAR)}}" for key, raw in tags.items()
    )
    return f"map_from_entries(list_filter([{entries}], lambda e: e.v IS NOT NULL AND e.v <> ''))"


def _case(column: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {sql_literal(v)}" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE {default} END"


def cur_select(
    relation: str,
    columns: list[str],
    types: dict[str, str],
    tag_keys: tuple[str, ...],
    only: tuple[str, ...] | None = None,
    carry: tuple[str, ...] = (),
) -> str:
    """SELECT over one CUR file producing the cost_line_items columns (without x_Source / x_IngestRunId).

    ``only`` restricts the output to those columns (the push-down rollup needs a few, and must not
    carry expressions the remote engine need not evaluate)."""
    _, names, tags = canonical_columns(columns)
    inner = [f"{_typed(names.get(name), kind, types)} AS {name}" for name, kind in FIELDS.items()]
    inner += [f"{_product(key, names, types)} AS p_{key}" for key in PRODUCT_ATTRIBUTES]
    inner.append(f"{_tags(names, tags, types)} AS tags_map")
    inner += [quote_identifier(c) for c in carry]  # passed through unchanged (validation's row numbers)
    lt = "line_item_line_item_type"
    split = "split_line_item_parent_resource_id IS NOT NULL"
    billed = (
        f"CASE WHEN {split} THEN COALESCE(split_line_item_split_cost, 0) + COALESCE(split_line_item_unused_cost, 0) "
        f"ELSE line_item_unblended_cost END"
    )
    effective = (
        f"CASE WHEN {split} THEN {billed} "
        f"WHEN {lt} = 'SavingsPlanCoveredUsage' THEN savings_plan_savings_plan_effective_cost "
        f"WHEN {lt} = 'SavingsPlanRecurringFee' THEN savings_plan_total_commitment_to_date - savings_plan_used_commitment "
        f"WHEN {lt} IN ('SavingsPlanNegation', 'SavingsPlanUpfrontFee') THEN 0 "
        f"WHEN {lt} = 'DiscountedUsage' THEN reservation_effective_cost "
        f"WHEN {lt} = 'RIFee' THEN COALESCE(reservation_unused_amortized_upfront_fee_for_billing_period, 0) "
        f"+ COALESCE(reservation_unused_recurring_fee, 0) "
        f"WHEN {lt} = 'Fee' AND reservation_reservation_a_r_n IS NOT NULL THEN 0 "
        f"ELSE line_item_unblended_cost END"
    )
    spot = (
        "(line_item_usage_type LIKE '%SpotUsage%' OR pricing_term = 'Spot' "
        "OR lower(pricing_purchase_option) LIKE '%spot%')"
    )
    pricing_category = (
        f"CASE WHEN {lt} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Committed' "
        f"WHEN {spot} THEN 'Dynamic' WHEN {lt} = 'Usage' THEN 'Standard' END"
    )
    commitment_id = "COALESCE(savings_plan_savings_plan_a_r_n, reservation_reservation_a_r_n)"
    instance = f"COALESCE(p_instance_type, NULLIF(regexp_extract(line_item_usage_type, {sql_literal(USAGE_TYPE_INSTANCE)}, 1), ''))"
    service = plain_name_sql("COALESCE(p_name, line_item_product_code)")
    by_code = {
        part: _case("line_item_product_code", {c: p[part] for c, p in SERVICES_BY_CODE.items()}, "NULL")
        for part in (0, 1)
    }
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
    items = cost_line_items_select(outputs, only)
    items += [quote_identifier(c) for c in carry]
    return f"SELECT {', '.join(items)} FROM (SELECT {', '.join(inner)} FROM {relation})"
