"""The ingestor registry: each source type declares its metadata once, here or in its module.

Like Cloud Custodian's ``@resources.register``: an ingestor class carries a ``meta`` spec holding
every fact of its type (target table, key, cursor, lookback, schedule, typed ``Options``, provider,
extra, freshness, doctor check, init question, description; see ``IngestorMeta``). The code reads
it: the config validator checks a source's table against the Options; the runner computes each
run's ``LoadWindow`` from the cursor, lookback and time range; the scheduler takes the schedule;
``gpufinops doctor`` the extra and check, ``gpufinops init`` the question, the freshness table the
lag (the runner records it on each run in ``ingest_runs``, where the warehouse reads it); ``python -m
gpufinops.ingest.core.docs`` prints the source table of docs/sources/index.md.
A ``Registry`` is a plain object: tests build their own instead of sharing global state.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, Protocol

import duckdb
import pyarrow as pa

from gpufinops.ingest.core.spec import SourceOptions
from gpufinops.kernel.declared import modules_declaring
from gpufinops.warehouse.freshness import Freshness  # re-exported: a spec module imports its facts from here


class IngestError(Exception):
    """Bad input or an unusable source: one sentence naming the source, file or setting at fault."""


class ConfigProblem(IngestError):
    """A setting the data shows is missing or wrong (e.g. ``model`` for a server that labels none): the
    run fails like any other, and the command exits 2, as for a config error, since only the config fixes it."""


@dataclass(frozen=True, kw_only=True)
class Cursor:
    """How a source resumes, read by the runner (like dlt's ``Incremental``): what its state remembers
    between runs, and which state item, if any, holds the time the next window starts from.

    ``resume_item`` None: the cursor is not a time (file fingerprints, a digest): the runner computes
    no window start and the ingestor compares what it finds with its state itself.
    """

    remembers: str  # what the state holds, in words (the docs' cursor column)
    resume_item: str | None  # the state item holding the time the next load resumes from

    def resume_from(self, state: Mapping[str, Any], lookback: timedelta) -> datetime | None:
        """The window's start: the saved time minus ``lookback``, or None (no time saved yet, or none kept)."""
        saved = state.get(self.resume_item) if self.resume_item else None
        return datetime.fromisoformat(str(saved)) - lookback if saved else None


@dataclass(frozen=True, kw_only=True)
class Extra:
    """The pip extra (pyproject's optional-dependencies) a source's API calls need.

    ``unless``: an option that, when set, makes the source read files instead (no extra needed),
    e.g. ``aws_cur``'s ``path``.
    """

    name: str
    unless: str | None

    def needed(self, options: Any) -> str | None:
        return None if self.unless and getattr(options, self.unless, None) else self.name


TRANSPORT_CLIENTS = ("http", "boto3", "google", "azure")  # what makes the requests: a Transport's client


@dataclass(frozen=True, kw_only=True)
class Transport:
    """A spec's network reads (``IngestorMeta.transport``): how the conformance suite reaches it.

    ``client``: what makes the requests (``http``, ``boto3``, ``google``, ``azure``); ``endpoint``: the option
    naming the server (a loopback server in the tests); ``paged``: whether it follows page tokens;
    ``unless``: an option that, set, makes the source read files instead (no network call).
    """

    client: str
    endpoint: str
    paged: bool
    unless: str | None


@dataclass(frozen=True, kw_only=True)
class InitQuestion:
    """One question ``gpufinops init`` asks for a source (and the flag that answers it in scripts):
    the answer is the value of ``option`` in a ``[sources.<section>]`` table of this type."""

    flag: str  # the command-line flag, as an argparse dest (``--my-flag`` is ``my_flag``)
    question: str  # asked on a terminal; Enter skips the source
    option: str  # the Options key the answer sets
    section: str  # the ``[sources.<section>]`` name written


@dataclass(frozen=True, kw_only=True)
class IngestorMeta:
    """Every fact of a source type, declared once in its module; ``tests/test_source_specs.py`` walks
    every registered type and fails on one missing or invalid. No fact has a default: a spec states
    each, ``None`` where the fact does not apply (said per field)."""

    name: str  # the config `type`
    target_table: str  # warehouse table the rows land in
    key: tuple[str, ...]  # columns unique within the table for one source
    slice_expr: str  # SQL expression whose values identify a replaced slice
    source_column: str | None  # column holding the configured source name (None: a reference table without one)
    cursor: Cursor | None  # how a run resumes (None: every run is a full load)
    lookback: timedelta  # restatement window re-read on every run (an option may override it)
    default_schedule: str  # cron (5 fields), overridable per source in config
    options: type[SourceOptions]  # the config keys: their types, defaults and descriptions
    description: str  # what it reads, for the docs' source table (docs/sources/index.md)
    time_range: bool  # honours --since/--until (others load incrementally regardless)
    # The provider code of what it reads (kernel/providers.py PROVIDERS), None: any provider's
    # data, which names its own (FOCUS files, GPU metrics of any machine).
    provider: str | None
    extra: Extra | None  # the pip extra its API calls need (None: it reads files or plain HTTP)
    # Its network reads (ingest.core.transport bounds them; tests/test_conformance_network.py drives each
    # declared one through loopback servers that misbehave). None: it reads local files only, no network.
    transport: Transport | None
    freshness: Freshness  # the kind of data it holds and how late it normally is (warehouse/freshness.py)
    # ``gpufinops doctor``'s reachability check, called with (SourceConfig, base_dir, timeout): a built-in's is
    # defined in its room's ``doctor.py`` (ingest/core/doctor.py), a plug-in may name it "module:function".
    # None: the source reaches nothing.
    doctor: Callable[..., Any] | str | None  # ingest.core.doctor.Check (not imported: its helpers import this)
    # What ``gpufinops init`` offers: a question it asks and writes generically, the flags of
    # init's own section that writes this type (interfaces/init_render.py), or None: init does not offer it.
    init: InitQuestion | tuple[str, ...] | None

    def parse_options(self, table: Mapping[str, Any], where: str, common: frozenset[str] = frozenset()) -> Any:
        """The source's ``Options`` instance for its config ``table`` (``where``: the table's config key),
        or OptionError naming the key (see ``SourceOptions.parse``)."""
        return self.options.parse(table, where, self.name, common)


@dataclass(frozen=True)
class LoadWindow:
    """The times one run loads, computed once by the runner from the spec and the command line.

    ``ranged``: ``--since``/``--until`` chose the window (a reload that does not move the cursor);
    else ``since`` is the saved cursor minus the lookback, or None (no cursor yet, a full refresh,
    or a source whose cursor is not a time): the ingestor loads from its own start (its backfill).
    """

    since: datetime | None = None
    until: datetime | None = None
    ranged: bool = False
    full_refresh: bool = False

    def holds_period(self, start: datetime) -> bool:
        """Whether a billing period starting at ``start`` overlaps [the month of ``since``, ``until``):
        cost sources reload whole billing periods (a provider restates a month as a whole)."""
        if self.until is not None and start >= self.until:
            return False
        return self.since is None or start >= self.since.replace(day=1, hour=0, minute=0, second=0, microsecond=0)

    def whole_hours(self, now: datetime, backfill: timedelta) -> tuple[datetime, datetime]:
        """[start, end) in whole UTC hours: to the last complete hour (or ``until``), from ``since``,
        else ``backfill`` before the end (an hourly metrics source's first run)."""
        end = _hour(self.until) if self.until else _hour(now)  # the current, incomplete hour waits
        return (_hour(self.since) if self.since else end - backfill), end


def _hour(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass
class Batch:
    """Rows for one table, replacing the (source, slice) pairs listed in ``slices``.

    ``data`` is an Arrow table / record batch reader in the table's schema, or a SQL SELECT that
    DuckDB runs inside the load transaction (so a large file streams straight into the table).
    """

    table: str
    data: pa.Table | pa.RecordBatchReader | str | None  # None: delete the slices, insert nothing
    slices: list[Any]
    params: list[Any] = field(default_factory=list)
    # Called when the load fails (e.g. a value that does not cast): returns one sentence naming
    # the file, column and value at fault, or None to report the database's own error.
    diagnose: Callable[[Exception], str | None] | None = None
    # The slice expression and owner column of this batch's table when they are not the ingestor's
    # own (e.g. a metrics source's attribution_rules batch, sliced by source).
    slice_expr: str | None = None
    source_column: str | None = None
    # Where the rows came from (a file, an object, an API call): an error loading them names it.
    context: str | None = None
    # The columns naming a row in an error when this batch's table is not the ingestor's own.
    key: tuple[str, ...] | None = None
    # Whether its rows count as the source's rows in the ledger (False: rows beside them, e.g. the
    # snapshots and measured hours of a storage inventory, whose volumes are counted).
    counted: bool = True


@dataclass
class FetchResult:
    batches: list[Batch]
    state: dict[str, Any]  # new incremental state, saved in the load's transaction
    watermark: str | None = None  # human-readable progress mark for the ledger
    skipped_reason: str | None = None  # set when there was nothing new to load

    @classmethod
    def unchanged(cls, state: dict[str, Any], reason: str, batches: list[Batch] | None = None) -> FetchResult:
        """A run that found nothing new (``reason``): the state and its watermark kept, no batch but ``batches``
        (e.g. attribution rules a metrics source reloads every run)."""
        return cls(batches or [], state, watermark=state.get("watermark"), skipped_reason=reason)


@dataclass
class IngestContext:
    source: str  # configured source name
    options: Any  # the source's parsed ``Options`` (its ingestor's meta.options)
    con: duckdb.DuckDBPyConnection  # the run's warehouse connection (for reading files via SQL)
    state: dict[str, Any]  # state saved by the previous successful run
    run_id: str
    team_tag_keys: tuple[str, ...] = ()
    window: LoadWindow = LoadWindow()  # what to load, computed once by the runner
    base_dir: str | None = None  # relative paths in options are relative to this (the config's folder)


class Ingestor(Protocol):
    meta: ClassVar[IngestorMeta]

    def fetch(self, ctx: IngestContext) -> FetchResult: ...


class Registry:
    def __init__(self) -> None:
        self._ingestors: dict[str, type[Ingestor]] = {}

    def register(self, cls: type[Ingestor]) -> type[Ingestor]:
        name = cls.meta.name
        if name in self._ingestors:
            raise ValueError(f"ingestor type {name!r} registered twice")
        self._ingestors[name] = cls
        return cls

    def get(self, name: str) -> type[Ingestor]:
        try:
            return self._ingestors[name]
        except KeyError:
            raise KeyError(f"unknown source type {name!r} (known: {', '.join(self.names())})") from None

    def names(self) -> list[str]:
        return sorted(self._ingestors)

    def __contains__(self, name: object) -> bool:
        return name in self._ingestors

    def __iter__(self) -> Iterator[type[Ingestor]]:
        return iter(self._ingestors[n] for n in self.names())


INGEST_ROOT = Path(__file__).resolve().parents[1]  # the ingest package's folder


def builtin_modules(root: Path = INGEST_ROOT, package: str = "gpufinops.ingest") -> tuple[str, ...]:
    """The modules under ``root`` that declare ``INGESTORS`` (a line starting ``INGESTORS``): a new
    source's module is found where it lies, no list to add it to (``kernel.declared``, the discovery
    the model registry uses too). Read as text, imported only by ``default_registry``."""
    return modules_declaring("INGESTORS", root, package)


def default_registry() -> Registry:
    """A registry of every built-in ingestor (modules imported lazily: no cloud SDK at import)."""
    registry = Registry()
    for module_name in builtin_modules():
        module = importlib.import_module(module_name)
        for cls in module.INGESTORS:
            registry.register(cls)
    return registry
