"""Every fact of a source type is on its spec, and the code takes it from there.

Like Cloud Custodian's ``PolicyMetaLint``: ``spec_problems`` walks every registered source type and
names each missing or invalid fact (an extra pyproject does not declare, a lag that is not positive,
a provider that is not a provider code, no doctor check where the source reaches the network, …).
Then a dummy source declared in one module (tests/dummy_source.py, its fixture in
tests/data/dummy_source/) is registered, and the runner, ``gpufinops doctor``, ``gpufinops init``,
the freshness table and the docs generator all take it from its spec, no other file edited.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import io
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from gpufinops.ingest.core import docs, extras
from gpufinops.ingest.core.registry import (
    TRANSPORT_CLIENTS,
    Cursor,
    Extra,
    Freshness,
    IngestorMeta,
    InitQuestion,
    Registry,
    Transport,
    builtin_modules,
    default_registry,
)
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.core.spec import SourceOptions, TransportOptions
from gpufinops.interfaces import cli_parser, doctor_sources, init_choices, init_cmd, init_render
from gpufinops.jobs.config import parse_source
from gpufinops.kernel import providers
from gpufinops.warehouse import freshness, reference, schema
from tests import dummy_source

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL_DEPENDENCIES = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
NETWORK_OPTIONS = {"url", "targets", "endpoint", "endpoint_url", "bucket", "project", "region", "regions"}
DUMMY_CSV = Path(__file__).parent / "data" / "dummy_source" / "bands.csv"


def _init_flags() -> set[str]:
    parser = argparse.ArgumentParser()
    init_cmd.add_parser(parser.add_subparsers(), asked=[])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest for a in sub.choices["init"]._actions}


Problem = tuple[str, str]  # (the fact, why it is wrong)


def _table_problems(meta: IngestorMeta) -> list[Problem]:
    """What it loads: a warehouse table, its key and source column among the table's columns."""
    out = []
    table = schema.TABLES.get(meta.target_table)
    columns = {f.name for f in table.schema} if table else set()
    if table is None:
        out.append(("target_table", f"{meta.target_table!r} is not a warehouse table"))
    if not meta.key or not set(meta.key) <= columns:
        out.append(("key", f"{meta.key} is not a set of {meta.target_table} columns"))
    if meta.source_column is not None and meta.source_column not in columns:
        out.append(("source_column", f"{meta.source_column!r} is not a {meta.target_table} column"))
    return out


def _shape_problems(meta: IngestorMeta) -> list[Problem]:
    """When and how far, its options, description and provider: each of the type it must be."""
    checks = [
        (
            "cursor",
            meta.cursor is not None and (not isinstance(meta.cursor, Cursor) or not meta.cursor.remembers),
            "is neither None nor a Cursor saying what it remembers",
        ),
        (
            "lookback",
            not isinstance(meta.lookback, timedelta) or meta.lookback < timedelta(0),
            "is not a timedelta of at least 0",
        ),
        (
            "default_schedule",
            len(meta.default_schedule.split()) != 5,
            f"{meta.default_schedule!r} is not a 5-field cron",
        ),
        (
            "options",
            not (isinstance(meta.options, type) and issubclass(meta.options, SourceOptions)),
            "is not a SourceOptions class",
        ),
        ("description", not meta.description.strip(), "is empty (the docs' source table shows it)"),
        ("time_range", not isinstance(meta.time_range, bool), "is not a bool"),
        (
            "provider",
            meta.provider is not None and meta.provider not in providers.PROVIDERS,
            f"{meta.provider!r} is not one of {sorted(providers.PROVIDERS)} (or None: any provider)",
        ),
    ]
    return [(fact, why) for fact, wrong, why in checks if wrong]


def _extra_problems(meta: IngestorMeta, option_names: set[str]) -> list[Problem]:
    if meta.extra is None:
        return []
    if not isinstance(meta.extra, Extra):
        return [("extra", "is neither None nor an Extra")]
    if meta.extra.name not in OPTIONAL_DEPENDENCIES or meta.extra.name not in extras.EXTRAS:
        return [("extra", f"{meta.extra.name!r} is not an extra of pyproject.toml and ingest/core/extras.py")]
    if meta.extra.unless is not None and meta.extra.unless not in option_names:
        return [("extra", f"unless={meta.extra.unless!r} is not an option")]
    return []


def _freshness_problems(meta: IngestorMeta) -> list[Problem]:
    if not isinstance(meta.freshness, Freshness) or meta.freshness.kind not in freshness.KINDS:
        return [("freshness", f"kind is not one of {freshness.KINDS}")]
    if not meta.freshness.lag_hours > 0:
        return [("freshness", f"lag_hours {meta.freshness.lag_hours} is not positive")]
    return []


