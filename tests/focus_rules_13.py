"""The FOCUS 1.3 requirements model's rules for what 1.3 adds, run by the 1.2 rules runner.

The rules are ``tests/data/focus-spec/model-1.3-allocation.json``: the FOCUS 1.3 release's
requirements model rules (FOCUS_Spec ``specification/requirements_model/releases/1.3/model_rules``)
for the split cost allocation columns and attribute, HostProviderName, ContractApplied and the
1.3 column-presence rules, rule ids, check functions, conditions, dependencies and keywords as the
model writes them (SOURCE.md beside it). They run through :mod:`tests.focus_rules` unchanged in
its judgement (dynamic, MAY and undeclared-criterion rules are not applicable, composites and
effective conditions as there); this module adds:

* the roots: every composite of the extract that no other rule references (the model's own root,
  ``CAU-CostAndUsage-D-000-M``, references the 1.2-era column rules too, which the extract leaves
  to the 1.2 model);
* a rule the extract does not hold (the AllocatedResourceName and AllocatedTags column rules,
  ContractAppliedObject) is not applicable, with that reason;
* the JSON check functions the 1.3 model introduces, per element of ``$.Elements[*]``.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import duckdb

from tests import focus_rules
from tests.focus_rules import NUMERIC, UNIT_FORMAT, Report, Run, Verdict, _lit, _q

MODEL_13_PATH = Path(__file__).parent / "data" / "focus-spec" / "model-1.3-allocation.json"
SPLIT = "DATA_GENERATOR_SPLIT_COST_ALLOCATION_SUPPORTED"
NOT_IN_EXTRACT = "not in the vendored 1.3 extract"
_ELEMENTS = "$.Elements[*]"
_JSON_TYPES = {"Array": "('ARRAY')", "Object": "('OBJECT')", "Decimal": "('DOUBLE', 'UBIGINT', 'BIGINT')"}


def _elements(col: str, path: str, test: str) -> str:
    """A row predicate: some element at ``path`` (``$.Elements[*]`` or ``$.Elements[*].Key``) fails ``test``
    (a SQL expression of ``e``, the element, and ``k``, the key's JSON path inside it or '$')."""
    if not path.startswith(_ELEMENTS):
        raise NotImplementedError(f"JSON path {path}")
    key = "$" + path[len(_ELEMENTS) :]
    test = test.replace("{k}", _lit(key))
    return f"({col} IS NOT NULL AND coalesce(list_bool_or(list_transform(json_extract(CAST({col} AS VARCHAR), {_lit(_ELEMENTS)}), lambda e: NOT coalesce({test}, FALSE))), FALSE))"


class Model13(focus_rules.Model):
    def __init__(self, path: Path = MODEL_13_PATH) -> None:
        super().__init__(path)
        self.files = json.loads(path.read_text())["Files"]

    @cached_property
    def roots(self) -> list[str]:
        referenced = {child for rid in self.rules for child in self.references(rid)}
        referenced |= {d for rid in self.rules for d in self.dependencies(rid)}
        return sorted(rid for rid in self.rules if rid not in referenced)

    @cached_property
    def reachable(self) -> list[str]:
        seen: set[str] = set()
        todo = list(self.roots)
        while todo:
            rid = todo.pop()
            if rid in seen:
                continue
            seen.add(rid)
            if rid in self.rules:
                todo += self.dependencies(rid) + self.references(rid)
        return sorted(seen)

    def violation(self, spec: dict) -> str:
        fn = spec["CheckFunction"]
        col = _q(spec["ColumnName"]) if "ColumnName" in spec else ""
        path = spec.get("Path", "$")
        if fn == "FormatJSON":  # JsonObjectFormat: a JSON object
            return f"({col} IS NOT NULL AND NOT coalesce(json_valid(CAST({col} AS VARCHAR)) AND json_type(CAST({col} AS VARCHAR)) = 'OBJECT', FALSE))"
        if fn == "JSONCheckPathType" and path == "$.Elements":
            return f"({col} IS NOT NULL AND coalesce(json_type(CAST({col} AS VARCHAR), '$.Elements'), '') NOT IN {_JSON_TYPES[spec['ExpectedType']]})"
        if fn == "JSONCheckPathType":
            return _elements(col, path, f"json_type(e, {{k}}) IN {_JSON_TYPES[spec['ExpectedType']]}")
        if fn == "JSONCheckPathKeyExists":
            return _elements(col, path, "json_exists(e, {k})")
        if fn == "JSONCheckPathKeyValueFormat":  # an object whose values are not objects (KeyValueFormat)
            nested = "list_bool_or(list_transform(json_keys(e), lambda n: json_type(json_extract(e, '$.\"' || n || '\"')) = 'OBJECT'))"
            return _elements(col, path, f"json_type(e) = 'OBJECT' AND NOT coalesce({nested}, FALSE)")
        if fn == "JSONCheckPathKeyStartsWith":
            ignore = ", ".join(_lit(k) for k in spec.get("IgnoreKeys") or []) or "NULL"
            bad = f"list_bool_or(list_transform(json_keys(e), lambda n: NOT starts_with(n, {_lit(spec['Prefix'])}) AND n NOT IN ({ignore})))"
            return _elements(col, path, f"NOT coalesce({bad}, FALSE)")
        if fn == "JSONCheckPathNumericFormat":
            return _elements(
                col,
                path,
                f"NOT json_exists(e, {{k}}) OR regexp_matches(trim(json_extract_string(e, {{k}})), {_lit(NUMERIC)})",
            )
        if fn == "JSONCheckPathUnitFormat":
            return _elements(
                col,
                path,
                f"NOT json_exists(e, {{k}}) OR regexp_matches(json_extract_string(e, {{k}}), {_lit(UNIT_FORMAT)})",
            )
        return super().violation(spec)

    def holds(self, spec: dict) -> str | None:
        if spec.get("CheckFunction") == "JSONCheckPathKeyExists":
            return f"NOT {self.violation(spec)}"
        return super().holds(spec)


class Run13(Run):
    def _judge(self, rid: str) -> Verdict:
        if rid not in self.model.rules:
            return Verdict("n/a", NOT_IN_EXTRACT)
        return super()._judge(rid)


def validate(
    con: duckdb.DuckDBPyConnection,
    table: str,
    criteria: tuple[str, ...] = (SPLIT,),
    model: Model13 | None = None,
    exceptions: dict[str, str] | None = None,
) -> Report:
    return Run13(model or Model13(), con, table, criteria, exceptions).report()
