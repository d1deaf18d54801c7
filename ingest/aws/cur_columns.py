"""The CUR's header dialects: which column holds what, under each of the three spellings AWS writes.

Legacy CUR CSV (``lineItem/UnblendedCost``, ``resourceTags/user:team``), Athena / Parquet legacy CUR
(``line_item_unblended_cost``, ``resource_tags_user_team``) and CUR 2.0 (``line_item_unblended_cost`` with
``product`` and ``resource_tags`` MAP columns): :func:`canonical_columns` maps every header onto the CUR 2.0
names; :func:`origin` and :func:`casts` say, per file, where a FOCUS column comes from and which of its
columns the mapping (``cur_mapping.py``) parses.
"""

from __future__ import annotations

import re

from gpufinops.ingest.core.registry import IngestError

# canonical CUR 2.0 name -> kind ("s" text, "m" decimal, "t" timestamp)
FIELDS: dict[str, str] = {
    **{
        name: "s"
        for name in (
            "bill_payer_account_id",
            "bill_payer_account_name",
            "bill_invoice_id",
            "bill_invoicing_entity",
            "line_item_usage_account_id",
            "line_item_usage_account_name",
            "line_item_line_item_type",
            "line_item_product_code",
            "line_item_usage_type",
            "line_item_operation",
            "line_item_availability_zone",
            "line_item_resource_id",
            "line_item_currency_code",
            "line_item_line_item_description",
            "line_item_legal_entity",
            "pricing_unit",
            "pricing_term",
            "pricing_rate_code",
            "pricing_rate_id",
            "pricing_purchase_option",
            "product_sku",
            "savings_plan_savings_plan_a_r_n",
            "reservation_reservation_a_r_n",
            "split_line_item_parent_resource_id",
        )
    },
    **{
        name: "m"
        for name in (
            "line_item_unblended_cost",
            "line_item_unblended_rate",
            "line_item_usage_amount",
            "pricing_public_on_demand_cost",
            "pricing_public_on_demand_rate",
            "savings_plan_savings_plan_effective_cost",
            "savings_plan_total_commitment_to_date",
            "savings_plan_used_commitment",
            "reservation_effective_cost",
            "reservation_unused_amortized_upfront_fee_for_billing_period",
            "reservation_unused_recurring_fee",
            "split_line_item_split_cost",
            "split_line_item_unused_cost",
        )
    },
    **{
        name: "t"
        for name in (
            "bill_billing_period_start_date",
            "bill_billing_period_end_date",
            "line_item_usage_start_date",
            "line_item_usage_end_date",
        )
    },
}
# product attributes: top-level column product_<key> (legacy, CUR 2.0 for a few) or product[<key>] (CUR 2.0)
PRODUCT_ATTRIBUTES = {
    "instance_type": ("instance_type",),
    "region": ("region_code", "region"),
    "location": ("location",),
    "name": ("product_name", "servicename"),
    "gpu": ("gpu",),
}
REQUIRED = (
    "line_item_line_item_type",
    "line_item_unblended_cost",
    "line_item_usage_start_date",
    "bill_billing_period_start_date",
    "bill_payer_account_id",
)
ALIASES = {
    "savings_plan_savings_plan_arn": "savings_plan_savings_plan_a_r_n",
    "reservation_reservation_arn": "reservation_reservation_a_r_n",
}
LEGACY_TAG_PREFIX = "resourceTags/"
ATHENA_TAG_PREFIX = "resource_tags_"


def quote_identifier(raw: str) -> str:
    """A column name as a DuckDB identifier."""
    return '"' + raw.replace('"', '""') + '"'


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
            tags.setdefault(raw[len(LEGACY_TAG_PREFIX) :], raw)
            continue
        if slash and "/" in raw:
            category, _, attribute = raw.partition("/")
            name = f"{snake(category)}_{snake(attribute)}"
        elif raw.startswith(ATHENA_TAG_PREFIX):
            tags.setdefault(raw[len(ATHENA_TAG_PREFIX) :], raw)
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
        raise IngestError(
            f"{what}: unknown column dialect: neither CUR 2.0 (line_item_unblended_cost), legacy "
            f"CUR (lineItem/UnblendedCost) nor FOCUS (BilledCost) headers; missing "
            f"{', '.join(missing)}"
        )
    family = "focus" if dialect == "focus" else ("cur2" if dialect == "cur2" else "legacy")
    if wanted not in ("auto", family) and not (wanted == "cur2" and dialect == "athena"):
        raise IngestError(f"{what}: holds a {family} export but the source is configured with format = {wanted!r}")
    return dialect, names, tags


# FOCUS column -> the CUR column it is read from (canonical names), for validation messages
ORIGIN = {
    "BilledCost": "line_item_unblended_cost",
    "EffectiveCost": "line_item_unblended_cost",
    "ListCost": "pricing_public_on_demand_cost",
    "ChargeCategory": "line_item_line_item_type",
    "ChargePeriodStart": "line_item_usage_start_date",
    "ChargePeriodEnd": "line_item_usage_end_date",
    "BillingPeriodStart": "bill_billing_period_start_date",
    "BillingPeriodEnd": "bill_billing_period_end_date",
    "BillingAccountId": "bill_payer_account_id",
    "ServiceName": "line_item_product_code",
    "x_GpuCount": "product gpu",
}


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
            out.append((quote_identifier(raw), raw, "number" if kind == "m" else "time"))
        elif kind == "m" and source_type in ("DOUBLE", "FLOAT", "REAL"):
            out.append((quote_identifier(raw), raw, "finite"))
    return out
