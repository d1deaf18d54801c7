"""Every numeric setting declares its range (kernel/ranges.py) and is refused outside it at start-up:
each registered source's options and each model's ``[models]`` settings, found by iterating the
declarations, so a new setting is covered. Unreadable config files are exit 2 naming the file; dates
outside the supported window are exit 2."""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
import typing
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.spec import MISSING, OptionError, default_of, is_numeric
from gpufinops.interfaces import cli, dates
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.config import ConfigError
from gpufinops.kernel import ranges

REGISTRY = default_registry()


def _source_settings() -> list[tuple[str, str, ranges.Range]]:
    found = []
    for ingestor in REGISTRY:
        hints = typing.get_type_hints(ingestor.meta.options)
        for fld in ingestor.meta.options.fields():
            if is_numeric(hints[fld.name]):
                found.append((ingestor.meta.name, fld.name, ranges.declared(fld.metadata)))
    return found


def _model_settings() -> list[tuple[str, ranges.Range]]:
    """Every numeric field of every ``[models]`` settings dataclass (one with ``from_config``) in models/."""
    import gpufinops.models as models
    from gpufinops.models.registry import setting_keys

    keys = setting_keys()
    found: dict[str, ranges.Range] = {}
    for info in pkgutil.iter_modules(models.__path__):
        module = importlib.import_module(f"gpufinops.models.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and hasattr(obj, "from_config"):
                for fld in dataclasses.fields(obj):
                    number = isinstance(fld.default, (int, float)) and not isinstance(fld.default, bool)
                    if number and fld.name in keys:
                        found[fld.name] = ranges.declared(fld.metadata)
    return sorted(found.items())


SOURCE_SETTINGS = _source_settings()
MODEL_SETTINGS = _model_settings()


def test_the_declarations_are_found():
    names = {(s, k) for s, k, _ in SOURCE_SETTINGS}
    assert {("prometheus", "retries"), ("prometheus", "timeout_s"), ("dcgm_exporter", "retries")} <= names
    assert {"min_coverage", "idle_util_pct", "memory_headroom", "spot_max_share"} <= dict(MODEL_SETTINGS).keys()
    assert dict(MODEL_SETTINGS)["min_coverage"] == ranges.SHARE
    assert dict(MODEL_SETTINGS)["idle_util_pct"] == ranges.PERCENT


@pytest.mark.parametrize("source, key, declared", SOURCE_SETTINGS, ids=[f"{s}.{k}" for s, k, _ in SOURCE_SETTINGS])
def test_every_source_number_outside_its_range_is_refused(source, key, declared):
    ingestor = REGISTRY.get(source)
    for bad in declared.outside():
        with pytest.raises(OptionError) as info:
            ingestor.meta.parse_options({key: bad}, "sources.x")
        assert str(info.value).startswith(f"sources.x.{key}: must be "), (bad, info.value)
    default = default_of(next(f for f in ingestor.meta.options.fields() if f.name == key))
    assert default in (None, MISSING) or declared.problem(default) is None  # the declaration admits its default


@pytest.mark.parametrize("key, declared", MODEL_SETTINGS, ids=[k for k, _ in MODEL_SETTINGS])
def test_every_model_setting_outside_its_range_is_refused(key, declared):
    from gpufinops.models.run import validate_settings

    for bad in declared.outside():
        with pytest.raises(ValueError, match=rf"^\[models\] {key} must be "):
            validate_settings({key: bad})


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '[sources.p]\ntype = "prometheus"\nurl = "http://p"\nretries = -1',
            "sources.p.retries: must be a non-negative",
        ),
        (
            '[sources.p]\ntype = "prometheus"\nurl = "http://p"\ntimeout_s = 0',
            "sources.p.timeout_s: must be a positive",
        ),
        ("[models]\nmin_coverage = 7", "models.min_coverage must be a share between 0 and 1 (got 7)"),
        ("[models]\nidle_util_pct = -5", "models.idle_util_pct must be a percentage between 0 and 100 (got -5)"),
        ("[models]\nspot_serving_floor_share = 1.5", "models.spot_serving_floor_share must be a share"),
        ("[models]\nmin_days = nan", "models.min_days must be a non-negative number (got nan)"),
    ],
)
def test_the_reported_values_are_refused_at_start_up(tmp_path, capsys, text, message):
    path = tmp_path / "gpufinops.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        config_mod.load(path, environ={})
    assert message in str(info.value)
    assert cli.main(["--config", str(path), "sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(path) in err[0]


def _binary(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00[warehouse]")


def _directory(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    import os

    os.mkfifo(path)


@pytest.mark.parametrize(
    "make, words", [(_binary, "is not UTF-8 text"), (_directory, "is a directory"), (_fifo, "is not a regular file")]
)
def test_an_unreadable_config_file_is_exit_2_naming_it(tmp_path, capsys, make, words):
    path = tmp_path / "gpufinops.toml"
    make(path)
    assert cli.main(["--config", str(path), "sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gpufinops: config error: config file {path} {words}"), err


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "focus", "--out", "x.parquet", "--from", "0001-01-01", "--to", "9999-12-31"],
        ["export", "focus", "--out", "x.parquet", "--to", "9999-12-31T23:00-05:00"],
        ["export", "focus", "--out", "x.parquet", "--from", "0001-01-01T00:00+05:00"],
        ["ingest", "--since", "1969-12-31"],
        ["alerts", "run", "--now", "2200-01-02"],
    ],
)
def test_dates_outside_the_supported_window_are_exit_2(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        cli.main(["--db", str(tmp_path / "wh.duckdb"), *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "outside the supported dates 1970-01-01 … 2199-12-31" in err and "Traceback" not in err
    assert not (tmp_path / "wh.duckdb").exists()


def test_the_window_edges_are_accepted():
    assert dates.parse("1970-01-01").year == 1970 and dates.parse("2199-12-31").year == 2199
    assert math.isclose(dates.parse("2199-12-31T23:59:59").timestamp(), dates.LAST_DATE.timestamp() + 86399)


def _section_numbers() -> list[tuple[str, str, ranges.Range]]:
    """Every ranged number of every section's own table (its first declaration), from the declarations."""
    found = []
    for section in config_mod.sections():
        if section.declares:
            table, settings = section.names[-1], section.declares[0]
            found += [(table, key, declared) for key, declared in sorted(settings.ranges().items())]
    return found


SECTION_NUMBERS = _section_numbers()


def test_the_sections_declare_their_numbers():
    assert {("jobs", "ingest_retries"), ("report", "smtp_port"), ("dashboard", "stale_after_hours")} <= {
        (s, k) for s, k, _ in SECTION_NUMBERS
    }


@pytest.mark.parametrize("section, key, declared", SECTION_NUMBERS, ids=[f"{s}.{k}" for s, k, _ in SECTION_NUMBERS])
def test_every_section_number_outside_its_range_is_refused(tmp_path, section, key, declared):
    for bad in declared.outside():
        path = tmp_path / "gpufinops.toml"
        path.write_text(f"[{section}]\n{key} = {bad!r}\n")  # nan and inf are TOML too
        with pytest.raises(ConfigError) as info:
            config_mod.load(path, environ={})
        assert str(info.value).startswith(f"{section}.{key}: must be "), (bad, info.value)
