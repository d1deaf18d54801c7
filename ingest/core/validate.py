"""Row checks in the pass that casts the rows, before the slice replace; quarantine on request.

Every cost ingestor reads its files as *parts* (one per file, object or BigQuery answer): a raw
relation and the mapping that turns it into ``cost_line_items`` rows. The checks below are one SQL
``CASE`` evaluated on the mapped rows inside the load's own ``INSERT … SELECT`` (no second scan):

* the FOCUS 1.2 columns the spec makes Mandatory and not nullable are never NULL (``COST_NOT_NULL``);
* ``ChargePeriodEnd`` is not before ``ChargePeriodStart``, ``BillingPeriodEnd`` after ``BillingPeriodStart``;
* the charge period lies inside its billing period, give or take ``PERIOD_TOLERANCE`` (a
  ``Correction`` may fall outside: it corrects an earlier period);
* times are plausible: not before 2000, a charge not starting more than a day in the future;
* ``x_GpuCount`` is between 0 and ``MAX_GPUS``.

With ``on_invalid = "fail"`` (the default) a violation stops the load through DuckDB's ``error()``;
only then, on the failure path, the part is read again with row numbers to name the row
(:func:`explain`), so a good load pays for the ``CASE`` alone. A value that does not parse as its
type (a cost ``abc``, an ``inf`` double) fails the load's own ``CAST``; :func:`explain` finds its
file, row, column and value the same way. With ``on_invalid = "skip_rows"`` each part is read once
into a numbered temporary table, rows that do not parse or fail a check go to ``ingest_rejects``
(:func:`quarantine`) and the others load. A file that does not read at all is named by
``ingest/core/file_checks.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb

from gpufinops.ingest.core import funnel
from gpufinops.ingest.core.file_checks import csv_error, read_error
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, IngestContext, IngestError
from gpufinops.warehouse import domains

FAIL, SKIP_ROWS = "fail", "skip_rows"
MODES = (FAIL, SKIP_ROWS)
MARKER = "gpufinops-invalid"
PERIOD_TOLERANCE = timedelta(days=1)
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)
MAX_GPUS = 1024
# FOCUS 1.2 Mandatory columns that do not allow nulls (tests/data/focus-spec), less ContractedCost:
# the FOCUS 1.0 sample data the FinOps Foundation publishes leaves it empty on some rows.
COST_NOT_NULL = (
    "BilledCost",
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ProviderName",
    "PublisherName",
    "ServiceCategory",
    "ServiceName",
)
REJECTS = "ingest_rejects"


def on_invalid(ctx: IngestContext) -> str:
    """The source's ``on_invalid`` (its Options type checked it: "fail" or "skip_rows")."""
    return str(getattr(ctx.options, "on_invalid", FAIL))


@dataclass(frozen=True)
class Cast:
    """A raw value the mapping parses: ``expr`` over the raw relation, shown as ``label``."""

    expr: str
    label: str
    kind: str  # "number" | "integer" | "time" | "json" | "finite" (a DOUBLE that must be finite)

    def bad(self) -> str:
        if self.kind == "finite":  # and within the ledger's DECIMAL(38,15)
            return f"({self.expr} IS NOT NULL AND (NOT isfinite({self.expr}) OR abs({self.expr}) >= 1e23))"
        target = {"number": "DOUBLE", "integer": "BIGINT", "time": "TIMESTAMPTZ", "json": "JSON"}[self.kind]
        if self.kind == "number":  # DECIMAL(38,15) refuses what DOUBLE takes: inf, nan, 1e400
            return (
                f"({self.expr} IS NOT NULL AND trim(CAST({self.expr} AS VARCHAR)) <> '' AND "
                f"(TRY_CAST({self.expr} AS DECIMAL(38,15)) IS NULL))"
            )
        return (
            f"({self.expr} IS NOT NULL AND trim(CAST({self.expr} AS VARCHAR)) <> '' AND "
            f"TRY_CAST({self.expr} AS {target}) IS NULL)"
        )

    @property
    def what(self) -> str:
        return {
            "number": "is not a number",
            "integer": "is not a whole number",
            "time": "is not a date/time",
            "json": "is not valid JSON",
            "finite": "is not a finite number below 10^23 (the ledger's DECIMAL(38,15))",
        }[self.kind]


