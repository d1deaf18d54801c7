"""Typed source options: each ingestor declares a frozen ``Options`` dataclass, the code reads it.

Like dlt's source arguments and the Meltano SDK's ``config_jsonschema``: a field's type, default and
one-line description (``option(...)``) are the whole declaration. From it the config validator
derives the allowed and required keys and checks each value's type (one sentence naming the source
and the key); the ingestor reads the parsed instance (``ctx.options.path``) instead of a dict;
``python -m gpufinops.ingest.core.docs`` prints the source table of docs/sources/index.md. A rule a type cannot
express (one of ``path`` or ``bucket``) is the ``validate()`` method of the Options, raising :class:`OptionProblem`.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from gpufinops.warehouse import ranges
from gpufinops.warehouse.ranges import Range

T = TypeVar("T", bound="SourceOptions")
MISSING: Any = dataclasses.MISSING


class OptionError(ValueError):
    """A source option that does not fit its declaration: one sentence naming the source and the key."""


class OptionProblem(ValueError):
    """Raised by ``Options.validate()``: ``key`` is at fault because of ``problem``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def option(default: Any = MISSING, doc: str = "", *, secret: bool = False, range: Range | None = None) -> Any:
    """A declared option: ``default`` (none: required), a one-line ``doc``; ``secret`` keeps it out of reprs;
    ``range``: the values a number may take (default: non-negative; ``warehouse.ranges``).

    A list or table default is given as a tuple / mapping and copied per instance.
    """
    metadata = {"doc": doc, "secret": secret, "range": range or ranges.NON_NEGATIVE}
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=metadata, repr=not secret)
    return dataclasses.field(default=default, metadata=metadata, repr=not secret)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """Base of every ingestor's ``Options``: fields are its config keys (besides type/schedule/enabled)."""

    def validate(self) -> None:
        """Cross-field rules a type cannot express; raise :class:`OptionProblem`."""

    def window_lookback(self, declared: timedelta) -> timedelta:
        """The restatement lookback the runner subtracts from the saved cursor (an option may set it)."""
        return declared

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)

    @classmethod
    def documented_fields(cls) -> list[dataclasses.Field]:
        """The fields in reading order: the class's own first, then each base's (the common ones last)."""
        by_name = {f.name: f for f in cls.fields()}
        ordered: list[dataclasses.Field] = []
        for klass in cls.__mro__:
            for name in vars(klass).get("__annotations__", {}):
                if name in by_name and by_name[name] not in ordered:
                    ordered.append(by_name[name])
        return ordered

    @classmethod
    def required_keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in cls.fields() if _required(f))

    @classmethod
    def optional_keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in cls.fields() if not _required(f))

    @classmethod
    def parse(
        cls: type[T], table: Mapping[str, Any], where: str, source_type: str, common: frozenset[str] = frozenset()
    ) -> T:
        """The instance for ``table`` (a source's config table, ``common`` keys ignored), or
        :class:`OptionError` naming ``where.key``: a missing required key, an unknown key, a wrong type."""
        hints = typing.get_type_hints(cls)
        declared = {f.name: f for f in cls.fields()}
        allowed = sorted(set(declared) | set(common))
        for name in table:  # a misspelt key first: it is why a required one looks missing
            if name not in common and name not in declared:
                near = difflib.get_close_matches(name, allowed, n=1)
                guess = f"did you mean `{near[0]}`? " if near else ""
                raise OptionError(
                    f"{where}.{name}: unknown key for source type {source_type} ({guess}allowed: {', '.join(allowed)})"
                )
        values: dict[str, Any] = {}
        for name, value in table.items():
            if name in common:
                continue
            if not conforms(value, hints[name]):
                raise OptionError(f"{where}.{name}: must be {describe(hints[name])}, not {value!r}")
            if (
                value is not None
                and is_numeric(hints[name])
                and (problem := ranges.declared(declared[name].metadata).problem(value))
            ):
                raise OptionError(f"{where}.{name}: {problem}")
            values[name] = value
        for name, fld in declared.items():
            if _required(fld) and name not in table:
                raise OptionError(f"{where}.{name}: missing required key for source type {source_type}")
        instance = cls(**values)
        try:
            instance.validate()
        except OptionProblem as problem:
            raise OptionError(f"{where}.{problem.key}: {problem.problem}") from None
        return instance

    def given(self) -> dict[str, Any]:
        """The options as a plain dict (for helpers that pass them on, e.g. to a sub-parser)."""
        return {f.name: getattr(self, f.name) for f in self.fields()}


def choices_problem(key: str, value: str | list[str], known: tuple[str, ...]) -> OptionProblem | None:
    """Why ``value`` (one name or a list) is not a choice among ``known`` (None: it is)."""
    wanted = [value] if isinstance(value, str) else value
    if not wanted or any(v not in known for v in wanted):
        return OptionProblem(key, f"must list some of {', '.join(known)} (got {value!r})")
    return None


def is_numeric(tp: Any) -> bool:
    """An int or float option (Optional too): one whose declared range is checked."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return bool(args) and all(is_numeric(a) for a in args)
    return tp in (int, float)


def _required(fld: dataclasses.Field) -> bool:
    return fld.default is MISSING and fld.default_factory is MISSING


def default_of(fld: dataclasses.Field) -> Any:
    if fld.default is not MISSING:
        return fld.default
    factory: Any = fld.default_factory
    return MISSING if factory is MISSING else factory()


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class OnInvalidOptions(SourceOptions):
    """The option of a source whose rows are checked before the load (``ingest.core.validate``)."""

    on_invalid: Literal["fail", "skip_rows"] = option(
        "fail", 'a row that fails validation: "fail" the load, or "skip_rows" into ingest_rejects'
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceMapOptions(SourceOptions):
    """The option of a utilisation source whose host names are not the billed resource ids."""

    resource_map: dict[str, str] = option({}, "host → billed ResourceId, where the host name is not the id")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExporterOptions(ResourceMapOptions, OnInvalidOptions):
    """The options of a Prometheus-format source (a DCGM exporter, a Prometheus server)."""

    resource_label: str = option("instance_id", "the label holding the billed resource id")
    provider_id_label: str = option("provider_id", "the label holding a Kubernetes node's providerID")
    namespace_teams: dict[str, str] = option({}, "Kubernetes namespace → team")
    timeout_s: float = option(10.0, "HTTP timeout per request, seconds", range=ranges.POSITIVE)
    retries: int = option(3, "retries of a failed request", range=ranges.NON_NEGATIVE)
