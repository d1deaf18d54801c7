"""How every setting is declared: a field of a frozen dataclass, ``option(default, doc, ...)``.

One idiom for the source options (``ingest.core.spec.SourceOptions``), the config sections
(``jobs.config_checks.ConfigSection``: ``[report]``, ``[jobs]``, ``[api]``, …) and the ``[models]``
settings: a field's annotation is its type, ``option()`` gives its default (none: required), a
one-line description, its numeric range (``kernel.ranges``) and, where a type cannot say it, a
``check`` (``check(value, key) -> value``, raising with the section's own words). :class:`Settings`
parses a TOML table into an instance from those declarations alone: the allowed keys (a typo is
named, with a "did you mean"), the types, the ranges; a rule across fields is its ``validated()``.

A leaf module (it imports nothing of gpufinops but the leaf ``kernel.ranges``): every package may
declare settings with it (docs/config.md, "How settings are declared").
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from gpufinops.kernel import ranges
from gpufinops.kernel.ranges import Range

MISSING: Any = dataclasses.MISSING
S = TypeVar("S", bound="Settings")
Check = Callable[[Any, str], Any]  # (value, "section.key") -> the value to keep; raises naming the key


def option(
    default: Any = MISSING,
    doc: str = "",
    *,
    secret: bool = False,
    range: Range | None = None,
    check: Check | None = None,
) -> Any:
    """A declared option: ``default`` (none: required), a one-line ``doc``; ``secret`` keeps it out of reprs;
    ``range``: the values a number may take (default: non-negative, unless a ``check`` has the last word;
    ``kernel.ranges``); ``check``: the value's own rule where the type does not say it all (it returns
    the value to keep, converted).

    A list or table default is given as a tuple / mapping and copied per instance.
    """
    metadata = {"doc": doc, "secret": secret, "range": range, "check": check}
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=metadata, repr=not secret)
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


def required(fld: dataclasses.Field) -> bool:
    return fld.default is MISSING and fld.default_factory is MISSING


def default_of(fld: dataclasses.Field) -> Any:
    if fld.default is not MISSING:
        return fld.default
    factory: Any = fld.default_factory
    return MISSING if factory is MISSING else factory()


def unknown_key(where: str, name: Any, allowed: list[str], what: str = "") -> str:
    """The one sentence for a key no declaration has: the closest allowed key, and all of them."""
    near = difflib.get_close_matches(str(name), allowed, n=1)
    guess = f"did you mean `{near[0]}`? " if near else ""
    return f"{where}.{name}: unknown key{what} ({guess}allowed: {', '.join(allowed)})"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of a config section's settings (a frozen dataclass whose fields are declared with :func:`option`).

    :meth:`parse` reads a TOML table: each key must be a field, each value fit the field's type and
    range, pass its ``check``; a required field must be there; then :meth:`validated` applies the rules
    across fields. ``error`` is the exception raised (one sentence naming ``where.key``)."""

    error: ClassVar[type[Exception]] = ValueError
    others_allowed: ClassVar[bool] = False  # keys of other declarations share the table ([models])

    @classmethod
    def declared(cls) -> tuple[dataclasses.Field, ...]:
        """The fields that are config keys (a field marked ``internal`` in its metadata is none)."""
        return tuple(f for f in dataclasses.fields(cls) if not f.metadata.get("internal"))

    @classmethod
    def ranges(cls) -> dict[str, Range]:
        """The declared range of each numeric field (non-negative where none is declared and no check is)."""
        hints = typing.get_type_hints(cls)
        return {
            f.name: ranges.declared(f.metadata)
            for f in cls.declared()
            if is_numeric(hints[f.name]) and (f.metadata.get("range") is not None or f.metadata.get("check") is None)
        }

    @classmethod
    def message(cls, where: str, key: str, problem: str) -> str:
        return f"{where}.{key}: {problem}"

    @classmethod
    def fail(cls, where: str, key: str, problem: str) -> Exception:
        return cls.error(cls.message(where, key, problem))

    @classmethod
    def parse(cls: type[S], table: Any, where: str) -> S:
        """The instance for ``table`` (None: every default), or ``error`` naming ``where.key``."""
        table = {} if table is None else table
        if not isinstance(table, dict):
            raise cls.error(f"{where}: must be a table")
        declared = {f.name: f for f in cls.declared()}
        if not cls.others_allowed:
            for name in table:  # a misspelt key first: it is why a required one looks missing
                if name not in declared:
                    raise cls.error(unknown_key(where, name, sorted(declared)))
        hints = typing.get_type_hints(cls)
        present = [name for name in declared if name in table]
        limits = cls.ranges()
        for name in present:  # ranges before the rest, as every section has always checked them
            if name in limits and (problem := limits[name].problem(table[name])):
                raise cls.fail(where, name, problem)
        values = {name: cls._value(table[name], hints[name], declared[name], where) for name in present}
        for name, fld in declared.items():
            if required(fld) and name not in table:
                if (check := fld.metadata.get("check")) is not None:
                    check(None, f"{where}.{name}")  # a required key's check words its absence (given None)
                raise cls.fail(where, name, "missing required key")
        return cls(**values).validated(frozenset(present), where)

    @classmethod
    def _value(cls, value: Any, hint: Any, fld: dataclasses.Field, where: str) -> Any:
        check = fld.metadata.get("check")
        if check is not None:
            return check(value, f"{where}.{fld.name}")
        if not conforms(value, hint):
            raise cls.fail(where, fld.name, f"must be {describe(hint)}, not {value!r}")
        if get_origin(hint) is tuple and isinstance(value, list):
            return tuple(value)
        return value

    def validated(self: S, given: frozenset[str], where: str) -> S:
        """Rules across fields (``given``: the keys the table set); returns the instance to keep."""
        return self