def _doctor_problems(meta: IngestorMeta, option_names: set[str]) -> list[Problem]:
    if meta.doctor is None:
        if meta.extra is not None or option_names & NETWORK_OPTIONS:
            return [("doctor", "is None, but the source reaches the network (an extra, or a URL / endpoint option)")]
        return []
    if callable(meta.doctor):  # a built-in's: defined in the source's own room (its doctor.py, or its spec module)
        module = meta.doctor.__module__
        room = meta.options.__module__.rpartition(".")[0]
        if not module.startswith(f"{room}.") and module != "gpufinops.ingest.core.doctor":
            return [("doctor", f"{meta.doctor.__qualname__} is defined in {module}, outside {room}")]
        return []
    module, _, function = meta.doctor.partition(":")
    try:
        found = getattr(importlib.import_module(module), function, None)
    except ImportError:
        found = None
    if not callable(found):
        return [("doctor", f"{meta.doctor!r} is not an importable 'module:function'")]
    if meta.options.__module__.startswith("gpufinops."):  # a plugin names its check; a built-in carries it
        return [("doctor", f"{meta.doctor!r} is named by string: a built-in's check is defined in its own folder")]
    return []


def _transport_problems(meta: IngestorMeta, option_names: set[str]) -> list[Problem]:
    """A source reaching the network declares its transport, bounded by the transport options."""
    if meta.transport is None:
        if meta.extra is not None or option_names & {"url", "targets", "endpoint", "endpoint_url"}:
            return [("transport", "is None, but the source reaches the network (an extra, or a URL / endpoint option)")]
        return []
    if not isinstance(meta.transport, Transport) or meta.transport.client not in TRANSPORT_CLIENTS:
        return [("transport", f"is not a Transport whose client is one of {TRANSPORT_CLIENTS}")]
    if meta.transport.endpoint not in option_names or (
        meta.transport.unless is not None and meta.transport.unless not in option_names
    ):
        return [("transport", "endpoint or unless is not an option")]
    if not issubclass(meta.options, TransportOptions):
        return [("transport", "is declared, but the options are not TransportOptions (no configurable bounds)")]
    return []


def _init_problems(meta: IngestorMeta, option_names: set[str]) -> list[Problem]:
    out = []
    if isinstance(meta.init, InitQuestion):
        if meta.init.option not in option_names:
            out.append(("init", f"option {meta.init.option!r} is not an option"))
        if meta.init.flag in _init_flags():
            out.append(("init", f"flag {meta.init.flag!r} is already one of init's own"))
    elif isinstance(meta.init, tuple):
        if not meta.init or not set(meta.init) <= set(init_cmd.SOURCE_FLAGS):
            out.append(("init", f"{meta.init} are not flags of init's own sections ({init_cmd.SOURCE_FLAGS})"))
    elif meta.init is not None:
        out.append(("init", "is neither None, an InitQuestion nor a tuple of init's flags"))
    return out


def spec_problems(meta: IngestorMeta) -> list[str]:
    """Each missing or invalid fact of one spec, as '<type>: <fact> …' (empty: a complete spec)."""
    option_names = (
        {f.name for f in dataclasses.fields(meta.options)} if dataclasses.is_dataclass(meta.options) else set()
    )
    found = [
        *_table_problems(meta),
        *_shape_problems(meta),
        *_extra_problems(meta, option_names),
        *_freshness_problems(meta),
        *_doctor_problems(meta, option_names),
        *_transport_problems(meta, option_names),
        *_init_problems(meta, option_names),
    ]
    return [f"{meta.name}: {fact} {why}" for fact, why in found]


def test_no_fact_has_a_silent_default():
    for spec in (IngestorMeta, Cursor, Extra, InitQuestion, Freshness, Transport):
        defaulted = [
            f.name
            for f in dataclasses.fields(spec)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ]
        assert defaulted == [], spec.__name__


def test_every_registered_source_type_declares_every_fact():
    registry = default_registry()
    assert len(registry.names()) >= 17
    assert [p for cls in registry for p in spec_problems(cls.meta)] == []


