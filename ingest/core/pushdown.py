"""The cost rollup, defined once, run where the billing data lives.

A large CUR holds hundreds of millions of line items a month; a BigQuery billing export lives in
BigQuery already. Instead of copying every line item home, gpufinops can send the engine that
holds them one query: the provider's FOCUS mapping (the same SQL the local path runs:
:func:`ingest.aws.cur_mapping.cur_select` for AWS) wrapped in :func:`rollup_select`, which sums cost and
usage per charge period, account, resource, team, instance type and pricing category, and brings
home only that result.

The SQL is written once, in DuckDB's dialect, and transpiled with sqlglot (:func:`to_dialect`) to
Trino (Athena) or BigQuery; the few constructs sqlglot does not translate the way those engines
need are rewritten on the syntax tree, not by string patching. The tests run the transpiled texts
back through sqlglot into DuckDB over the same fixture files and compare with the local path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import sqlglot
from sqlglot import exp

from gpufinops.warehouse import column_types, cost_schema

# What the models, dashboard and reports group by: every other FOCUS column is NULL in a rollup row.
ROLLUP_KEYS = (
    "ProviderName",
    "BillingAccountId",
    "BillingAccountName",
    "SubAccountId",
    "SubAccountName",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BillingCurrency",
    "InvoiceIssuerName",
    "PublisherName",
    "ChargeCategory",
    "ChargeClass",
    "ChargeFrequency",
    "PricingCategory",
    "PricingUnit",
    "ConsumedUnit",
    "ServiceName",
    "ServiceCategory",
    "ServiceSubcategory",
    "InvoiceId",
    "RegionId",
    "RegionName",
    "AvailabilityZone",
    "ResourceId",
    "CommitmentDiscountId",
    "CommitmentDiscountCategory",
    "CommitmentDiscountType",
    "CommitmentDiscountStatus",
    "x_InstanceType",
    "x_GpuModel",
    "x_GpuCount",
    "x_Team",
)
ROLLUP_SUMS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ConsumedQuantity", "PricingQuantity")
ROLLUP_COLUMNS = ROLLUP_KEYS + ROLLUP_SUMS

DIALECTS = {"duckdb": "duckdb", "trino": "trino", "athena": "trino", "bigquery": "bigquery"}
_TIMESTAMP_COLUMNS = {f.name for f in cost_schema.COST_LINE_ITEMS if str(f.type).startswith("timestamp")}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def rollup_select(mapped: str, *, remote: bool = False) -> str:
    """GROUP BY over a FOCUS-mapped SELECT: one row per key combination with the money summed.

    Charge periods are kept as they are (an hourly CUR rolls up per hour, a daily one per day), so a
    monthly fee is never squeezed into one hour. ``remote`` makes timestamps plain UTC ``TIMESTAMP``
    in the output, which every engine prints in the same ISO form (``TIMESTAMP WITH TIME ZONE``
    prints a zone name that differs between engines).
    """
    keys = [
        f"CAST({_q(k)} AS TIMESTAMP) AS {_q(k)}" if remote and k in _TIMESTAMP_COLUMNS else _q(k) for k in ROLLUP_KEYS
    ]
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


def _template(sql: str, **parts: exp.Expression) -> exp.Expression:
    """A BigQuery snippet whose placeholder columns (``__name__``) are replaced by the given subtrees."""
    tree = sqlglot.parse_one(sql, read="bigquery")
    if not isinstance(tree, exp.Expression):  # parse_one is typed Expr; a parsed query is an Expression
        raise TypeError(f"not an expression: {sql}")
    for column in list(tree.find_all(exp.Column)):
        if not column.table and column.name.startswith("__") and column.name.strip("_") in parts:
            column.replace(parts[column.name.strip("_")])
    return tree


def _as_datetime(node: exp.Expression) -> exp.Expression:
    """A DuckDB naive-TIMESTAMP expression as a BigQuery DATETIME one (``strptime`` + an interval)."""
    if isinstance(node, exp.StrToTime):
        return exp.Anonymous(this="PARSE_DATETIME", expressions=[node.args["format"], node.this])
    if isinstance(node, exp.Add) and isinstance(node.expression, exp.Interval):
        interval = node.expression
        return exp.Anonymous(
            this="DATETIME_ADD",
            expressions=[
                _as_datetime(node.this),
                exp.Interval(this=_integer(interval.this), unit=interval.args.get("unit")),
            ],
        )
    return exp.Cast(this=node, to=exp.DataType.build("DATETIME", dialect="bigquery"))


def _integer(node: exp.Expression) -> exp.Expression:
    """INTERVAL '1' MONTH → INTERVAL 1 MONTH (BigQuery's single-part interval takes an INT64)."""
    if isinstance(node, exp.Literal) and node.is_string and node.this.lstrip("-").isdigit():
        return exp.Literal.number(int(node.this))
    return node


def _bignumeric(node: exp.DataType, pinned: bool) -> exp.DataType:
    """DuckDB's DECIMAL(p,s) / HUGEINT as BigQuery's BIGNUMERIC (76 digits, scale 38: every value exact).

    BigQuery accepts ``BIGNUMERIC(p, s)`` only in column and variable declarations, so the text sent
    to BigQuery says ``BIGNUMERIC``. ``pinned`` keeps DuckDB's precision and scale as
    ``BIGNUMERIC(p, s)`` for engines whose BIGNUMERIC is narrower than BigQuery's: sqlglot reads a
    bare BIGNUMERIC into DuckDB as DECIMAL(38,5), and bqemulator runs it so. The two texts differ in
    those type parameters only (the tests check it).
    """
    if node.this == exp.DataType.Type.INT128:
        precision, scale = "38", "0"
    else:
        params = [p.name for p in node.expressions]
        precision, scale = (params + ["0"])[:2] if params else ("18", "3")  # DuckDB's DECIMAL is (18,3)
    if pinned:
        return exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=f"BIGNUMERIC({precision}, {scale})")
    return exp.DataType.build("BIGNUMERIC", dialect="bigquery")


