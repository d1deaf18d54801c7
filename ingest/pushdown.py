"""The cost rollup, defined once, run where the billing data lives.

A large CUR holds hundreds of millions of line items a month; a BigQuery billing export lives in
BigQuery already. Instead of copying every line item home, gpufinops can send the engine that
holds them one query: the provider's FOCUS mapping (the same SQL the local path runs:
:func:`ingest.cur_mapping.cur_select` for AWS) wrapped in :func:`rollup_select`, which sums cost and
usage per charge period, account, resource, team, instance type and pricing category, and brings
home only that result.

The SQL is written once, in DuckDB's dialect, and transpiled with sqlglot (:func:`to_dialect`) to
Trino (Athena) or BigQuery; the few constructs sqlglot does not translate the way those engines
need are rewritten on the syntax tree, not by string patching. The tests run the transpiled texts
back through sqlglot into DuckDB over the same fixture files and compare with the local path.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from warehouse import schema

# What the models, dashboard and reports group by: every other FOCUS column is NULL in a rollup row.
ROLLUP_KEYS = (
    "ProviderName", "BillingAccountId", "BillingAccountName", "SubAccountId", "SubAccountName",
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "BillingCurrency",
    "InvoiceIssuerName", "PublisherName", "ChargeCategory", "ChargeClass", "ChargeFrequency",
    "PricingCategory", "PricingUnit", "ConsumedUnit", "ServiceName", "ServiceCategory", "RegionId",
    "RegionName", "AvailabilityZone", "ResourceId", "CommitmentDiscountId", "CommitmentDiscountCategory",
    "CommitmentDiscountType", "CommitmentDiscountStatus", "x_InstanceType", "x_GpuModel", "x_GpuCount", "x_Team",
)
ROLLUP_SUMS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity", "PricingQuantity")
ROLLUP_COLUMNS = ROLLUP_KEYS + ROLLUP_SUMS

DIALECTS = {"duckdb": "duckdb", "trino": "trino", "athena": "trino", "bigquery": "bigquery"}
_TIMESTAMP_COLUMNS = {f.name for f in schema.COST_LINE_ITEMS if str(f.type).startswith("timestamp")}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def rollup_select(mapped: str, *, remote: bool = False) -> str:
    """GROUP BY over a FOCUS-mapped SELECT: one row per key combination with the money summed.

    Charge periods are kept as they are (an hourly CUR rolls up per hour, a daily one per day), so a
    monthly fee is never squeezed into one hour. ``remote`` makes timestamps plain UTC ``TIMESTAMP``
    in the output, which every engine prints in the same ISO form (``TIMESTAMP WITH TIME ZONE``
    prints a zone name that differs between engines).
    """
    keys = [f"CAST({_q(k)} AS TIMESTAMP) AS {_q(k)}" if remote and k in _TIMESTAMP_COLUMNS else _q(k)
            for k in ROLLUP_KEYS]
    sums = [f"sum({_q(c)}) AS {_q(c)}" for c in ROLLUP_SUMS]
    group = ", ".join(_q(k) for k in ROLLUP_KEYS)
    return f"SELECT {', '.join(keys + sums)} FROM ({mapped}) AS mapped GROUP BY {group}"


def _trino(node: exp.Expression) -> exp.Expression:
    """Trino/Athena: map lookups that return NULL for a missing key, no HUGEINT."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == "map_extract_value":
        return exp.Anonymous(this="element_at", expressions=list(node.expressions))
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:  # m['k'] fails in Trino when k is absent
        return exp.Anonymous(this="element_at", expressions=[node.this, node.expressions[0]])
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:  # DuckDB's HUGEINT
        return exp.DataType.build("DECIMAL(38, 0)")
    return node


def _bigquery(node: exp.Expression) -> exp.Expression:
    """BigQuery: exact money is NUMERIC/BIGNUMERIC; DECIMAL(38,15) does not exist there."""
    if isinstance(node, exp.DataType) and node.is_type(exp.DataType.Type.DECIMAL):
        return exp.DataType.build("BIGNUMERIC")
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("BIGNUMERIC")
    return node


def to_dialect(sql: str, dialect: str) -> str:
    """The DuckDB text ``sql`` in ``dialect`` (duckdb, trino/athena or bigquery)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    tree = sqlglot.parse_one(sql, read="duckdb")
    target = DIALECTS[dialect]
    if target == "trino":
        tree = tree.transform(_trino)
    elif target == "bigquery":
        tree = tree.transform(_bigquery)
    return tree.sql(dialect=target)


def back_to_duckdb(sql: str, dialect: str) -> str:
    """A transpiled text read back into DuckDB's dialect (what the tests run to check it)."""
    return sqlglot.transpile(sql, read=DIALECTS[dialect], write="duckdb")[0]


def typed_rollup_select(relation: str) -> str:
    """SELECT casting a rollup's text columns (as a remote engine returns them) to the warehouse types."""
    fields = {f.name: f for f in schema.COST_LINE_ITEMS}
    items = []
    for name in ROLLUP_COLUMNS:
        sql_type = schema.sql_type(fields[name])
        value = f"NULLIF({_q(name)}, '')"
        if sql_type == "TIMESTAMPTZ":  # the remote printed UTC without a zone
            value = f"CAST({value} AS TIMESTAMP) AT TIME ZONE 'UTC'"
        items.append(f"CAST({value} AS {sql_type}) AS {_q(name)}")
    return f"SELECT {', '.join(items)} FROM {relation}"
