"""The FinOps Foundation's FOCUS 1.2 conformance rules, run over a FOCUS dataset in DuckDB.

The rules are the validator's own data: ``tests/data/focus-validator/model-1.2.0.1.json`` from PyPI
``focus-validator`` 2.2.1 (MIT, LICENSE beside it). That package needs Python ≥ 3.12 and this
project runs on 3.11, so this module drives the rules file itself: every check function the model
uses compiles to the DuckDB SQL the validator's generators write (``focus_to_duckdb_converter.py``),
and rules are judged the way the validator judges them:

* the graph is every rule reachable from ``CostAndUsage-D-000-M`` through its dependencies and
  ``CheckModelRule`` references (578 rules);
* **not applicable** (the validator's "skipped"): a ``Dynamic`` rule (needs facts outside the data),
  a ``MAY`` / ``OPTIONAL`` rule, a rule whose ``ApplicabilityCriteria`` were not declared (none are,
  as in the validator's default run), ``CheckDecimalValue`` (the validator does not implement it),
  a rule one of whose dependencies is not applicable, a composite all of whose parts are not;
* a leaf's violations are counted under its effective condition: its own ``Condition`` AND those of
  the rules it depends on AND those of the composites that reference it;
* an ``AND`` / ``OR`` of checks inside one requirement is a row-level combination; of
  ``CheckModelRule`` items, a rule-level one (AND: all applicable parts pass; OR: any does).

``tests/test_focus_conformance.py`` checks, where a ≥ 3.12 interpreter with the real validator is
at hand, that the real validator gives the same verdict for every rule.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import duckdb

from gpufinops.warehouse.fetch import scalar

RULES_DIR = Path(__file__).parent / "data" / "focus-validator"
MODEL_PATH = RULES_DIR / "model-1.2.0.1.json"
ROOT_RULE = "CostAndUsage-D-000-M"

_DATA_SIZES = "b|Kb|Mb|Gb|Tb|Pb|Eb|B|KB|MB|GB|TB|PB|EB|Kib|Mib|Gib|Tib|Pib|Eib|KiB|MiB|GiB|TiB|PiB|EiB"
_TIME_ONE = "Year|Month|Day|Hour|Minute|Second"
_TIME_MANY = "Years|Months|Days|Hours|Minutes|Seconds"
_COUNT = r"[A-Za-z][A-Za-z0-9]*(?:\s+[A-Za-z][A-Za-z0-9]*)*"
UNIT_FORMAT = "|".join(
    f"({p})"
    for p in (
        f"^({_DATA_SIZES}|{_TIME_ONE}|{_TIME_MANY}|{_COUNT})$",
        f"^({_DATA_SIZES}|{_COUNT})-({_TIME_MANY})$",
        f"^({_DATA_SIZES}|{_COUNT}|{_TIME_MANY})/({_TIME_ONE})$",
        f"^[0-9]+ ({_DATA_SIZES}|{_TIME_ONE}|{_TIME_MANY}|{_COUNT})$",
        f"^({_DATA_SIZES}|{_COUNT}|{_TIME_MANY})/[0-9]+ ({_TIME_MANY})$",
    )
)
NUMERIC = r"^[+-]?([0-9]*[.])?[0-9]+([eE][+-]?[0-9]+)?$"
DATETIME = r"^[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]Z?$"
TIMESTAMP_TYPES = "('TIMESTAMP', 'TIMESTAMP_NS', 'TIMESTAMP WITH TIME ZONE', 'DATE')"


@dataclass
class Verdict:
    status: str  # pass | fail | n/a | excepted (violations only on rows a documented exception covers)
    reason: str = ""
    violations: int = 0


@dataclass
class Report:
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for v in self.verdicts.values() if v.status == status)

    def failed(self) -> dict[str, Verdict]:
        return {rid: v for rid, v in sorted(self.verdicts.items()) if v.status == "fail"}

    def leaf_failures(self, model: Model) -> dict[str, Verdict]:
        """Failed rules that are not composites (a composite fails because a part does)."""
        return {rid: v for rid, v in self.failed().items() if not model.is_rule_composite(rid)}

    def summary(self) -> str:
        return (
            f"{len(self.verdicts)} rules: {self.count('pass')} pass, {self.count('fail')} fail, "
            f"{self.count('n/a')} not applicable, {self.count('excepted')} excepted"
        )


def _lit(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# The type and format checks: each a predicate of the one column, true on a row that violates it.
COLUMN_VIOLATIONS: dict[str, Callable[[str | None], str]] = {
    "TypeString": lambda col: f"({col} IS NOT NULL AND typeof({col}) != 'VARCHAR')",
    # DECIMAL(p,s) is a decimal (the validator reads DuckDB's typeof)
    "TypeDecimal": lambda col: (
        f"({col} IS NOT NULL AND typeof({col}) NOT LIKE 'DECIMAL%' AND typeof({col}) NOT IN ('DOUBLE', 'FLOAT'))"
    ),
    "TypeDateTime": lambda col: (
        f"({col} IS NOT NULL AND typeof({col}) NOT IN {TIMESTAMP_TYPES} AND NOT "
        f"(typeof({col}) = 'VARCHAR' AND TRY_CAST({col} AS TIMESTAMP) IS NOT NULL))"
    ),
    "FormatNumeric": lambda col: f"({col} IS NOT NULL AND NOT regexp_matches(TRIM({col}::TEXT), {_lit(NUMERIC)}))",
    "FormatString": lambda col: f"({col} IS NOT NULL AND NOT regexp_matches({col}::TEXT, '^[\\x00-\\x7F]*$'))",
    "FormatDateTime": lambda col: (
        f"({col} IS NOT NULL AND typeof({col}) NOT IN {TIMESTAMP_TYPES} AND NOT "
        f"(typeof({col}) = 'VARCHAR' AND regexp_matches({col}::TEXT, {_lit(DATETIME)}) "
        f"AND TRY_CAST({col} AS TIMESTAMP) IS NOT NULL))"
    ),
    "FormatCurrency": lambda col: f"({col} IS NOT NULL AND NOT regexp_matches(TRIM({col}::TEXT), '^[A-Z]{{3}}$'))",
    "FormatKeyValue": lambda col: f"({col} IS NOT NULL AND NOT json_valid(CAST({col} AS VARCHAR)))",
    "FormatUnit": lambda col: f"({col} IS NOT NULL AND NOT regexp_matches({col}, {_lit(UNIT_FORMAT)}))",
}


def _value_check(fn: str, spec: dict, col: str | None, holds: bool) -> str | None:
    """A value check of one column or two: the predicate true on a row where ``spec`` holds (``holds``)
    or where it is violated; a NOT NULL guard where the validator has one; None: not a value check."""
    a = _q(spec["ColumnAName"]) if "ColumnAName" in spec else None
    b = _q(spec["ColumnBName"]) if "ColumnBName" in spec else None
    value = spec.get("Value")
    if fn in ("CheckValue", "CheckNotValue"):
        equals = (fn == "CheckValue") == holds  # the predicate asks that the column is the value
        if value is None:
            return f"{col} IS NULL" if equals else f"{col} IS NOT NULL"
        test = f"{col} {'=' if equals else '<>'} {_lit(str(value))}"
        return f"({col} IS NOT NULL AND {test})" if fn == "CheckNotValue" else test
    if fn in ("CheckSameValue", "CheckNotSameValue"):
        equals = (fn == "CheckSameValue") == holds
        return f"({a} IS NOT NULL AND {b} IS NOT NULL AND {a} {'=' if equals else '<>'} {b})"
    if fn == "CheckGreaterOrEqualThanValue":
        return f"({col} IS NOT NULL AND {col} {'>=' if holds else '<'} {_lit(value)})"
    return None


def _comparison_violation(fn: str, spec: dict, col: str | None) -> str:
    """The value checks (of one column, two, or a product of two): true on a row that violates ``spec``."""
    violated = _value_check(fn, spec, col, holds=False)
    if violated is not None:
        return violated
    if fn == "ColumnByColumnEqualsColumnValue":
        a, b = _q(spec["ColumnAName"]), _q(spec["ColumnBName"])
        r = _q(spec["ResultColumnName"])
        return (
            f"({a} IS NOT NULL AND {b} IS NOT NULL AND {r} IS NOT NULL AND NOT "
            f"(ABS(({a} * {b}) - {r}) <= 1e-9 * GREATEST(ABS({r}), 1)))"
        )
    raise NotImplementedError(f"check function {fn} is not row-level")


class Model:
    """The rules file, its graph, and each check function's SQL."""

    def __init__(self, path: Path = MODEL_PATH) -> None:
        self.rules: dict = json.loads(path.read_text())["ModelRules"]
        with open(RULES_DIR / "currency_codes.csv", newline="") as f:
            self.currencies = sorted(r["currency_codes"] for r in csv.DictReader(f))

    @cached_property
    def reachable(self) -> list[str]:
        seen: list[str] = []
        todo = [ROOT_RULE]
        while todo:
            rid = todo.pop()
            if rid in seen or rid not in self.rules:
                continue
            seen.append(rid)
            todo += self.dependencies(rid) + self.references(rid)
        return sorted(seen)

    def criteria(self, rid: str) -> dict:
        return self.rules[rid]["ValidationCriteria"]

    def dependencies(self, rid: str) -> list[str]:
        return list(self.criteria(rid).get("Dependencies") or [])

    def references(self, rid: str) -> list[str]:
        """Rules named by CheckModelRule items anywhere in the rule's requirement."""
        found: list[str] = []

        def walk(node) -> None:
            if isinstance(node, dict):
                if node.get("CheckFunction") == "CheckModelRule":
                    found.append(node["ModelRuleId"])
                for item in node.get("Items") or []:
                    walk(item)

        walk(self.criteria(rid).get("Requirement") or {})
        return found

    def is_rule_composite(self, rid: str) -> bool:
        return bool(self.references(rid))

    @cached_property
    def referenced_by(self) -> dict[str, list[str]]:
        parents: dict[str, list[str]] = {}
        for rid in self.rules:
            for child in self.references(rid):
                parents.setdefault(child, []).append(rid)
        return parents

    # ---- SQL of one check ------------------------------------------------------------------------

    def violation(self, spec: dict) -> str:
        """A row-level predicate that is true on a row violating ``spec``."""
        fn = spec["CheckFunction"]
        if fn == "AND":
            return "(" + " OR ".join(f"COALESCE({self.violation(i)}, FALSE)" for i in spec["Items"]) + ")"
        if fn == "OR":
            return "(" + " AND ".join(f"COALESCE({self.violation(i)}, FALSE)" for i in spec["Items"]) + ")"
        col = _q(spec["ColumnName"]) if "ColumnName" in spec else None
        if fn in COLUMN_VIOLATIONS:
            return COLUMN_VIOLATIONS[fn](col)
        if fn == "CheckNationalCurrency":
            codes = ", ".join(_lit(c) for c in self.currencies)
            return f"({col} IS NOT NULL AND TRIM({col}::TEXT) NOT IN ({codes}))"
        return _comparison_violation(fn, spec, col)

    def holds(self, spec: dict) -> str | None:
        """A condition: the row-level predicate that is true where ``spec`` holds (None: no filter)."""
        if not spec:
            return None
        fn = spec.get("CheckFunction")
        if fn is None:  # two rules write {"AND": …}: the validator compiles that to no filter, so do we
            return None
        if fn in ("AND", "OR"):
            parts = [p for p in (self.holds(i) for i in spec.get("Items") or []) if p]
            if not parts:
                return "TRUE" if fn == "AND" else "FALSE"
            return "(" + f" {fn} ".join(f"({p})" for p in parts) + ")"
        condition = _value_check(fn, spec, _q(spec["ColumnName"]) if "ColumnName" in spec else None, holds=True)
        if condition is None:
            raise NotImplementedError(f"check function {fn} as a condition")
        return condition