def _bigquery_call(
    node: exp.Anonymous, inner: Callable[[exp.Expression], exp.Expression], numbers: Iterator[int]
) -> exp.Expression:
    """A DuckDB function call BigQuery lacks, rewritten (see :func:`_bigquery_rewriter`); others as they are.
    ``inner`` rewrites a moved subtree; ``numbers`` numbers the aliases."""
    name, args = node.name.lower(), node.expressions
    if name == "map_extract_value" and len(args) == 2:
        n = next(numbers)
        return exp.Subquery(
            this=_template(
                f"SELECT _kv{n}.value FROM UNNEST(__map__) AS _kv{n} WHERE _kv{n}.key = __key__ LIMIT 1",
                map=inner(args[0]),
                key=inner(args[1]),
            )
        )
    if name == "cardinality" and len(args) == 1:
        return exp.ArraySize(this=inner(args[0]))
    if name == "list_sum" and len(args) == 1:
        n = next(numbers)
        return exp.Subquery(this=_template(f"SELECT SUM(_v{n}) FROM UNNEST(__array__) AS _v{n}", array=inner(args[0])))
    utc = len(args) == 2 and isinstance(args[0], exp.Literal) and args[0].name.upper() == "UTC"
    if name == "timezone" and utc:
        return exp.Anonymous(this="TIMESTAMP", expressions=[_as_datetime(inner(args[1])), exp.Literal.string("UTC")])
    return node