@dataclass
class Part:
    """One file's (object's, answer's) rows: ``mapped(relation, carry)`` maps ``relation`` (the raw
    rows, or a numbered copy of them) to the target table's columns plus the ``carry`` columns."""

    kind: str  # "file" | "object" | "table": how messages name it
    name: str
    relation: str
    mapped: Callable[[str, tuple[str, ...]], str]
    casts: list[Cast] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)  # target column -> the source's column
    unit: str = "row"  # "row" (data row after the header) or "line"

    def where(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Check:
    column: str
    condition: str  # SQL, true for a bad row
    value: str  # SQL text of the offending value
    reason: str  # SQL text: why it is bad


def text_of(expr: str) -> str:
    return f"COALESCE(CAST({expr} AS VARCHAR), 'NULL')"


def cost_checks(origin: dict[str, str], now: datetime | None = None) -> list[Check]:
    now = now or datetime.now(UTC)
    latest = sql_literal((now + FUTURE_SLACK).isoformat())
    earliest = sql_literal(EARLIEST.isoformat())
    tolerance = f"INTERVAL '{int(PERIOD_TOLERANCE.total_seconds())} seconds'"

    def col(name: str) -> str:
        return f'"{name}"'

    def label(name: str) -> str:
        return f"{name} ({origin[name]})" if origin.get(name) and origin[name] != name else name

    checks = [
        Check(label(c), f"{col(c)} IS NULL", "''", sql_literal("is empty (FOCUS requires a value)"))
        for c in COST_NOT_NULL
    ]
    start, end = col("ChargePeriodStart"), col("ChargePeriodEnd")
    billing_start, billing_end = col("BillingPeriodStart"), col("BillingPeriodEnd")
    for name in ("ChargePeriodStart", "BillingPeriodStart"):
        checks.append(
            Check(
                label(name),
                f"{col(name)} < TIMESTAMPTZ {earliest} OR {col(name)} > TIMESTAMPTZ {latest}",
                text_of(col(name)),
                sql_literal("is not a plausible time (before 2000 or more than a day in the future)"),
            )
        )
    checks += [
        Check(
            label("ChargePeriodEnd"),
            f"{end} < {start}",
            text_of(end),
            f"'is before ChargePeriodStart ' || {text_of(start)}",
        ),
        Check(
            label("BillingPeriodEnd"),
            f"{billing_end} <= {billing_start}",
            text_of(billing_end),
            f"'is not after BillingPeriodStart ' || {text_of(billing_start)}",
        ),
        Check(
            label("ChargePeriodStart"),
            f"COALESCE(\"ChargeClass\", '') <> 'Correction' AND ({start} < {billing_start} - {tolerance} "
            f"OR {end} > {billing_end} + {tolerance})",
            f"{text_of(start)} || ' – ' || {text_of(end)}",
            f"'lies outside its billing period ' || {text_of(billing_start)} || ' – ' || {text_of(billing_end)} "
            f"|| ' (more than {PERIOD_TOLERANCE.days} day; only a Correction may)'",
        ),
        Check(
            label("x_GpuCount"),
            f'"x_GpuCount" < 0 OR "x_GpuCount" > {MAX_GPUS}',
            text_of('"x_GpuCount"'),
            sql_literal(f"is not a GPU count (0–{MAX_GPUS})"),
        ),
    ]
    # the declared domains of the ledger's columns (names that become labels, …), per file and row
    return checks + [
        Check(label(c), condition, domains.shown_sql(c), reason)
        for c, d in domains.DOMAINS.get("cost_line_items", {}).items()
        for condition, reason in d.violation_sql(c, now)
    ]


def message_sql(checks: list[Check]) -> str:
    """The first violated check as one phrase ('column X value 'v' is …'), or NULL."""
    whens = " ".join(
        f"WHEN {c.condition} THEN "
        + (
            f"{sql_literal('column ' + c.column + ' ')} || {c.reason}"
            if c.value == "''"
            else f"{sql_literal('column ' + c.column + ' value ')} || '''' || {c.value} || ''' ' || {c.reason}"
        )
        for c in checks
    )
    return f"CASE {whens} END"


def part_of(checks: list[Check], what: str) -> str:
    pick = {"column": lambda c: sql_literal(c.column), "value": lambda c: c.value, "reason": lambda c: c.reason}[what]
    return "CASE " + " ".join(f"WHEN {c.condition} THEN {pick(c)}" for c in checks) + " END"


def guarded(select: str, index: int, checks: list[Check]) -> str:
    """``select`` with every row checked: a violation raises DuckDB's error() (fail mode)."""
    message = message_sql(checks)
    return (
        f"SELECT * FROM ({select}) WHERE CASE WHEN ({message}) IS NULL THEN true "
        f"ELSE error({sql_literal(f'{MARKER}#{index}#')} || ({message})) END"
    )


def numbered(relation: str) -> str:
    return f"(SELECT *, row_number() OVER () AS __row FROM {relation})"


def _cast_problem(con: duckdb.DuckDBPyConnection, source: str, part: Part) -> str | None:
    if not part.casts:
        return None
    column = "CASE " + " ".join(f"WHEN {c.bad()} THEN {i}" for i, c in enumerate(part.casts)) + " END"
    value = "CASE " + " ".join(f"WHEN {c.bad()} THEN CAST({c.expr} AS VARCHAR)" for c in part.casts) + " END"
    rows = con.execute(
        f"SELECT __row, __c, __v, count(*) OVER () FROM (SELECT __row, {column} AS __c, {value} AS __v "
        f"FROM {numbered(part.relation)}) WHERE __c IS NOT NULL ORDER BY __row LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    row, index, bad_value, count = rows[0]
    cast = part.casts[index]
    more = f" ({count} bad row(s) in all)" if count > 1 else ""
    return f"{source}: {part.where()} {part.unit} {row}: column {cast.label} value {bad_value!r} {cast.what}{more}"


def _check_problem(con: duckdb.DuckDBPyConnection, source: str, part: Part, checks: list[Check]) -> str | None:
    mapped = part.mapped(numbered(part.relation), ("__row",))
    rows = con.execute(
        f"SELECT __row, __m FROM (SELECT __row, {message_sql(checks)} AS __m FROM ({mapped})) "
        f"WHERE __m IS NOT NULL ORDER BY __row LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    return f"{source}: {part.where()} {part.unit} {rows[0][0]}: {rows[0][1]}"


def explain(
    con: duckdb.DuckDBPyConnection, source: str, parts: list[Part], checks: list[list[Check]], exc: BaseException
) -> str | None:
    """After a failed load (the slow path, failures only): which part, row, column and value."""
    text = str(exc)
    marker = re.search(MARKER + r"#(\d+)#(.*)", text)
    try:
        if marker:
            part = parts[int(marker.group(1))]
            found = _check_problem(con, source, part, checks[int(marker.group(1))])
            return found or f"{source}: {part.where()}: {marker.group(2).strip()}"
        parsed = csv_error(text)
        if parsed:
            named = [p for p in parts if parsed[0] and p.relation.find(parsed[0]) >= 0] or parts[:1]
            return read_error(source, named[0].where(), exc) if named else None
        for part in parts:
            found = _cast_problem(con, source, part)
            if found:
                return found
        for part in parts:  # a value the mapping can not convert: the first part whose rows do not map
            try:
                con.execute(
                    f"SELECT count(*) FROM ({part.mapped(part.relation, ())}) AS m WHERE length(CAST(m AS VARCHAR)) > 0"
                ).fetchall()
            except duckdb.Error as unmapped:
                return funnel.load_error(source, part.where(), unmapped)
    except duckdb.Error as again:  # the part does not even read: say so, naming it
        failing = parts[int(marker.group(1))] if marker else parts[0]
        return read_error(source, failing.where(), again)
    return None


def quarantine(
    con: duckdb.DuckDBPyConnection, ctx: IngestContext, parts: list[Part], checks: list[Check]
) -> tuple[list[str], Batch]:
    """skip_rows: each part read once into a numbered temporary table; (the good rows' SELECTs, the
    ``ingest_rejects`` batch holding the others). The rejects of every part read replace that
    part's previous rejects."""
    goods, rejected = [], []
    for i, part in enumerate(parts):
        raw = f"_gf_raw_{ctx.run_id}_{i}"
        try:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {raw} AS SELECT * FROM {numbered(part.relation)}")
        except duckdb.Error as exc:
            raise IngestError(read_error(ctx.source, part.where(), exc)) from None
        bad_cast = " OR ".join(c.bad() for c in part.casts) or "false"
        column = "CASE " + " ".join(f"WHEN {c.bad()} THEN {sql_literal(c.label)}" for c in part.casts) + " END"
        value = "CASE " + " ".join(f"WHEN {c.bad()} THEN CAST({c.expr} AS VARCHAR)" for c in part.casts) + " END"
        what = "CASE " + " ".join(f"WHEN {c.bad()} THEN {sql_literal(c.what)}" for c in part.casts) + " END"
        name = sql_literal(part.name)
        if part.casts:
            rejected.append(
                f'SELECT {name} AS file, __row AS row, {column} AS "column", {value} AS value, '
                f"{what} AS reason FROM {raw} WHERE {bad_cast}"
            )
        good_raw = f"(SELECT * FROM {raw} WHERE NOT ({bad_cast}))"
        mapped = f"_gf_mapped_{ctx.run_id}_{i}"
        try:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {mapped} AS SELECT *, ({message_sql(checks)}) IS NOT NULL "
                f"AS __bad, {part_of(checks, 'column')} AS __column, {part_of(checks, 'value')} AS __value, "
                f"{part_of(checks, 'reason')} AS __reason FROM ({part.mapped(good_raw, ('__row',))})"
            )
        except duckdb.Error as exc:
            raise IngestError(read_error(ctx.source, part.where(), exc)) from None
        goods.append(f"SELECT * EXCLUDE (__row, __bad, __column, __value, __reason) FROM {mapped} WHERE NOT __bad")
        rejected.append(
            f'SELECT {name} AS file, __row AS row, __column AS "column", __value AS value, '
            f"__reason AS reason FROM {mapped} WHERE __bad"
        )
    union = " UNION ALL ".join(f"({r})" for r in rejected)
    rejects = (
        f"SELECT {sql_literal(ctx.source)} AS source, {sql_literal(ctx.run_id)} AS run_id, file, "
        f'CAST(row AS BIGINT) AS row, "column", value, reason, now() AS rejected_at FROM ({union})'
    )
    return goods, rejects_batch(rejects, [p.name for p in parts])


def rejects_batch(data, files: list[str]) -> Batch:
    """Rows for ``ingest_rejects`` replacing the source's previous rejects of ``files``."""
    return Batch(table=REJECTS, data=data, slices=sorted(set(files)), slice_expr='"file"', source_column="source")


def cost_rows(
    ctx: IngestContext, parts: list[Part], wrap: Callable[[str], str] | None = None
) -> tuple[str, Batch | None, Callable[[BaseException], str | None]]:
    """(the SELECT a cost batch loads, the rejects batch or None, the failure explainer) for ``parts``.

    ``wrap`` finishes the union of the parts' rows (enrichment, x_Source, x_IngestRunId)."""
    wrap = wrap or (lambda sql: sql)
    checks_of = [cost_checks(p.origin) for p in parts]
    if on_invalid(ctx) == SKIP_ROWS:
        goods, rejects = [], []
        for part, checks in zip(parts, checks_of):
            good, batch = quarantine(ctx.con, ctx, [part], checks)
            goods += good
            rejects.append(batch.data)
        union = " UNION ALL BY NAME ".join(f"({g})" for g in goods)
        batch = rejects_batch(" UNION ALL ".join(f"({r})" for r in rejects), [p.name for p in parts])
        return wrap(union), batch, lambda exc: None
    union = " UNION ALL BY NAME ".join(
        f"({guarded(p.mapped(p.relation, ()), i, checks)})" for i, (p, checks) in enumerate(zip(parts, checks_of))
    )
    return wrap(union), None, lambda exc: explain(ctx.con, ctx.source, parts, checks_of, exc)
