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
import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal, TypeVar

from gpufinops.ingest.core import bounds as net
from gpufinops.kernel import ranges

# the one way a setting is declared (kernel/options.py), re-exported for the ingestors
from gpufinops.kernel.options import MISSING as MISSING
from gpufinops.kernel.options import conforms as conforms
from gpufinops.kernel.options import default_of as default_of
from gpufinops.kernel.options import describe as describe
from gpufinops.kernel.options import is_numeric as is_numeric
from gpufinops.kernel.options import option as option
from gpufinops.kernel.options import required as _required
from gpufinops.kernel.options import unknown_key

T = TypeVar("T", bound="SourceOptions")


class OptionError(ValueError):
    """A source option that does not fit its declaration: one sentence naming the source and the key."""


class OptionProblem(ValueError):
    """Raised by ``Options.validate()``: ``key`` is at fault because of ``problem``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


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
                raise OptionError(unknown_key(where, name, allowed, f" for source type {source_type}"))
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class OnInvalidOptions(SourceOptions):
    """The option of a source whose rows are checked before the load (``ingest.core.validate``)."""

    on_invalid: Literal["fail", "skip_rows"] = option(
        "fail", 'a row that fails validation: "fail" the load, or "skip_rows" into ingest_rejects'
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransportOptions(SourceOptions):
    """The bounds of a source that reads the network, each configurable per source (``ingest.core.transport``)."""

    connect_timeout_s: float = option(net.CONNECT_TIMEOUT_S, "seconds to open a connection", range=ranges.POSITIVE)
    timeout_s: float = option(
        net.DEADLINE_S, "seconds one request may take in all (connect, headers, body)", range=ranges.POSITIVE
    )
    max_body_mb: float = option(net.MAX_BODY_MB, "MiB one answer's body may hold", range=ranges.POSITIVE)
    max_pages: int = option(net.MAX_PAGES, "pages one listing may read", range=ranges.POSITIVE)
    max_listing_s: float = option(
        net.MAX_LISTING_S, "seconds one listing may page, all its pages", range=ranges.POSITIVE
    )

    def bounds(self) -> net.Bounds:
        return net.Bounds(self.connect_timeout_s, self.timeout_s, self.max_body_mb, self.max_pages, self.max_listing_s)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResourceMapOptions(SourceOptions):
    """The option of a utilisation source whose host names are not the billed resource ids."""

    resource_map: dict[str, str] = option({}, "host → billed ResourceId, where the host name is not the id")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExporterOptions(ResourceMapOptions, OnInvalidOptions, TransportOptions):
    """The options of a Prometheus-format source (a DCGM exporter, a Prometheus server)."""

    resource_label: str = option("instance_id", "the label holding the billed resource id")
    provider_id_label: str = option("provider_id", "the label holding a Kubernetes node's providerID")
    namespace_teams: dict[str, str] = option({}, "Kubernetes namespace → team")
    timeout_s: float = option(
        10.0, "seconds one HTTP request may take in all (connect, headers, body)", range=ranges.POSITIVE
    )
    retries: int = option(3, "retries of a failed request", range=ranges.NON_NEGATIVE)