def _bigquery_rewriter(pinned: bool = False) -> Callable[[exp.Expression], exp.Expression]:
    """BigQuery lacks DuckDB's MAP, lambdas, list functions and DECIMAL(p,s); rewrite them on the tree.

    * ``DECIMAL(p,s)`` / ``HUGEINT`` → ``BIGNUMERIC`` (see :func:`_bignumeric`); a decimal literal
      cast to DECIMAL is cast from its text (``0.000000000000001`` is a FLOAT64 in BigQuery, and
      would bring its binary noise into a BIGNUMERIC); ``log10(x)`` → ``LOG10(x)`` (``LOG(x, 10)``
      gives 2.9999999999999996 for 1000, which would move a rounding digit).
    * A MAP is only ever built by ``map_from_entries(entries)``: it stays its key/value entries array;
      ``map_extract_value(m, k)`` becomes ``(SELECT e.value FROM UNNEST(m) AS e WHERE e.key = k LIMIT 1)``
      (DuckDB refuses duplicate map keys, so the first match is the only one) and ``cardinality(m)``
      ``ARRAY_LENGTH(m)``.
    * ``list_transform(a, lambda x: f)`` → ``ARRAY(SELECT f FROM UNNEST(a) AS x)``; ``list_sum(a)`` →
      ``(SELECT SUM(v) FROM UNNEST(a) AS v)`` (NULL for an empty list, as in DuckDB). ``list_filter``
      and ``list_contains`` sqlglot already turns into UNNEST subqueries. The order of a list's
      elements is not kept (no ``WITH OFFSET … ORDER BY``: bqemulator re-prints a query that refers
      to an offset, losing its types): lists are summed, searched and looked up by key here, never
      read by position — a ``list[i]`` or ``m['k']`` is refused.
    * ``timezone('UTC', naive)`` → ``TIMESTAMP(<naive as DATETIME>, 'UTC')``, ``strptime`` under it
      → ``PARSE_DATETIME`` and ``+ INTERVAL n unit`` → ``DATETIME_ADD`` (a month can not be added to a
      BigQuery TIMESTAMP).
    Subtrees moved into a new node are rewritten first (``transform`` does not descend into a
    replacement). Aliases are numbered, so the text is the same on every call.
    """
    numbers = itertools.count(1)
    decimal_types = (exp.DataType.Type.DECIMAL, exp.DataType.Type.INT128)

    def inner(node: exp.Expression) -> exp.Expression:
        return node.transform(rewrite)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.DataType) and node.this in decimal_types:
            return _bignumeric(node, pinned)
        if (
            isinstance(node, exp.Cast)
            and isinstance(node.this, exp.Literal)
            and not node.this.is_string
            and not node.this.is_int
            and node.to.this in decimal_types
        ):
            return exp.Cast(this=exp.Literal.string(node.this.name), to=_bignumeric(node.to, pinned))
        if isinstance(node, exp.Log) and node.expression is not None and node.this.name == "10":
            return exp.Anonymous(this="LOG10", expressions=[inner(node.expression)])
        if isinstance(node, exp.MapFromEntries):
            return inner(node.this)
        if isinstance(node, exp.Bracket):
            raise ValueError(
                f"{node.sql('duckdb')}: a list element by position or a map subscript is not "
                "translated to BigQuery (UNNEST keeps no order; use map_extract_value)"
            )
        if isinstance(node, exp.Transform) and isinstance(node.expression, exp.Lambda):
            variable = node.expression.expressions[0].name
            return _template(
                f"ARRAY(SELECT __body__ FROM UNNEST(__array__) AS {variable})",
                body=inner(node.expression.this),
                array=inner(node.this),
            )
        if isinstance(node, exp.Anonymous):
            return _bigquery_call(node, inner, numbers)
        return node

    return rewrite


def to_dialect(sql: str, dialect: str, *, pinned_decimals: bool = False) -> str:
    """The DuckDB text ``sql`` in ``dialect`` (duckdb, trino/athena or bigquery).

    ``pinned_decimals`` (BigQuery only) writes ``BIGNUMERIC(p, s)`` where BigQuery wants a bare
    ``BIGNUMERIC``: for running the text where BIGNUMERIC is narrower (see :func:`_bignumeric`)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    tree = sqlglot.parse_one(sql, read="duckdb")
    target = DIALECTS[dialect]
    if target == "trino":
        tree = tree.transform(_trino)
    elif target == "bigquery":
        tree = tree.transform(_bigquery_rewriter(pinned_decimals))
    return tree.sql(dialect=target)


def back_to_duckdb(sql: str, dialect: str) -> str:
    """A transpiled text read back into DuckDB's dialect (what the tests run to check it)."""
    return sqlglot.transpile(sql, read=DIALECTS[dialect], write="duckdb")[0]


def typed_rollup_select(relation: str, *, empty_is_null: bool = True) -> str:
    """SELECT casting a rollup's text columns (as a remote engine returns them) to the warehouse types.

    ``empty_is_null``: Athena's result rows can not tell NULL from '' (both come as no value);
    BigQuery's can, and keeps '' (a label set to the empty string) as the local path does."""
    fields = {f.name: f for f in cost_schema.COST_LINE_ITEMS}
    items = []
    for name in ROLLUP_COLUMNS:
        sql_type = column_types.sql_type(fields[name])
        value = f"NULLIF({_q(name)}, '')" if empty_is_null else _q(name)
        if sql_type == "TIMESTAMPTZ":  # the remote printed UTC without a zone
            value = f"CAST({value} AS TIMESTAMP) AT TIME ZONE 'UTC'"
        items.append(f"CAST({value} AS {sql_type}) AS {_q(name)}")
    return f"SELECT {', '.join(items)} FROM {relation}"