def is_numeric(tp: Any) -> bool:
    """An int or float option (Optional too): one whose declared range is checked."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return bool(args) and all(is_numeric(a) for a in args)
    return tp in (int, float)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def conforms(value: Any, tp: Any) -> bool:
    """Whether a TOML value fits the annotation ``tp`` (str: a non-blank string; float takes an int;
    a list may be empty unless it stands for "one or more names", ``str | list[str]``)."""
    origin = get_origin(tp)
    if tp is Any:
        return True
    if _is_union(tp):
        if value == [] and str in get_args(tp):  # "a name or a list of names" (path, targets): one at least
            return False
        return any(conforms(value, arg) for arg in get_args(tp))
    if tp is type(None):
        return value is None
    if origin is Literal:
        return value in get_args(tp)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str) and bool(value.strip())
    if origin in (list, tuple):
        (item, *_rest) = get_args(tp) or (Any,)
        return isinstance(value, list) and all(conforms(v, item) for v in value)
    if origin in (dict, Mapping):
        _, item = get_args(tp) or (str, Any)
        return isinstance(value, dict) and all(isinstance(k, str) and conforms(v, item) for k, v in value.items())
    return isinstance(value, tp) if isinstance(tp, type) else True


def describe(tp: Any) -> str:
    """What a value of ``tp`` is, in words: ``a string or a list of strings``."""
    if _is_union(tp):
        return " or ".join(describe(a) for a in get_args(tp) if a is not type(None))
    origin = get_origin(tp)
    if origin is Literal:
        quoted = [f'"{v}"' if isinstance(v, str) else repr(v) for v in get_args(tp)]
        return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]
    if origin in (list, tuple):
        (item, *_rest) = get_args(tp) or (Any,)
        return "a list of " + _plural(describe(item))
    if origin in (dict, Mapping):
        _, item = get_args(tp) or (str, Any)
        return "a table of " + _plural(describe(item))
    return {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}.get(tp, "a value")


def _plural(words: str) -> str:
    for single, plural in (
        ("a string", "strings"),
        ("a whole number", "whole numbers"),
        ("a number", "numbers"),
        ("a value", "values"),
        ("true or false", "booleans"),
    ):
        if words == single:
            return plural
    return words.removeprefix("a ").removeprefix("an ") + "s" if not words.startswith('"') else words


@dataclasses.dataclass(frozen=True)
class Section:
    """A top-level config section a package contributes to the loader (``jobs.config``): the ``Config``
    attribute it fills, how it is parsed, and the :class:`Settings` it is made of. The loader imports the
    contributing module by name and reads its ``SECTION``: it never imports a feature's code itself."""

    attr: str  # cfg.<attr>
    parse: Callable[..., Any]  # parse(*tables, **needs): each table's value as written (None when absent)
    declares: tuple[type, ...]  # the settings classes it is made of (the tests walk their declarations)
    tables: tuple[str, ...] = ()  # the TOML tables it reads (default: its attr)
    arrays: tuple[str, ...] = ()  # those of ``tables`` that are arrays of tables ([[budgets]])
    needs: tuple[str, ...] = ()  # sections parsed first, passed to parse by keyword (their attr)

    @property
    def names(self) -> tuple[str, ...]:
        return self.tables or (self.attr,)