class Run:
    """One evaluation of the model over ``table`` on ``con``."""

    def __init__(
        self,
        model: Model,
        con: duckdb.DuckDBPyConnection,
        table: str,
        criteria: tuple[str, ...] = (),
        exceptions: dict[str, str] | None = None,
    ) -> None:
        self.model, self.con, self.table, self.criteria = model, con, table, set(criteria)
        self.exceptions = exceptions or {}  # rule id -> predicate of the rows excepted from it
        self.columns = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        self.verdicts: dict[str, Verdict] = {}

    def report(self) -> Report:
        for rid in self.model.reachable:
            self.judge(rid)
        return Report({rid: self.verdicts[rid] for rid in self.model.reachable})

    def condition(self, rid: str) -> str | None:
        """Own condition AND the conditions of the rule's dependencies and of composites referencing it."""
        rules = self.model.rules
        sources = [rid] + [d for d in self.model.dependencies(rid) if d in rules]
        sources += [p for p in self.model.referenced_by.get(rid, []) if rules[p].get("Function") == "Composite"]
        parts = [c for c in (self.model.holds(self.model.criteria(s).get("Condition") or {}) for s in sources) if c]
        return " AND ".join(f"({p})" for p in dict.fromkeys(parts)) or None

    def judge(self, rid: str) -> Verdict:
        if rid in self.verdicts:
            return self.verdicts[rid]
        self.verdicts[rid] = Verdict("n/a", "dependency cycle")  # guard; replaced below
        verdict = self._judge(rid)
        self.verdicts[rid] = verdict
        return verdict

    def undeclared(self, rid: str, seen: frozenset = frozenset()) -> list[str]:
        """The applicability criteria, of the rule or of a composite above it, that were not declared."""
        wanted = self.model.rules[rid].get("ApplicabilityCriteria") or []
        if wanted and not self.criteria & set(wanted):
            return list(wanted)
        for parent in self.model.referenced_by.get(rid, []):
            if parent not in seen and (missing := self.undeclared(parent, seen | {rid})):
                return missing
        return []

    def _judge(self, rid: str) -> Verdict:
        rule = self.model.rules[rid]
        criteria = self.model.criteria(rid)
        if rule.get("Type") == "Dynamic":
            return Verdict("n/a", "dynamic: needs facts outside the data")
        if criteria.get("Keyword") in ("MAY", "OPTIONAL"):
            return Verdict("n/a", "MAY: optional")
        missing = self.undeclared(rid)
        if missing:
            return Verdict("n/a", f"applicability criterion not declared: {', '.join(missing)}")
        requirement = criteria.get("Requirement") or {}
        children = self.model.references(rid)
        upstream = [d for d in self.model.dependencies(rid) if d not in children and d in self.model.rules]
        skipped = [d for d in upstream if self.judge(d).status == "n/a"]
        if skipped:
            return Verdict("n/a", f"depends on a rule that is not applicable: {', '.join(skipped)}")
        if children:
            return self._composite(requirement)
        if requirement.get("CheckFunction") == "CheckDecimalValue":
            return Verdict("n/a", "CheckDecimalValue: not implemented by the validator")
        return self._leaf(rid, requirement)

    def _composite(self, requirement: dict) -> Verdict:
        parts = [self.judge(i["ModelRuleId"]) for i in requirement["Items"]]
        applicable = [p for p in parts if p.status != "n/a"]
        if not applicable:
            return Verdict("n/a", "every part is not applicable")
        failed = [p for p in applicable if p.status == "fail"]  # an excepted part counts as holding
        if requirement["CheckFunction"] == "AND":
            return Verdict("fail", "a part failed", len(failed)) if failed else Verdict("pass")
        return Verdict("pass") if len(failed) < len(applicable) else Verdict("fail", "no part holds", len(failed))

    def _leaf(self, rid: str, requirement: dict) -> Verdict:
        fn = requirement["CheckFunction"]
        if fn == "ColumnPresent":
            present = requirement["ColumnName"] in self.columns
            return Verdict("pass") if present else Verdict("fail", f"column {requirement['ColumnName']} missing", 1)
        try:
            violations = self._violations(requirement, self.condition(rid))
            if not violations:
                return Verdict("pass")
            excepted = self.exceptions.get(rid)
            outside = (
                self._violations(requirement, self.condition(rid), f"NOT COALESCE(({excepted}), FALSE)")
                if excepted
                else violations
            )
        except duckdb.Error as exc:
            return Verdict("fail", f"check could not run: {str(exc).splitlines()[0]}", 1)
        if outside:
            return Verdict("fail", self.model.criteria(rid)["MustSatisfy"], outside)
        return Verdict("excepted", f"only on excepted rows ({excepted})", violations)

    def _violations(self, requirement: dict, condition: str | None, rows: str | None = None) -> int:
        """Violations of a leaf ``requirement`` among the rows meeting ``condition`` and ``rows``."""
        filters = [f"({c})" for c in (condition, rows) if c]
        if requirement["CheckFunction"] == "CheckDistinctCount":
            where = f"WHERE {' AND '.join(filters)}" if filters else ""
            a, b = _q(requirement["ColumnAName"]), _q(requirement["ColumnBName"])
            sql = (
                f"SELECT count(*) FROM (SELECT {a}, count(DISTINCT {b}) AS n FROM {self.table} {where} "
                f"GROUP BY {a}) WHERE n <> {int(requirement['ExpectedCount'])}"
            )
        else:
            where = " AND ".join([f"({self.model.violation(requirement)})", *filters])
            sql = f"SELECT count(*) FROM {self.table} WHERE {where}"
        return scalar(self.con.execute(sql), sql)


def validate(
    con: duckdb.DuckDBPyConnection,
    table: str,
    criteria: tuple[str, ...] = (),
    model: Model | None = None,
    exceptions: dict[str, str] | None = None,
) -> Report:
    return Run(model or Model(), con, table, criteria, exceptions).report()