def test_the_lint_catches_each_bad_fact():
    good = default_registry().get("aws_cur").meta
    broken = {
        "extra": dataclasses.replace(good, extra=Extra(name="oracle", unless=None)),
        "freshness": dataclasses.replace(good, freshness=Freshness(kind="cost", lag_hours=0.0)),
        "provider": dataclasses.replace(good, provider="amazon"),
        "doctor": dataclasses.replace(good, doctor=None),
        "init": dataclasses.replace(good, init=("aws_cur_bucket", "no_such_flag")),
        "cursor": dataclasses.replace(good, cursor=Cursor(remembers="", resume_item=None)),
        "key": dataclasses.replace(good, key=("no_such_column",)),
        "transport": dataclasses.replace(
            good, transport=Transport(client="ftp", endpoint="endpoint_url", paged=True, unless=None)
        ),
    }
    for fact, meta in broken.items():
        problems = spec_problems(meta)
        assert len(problems) == 1 and problems[0].startswith(f"aws_cur: {fact} "), (fact, problems)
    unreachable = dataclasses.replace(good, doctor="gpufinops.interfaces.doctor_sources:no_such_check")
    assert spec_problems(unreachable) == [
        "aws_cur: doctor 'gpufinops.interfaces.doctor_sources:no_such_check' is not an importable 'module:function'"
    ]


def test_every_flag_of_init_s_own_sections_belongs_to_a_spec():
    claimed = {flag for cls in default_registry() if isinstance(cls.meta.init, tuple) for flag in cls.meta.init}
    assert claimed == set(init_cmd.SOURCE_FLAGS)


def test_provider_tables_name_provider_codes_and_real_sources():
    assert set(reference.inventory_providers()) <= set(providers.PROVIDERS)
    registry = default_registry()
    priced = {spec.code: spec.price_sources for spec in providers.registered() if spec.price_sources}
    assert {"aws", "gcp", "onprem"} <= set(priced)
    for provider, hint in priced.items():
        named = [word for word in re.findall(r"\w+", hint) if word in registry]
        assert named, (provider, hint)
        assert {registry.get(name).meta.provider for name in named} == {provider}, (provider, named)


def test_one_provider_mapping_in_python_and_sql():
    con = duckdb.connect()
    names = ["Amazon Web Services", "AWS", "Google Cloud", "Microsoft", "Oracle", "onprem", "On-Prem DC", "Acme"]
    con.execute("CREATE TABLE t (i INT, name VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(names)))
    from gpufinops.warehouse.queries.fragments import provider_code as sql_code

    in_sql = [r[0] for r in con.execute(f"SELECT {sql_code('lower(name)')} FROM t ORDER BY i").fetchall()]
    in_python = [providers.provider_code(n) for n in names]
    assert in_sql == in_python == ["aws", "aws", "gcp", "azure", "oci", "onprem", "onprem", "acme"]


def test_the_runner_reads_the_cursor_object():
    meta = default_registry().get("prometheus").meta
    assert meta.cursor is not None and meta.cursor.resume_item == "cursor"
    saved = datetime(2026, 7, 1, 12, tzinfo=UTC)
    assert meta.cursor.resume_from({"cursor": saved.isoformat()}, timedelta(hours=3)) == saved - timedelta(hours=3)
    assert meta.cursor.resume_from({}, timedelta(hours=3)) is None
    files = default_registry().get("focus_files").meta.cursor
    assert files is not None and files.resume_from({"cursor": saved.isoformat()}, timedelta(0)) is None


# --- a dummy source, declared in one module --------------------------------------------------------


@pytest.fixture
def registry() -> Registry:
    registry = default_registry()
    for cls in dummy_source.INGESTORS:
        registry.register(cls)
    return registry


def test_the_dummy_spec_is_complete(registry):
    assert spec_problems(registry.get("dummy_bands").meta) == []


def test_the_registry_finds_a_new_module_where_it_lies(tmp_path):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "acme_source.py").write_text(Path(dummy_source.__file__).read_text())
    (tmp_path / "acme" / "helpers.py").write_text("X = 1\n")
    assert builtin_modules(tmp_path, "pkg") == ("pkg.acme.acme_source",)


def test_the_runner_loads_the_dummy(registry, tmp_path):
    db = tmp_path / "w.duckdb"
    first = run_source(registry, db, "dummy", "dummy_bands", {"path": str(DUMMY_CSV)})
    assert first.status == "succeeded" and first.rows == 2, first
    again = run_source(registry, db, "dummy", "dummy_bands", {"path": str(DUMMY_CSV)})
    assert again.status == "skipped"  # its cursor: the file's size
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM spot_interruption_bands").fetchone() == (2,)
        # each run records its spec's freshness: what the warehouse, which cannot import ingest, reads
        runs = con.execute("SELECT status, freshness_kind, expected_lag_hours FROM ingest_runs ORDER BY started_at")
        assert runs.fetchall() == [("succeeded", "prices", 36.0), ("skipped", "prices", 36.0)]
        fresh = freshness.source_freshness(con)  # no lags given: the runs' own
        overridden = freshness.source_freshness(con, lags={"dummy_bands": Freshness(kind="cost", lag_hours=1.0)})
    row = fresh.row(0, named=True)
    assert (row["source"], row["kind"], row["expected_lag_hours"], row["stale"]) == ("dummy", "prices", 36.0, False)
    row = overridden.row(0, named=True)
    assert (row["kind"], row["expected_lag_hours"], row["stale"]) == ("cost", 1.0, True)  # it holds no cost rows


def test_freshness_reads_the_newest_run_s_and_a_run_without_any_is_unregistered(registry, tmp_path):
    db = tmp_path / "w.duckdb"
    assert run_source(registry, db, "dummy", "dummy_bands", {"path": str(DUMMY_CSV)}).status == "succeeded"
    with duckdb.connect(str(db)) as con:  # a row other code wrote, newer than the runner's: no freshness
        con.execute(
            "INSERT INTO ingest_runs (run_id, source, source_type, started_at, finished_at, status, rows) "
            "VALUES ('hand', 'dummy', 'dummy_bands', now() + INTERVAL 1 MINUTE, now(), 'succeeded', 0)"
        )
        row = freshness.source_freshness(con).row(0, named=True)
    unregistered = freshness.UNREGISTERED
    assert (row["kind"], row["expected_lag_hours"]) == (unregistered.kind, unregistered.lag_hours)


def test_doctor_takes_the_dummy_s_check_and_extra_from_its_spec(registry, tmp_path):
    source = parse_source("dummy", {"type": "dummy_bands", "path": str(DUMMY_CSV)}, registry)
    assert doctor_sources.needs_extra(source, registry) is None
    check = doctor_sources.check_of("dummy_bands", registry)
    assert check is not None and check(source, tmp_path, 5.0)[0] == "ok"
    missing = parse_source("dummy", {"type": "dummy_bands", "path": "nowhere.csv"}, registry)
    assert check(missing, tmp_path, 5.0)[0] == "FAIL"


def test_init_asks_and_writes_the_dummy_s_question(registry, tmp_path):
    asked = init_choices.questions(registry)
    builtin = [q.type for q in init_choices.questions(default_registry())]  # whatever the built-ins ask
    assert [q.type for q in asked] == [*builtin, "dummy_bands"]
    parser = argparse.ArgumentParser()
    init_cmd.add_parser(parser.add_subparsers(dest="command"), asked=asked)
    out = tmp_path / "gpufinops.toml"
    args = parser.parse_args(["init", "--out", str(out), "--dummy-bands-path", str(DUMMY_CSV)])
    assert init_cmd.run(args, asked=asked, registry=registry) == 0  # checked by the config loader
    assert f'[sources.dummy]\ntype = "dummy_bands"\npath = "{DUMMY_CSV}"\n' in out.read_text()
    prompts: list[str] = []

    def answer(question: str) -> str:
        prompts.append(question)
        return "data/bands.csv" if question.startswith("Dummy") else ""  # Enter skips every other source

    choices = init_choices.ask(init_choices.Choices(), answer, io.StringIO(), asked)
    assert prompts[-1] == "Dummy bands CSV (path): " and choices.answers == {"dummy_bands_path": "data/bands.csv"}
    assert 'path = "data/bands.csv"' in init_render.render(choices, asked)


def test_the_docs_generator_lists_the_dummy(registry):
    row = next(line for line in docs.source_table(registry).splitlines() if line.startswith("| `dummy_bands` |"))
    assert "a dummy CSV of spot interruption bands → `spot_interruption_bands`" in row
    assert "the file's size" in row and "`0 6 * * *`" in row


def test_init_s_help_and_flags_take_the_dummy_s_question_from_its_spec(registry, capsys):
    with pytest.raises(SystemExit):
        cli_parser.build_parser(["init", "--help"], registry).parse_args(["init", "--help"])
    shown = capsys.readouterr().out
    assert "--dummy-bands-path VALUE" in shown and "Dummy bands CSV (path) (the dummy_bands source's path)" in shown
    argv = ["init", "--yes", "--dummy-bands-path", str(DUMMY_CSV)]
    assert cli_parser.build_parser(argv, registry).parse_args(argv).dummy_bands_path == str(DUMMY_CSV)


def test_only_init_builds_the_registry_at_start_up():
    """Building the ingest registry imports every source module (most of a second): the other
    commands' parser adds no init question, so their start-up imports none."""
    probe = (
        "import sys; from gpufinops.interfaces import cli; from gpufinops.ingest.core.registry import builtin_modules; "
        "cli._parser(sys.argv[1:]); print(sorted(set(builtin_modules()) & set(sys.modules)))"
    )
    for argv in (["--version"], ["sql", "select 1"], ["--help"]):
        out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[]", (argv, out.stdout)
    out = subprocess.run([sys.executable, "-c", probe, "init", "--help"], capture_output=True, text=True, check=True)
    assert "gpufinops.ingest.aws.aws_cur" in out.stdout
