"""Every config section is declared in the one idiom (kernel/options.py, docs/config.md "How settings are
declared"), found by walking the sections the loader reads: each option has a type, a default or is required,
and a description; every section fills a ``Config`` attribute; and no module but the loader reads the TOML
mapping (the typed settings are what the readers get)."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.config_checks import ConfigError, ConfigSection
from gpufinops.kernel.options import MISSING, Settings, default_of, option, required

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = config_mod.sections()
DECLARED = sorted(
    {cls for section in SECTIONS for cls in section.declares}
    | {config_mod.WarehouseSettings, config_mod.TeamsSettings},
    key=lambda cls: cls.__qualname__,
)


def test_the_walk_finds_every_feature_section():
    names = {name for section in SECTIONS for name in section.names}
    assert names | set(config_mod.LOADER_TABLES) == config_mod.top_level_sections() == {  # the names users type
        "warehouse", "sources", "teams", "report", "api", "models", "jobs", "dashboard", "budgets", "alerts",
        "export", "allocation", "carbon", "unit_costs", "enforce",
    }  # fmt: skip
    assert len(DECLARED) >= 14


@pytest.mark.parametrize("cls", DECLARED, ids=[cls.__qualname__ for cls in DECLARED])
def test_every_option_has_a_type_a_default_or_is_required_and_a_description(cls):
    assert issubclass(cls, Settings) and dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # parsed once, never changed
    hints = typing.get_type_hints(cls)
    assert cls.declared(), f"{cls.__qualname__} declares no option"
    for fld in cls.declared():
        where = f"{cls.__qualname__}.{fld.name}"
        assert fld.name in hints and hints[fld.name] is not typing.Any, f"{where}: no type"
        assert required(fld) or default_of(fld) is not MISSING, f"{where}: neither a default nor required"
        doc = fld.metadata.get("doc", "")
        assert isinstance(doc, str) and len(doc.split()) >= 2, f"{where}: no description (option(..., doc))"


def test_every_section_fills_a_config_attribute_of_its_own():
    attrs = [section.attr for section in SECTIONS]
    fields = {f.name for f in dataclasses.fields(config_mod.Config)}
    assert len(attrs) == len(set(attrs)) and set(attrs) <= fields
    for section in SECTIONS:
        assert set(section.needs) <= set(attrs[: attrs.index(section.attr)]), f"{section.attr}: needs come first"
        assert set(section.arrays) <= set(section.names)


def test_the_meta_lint_catches_a_missing_description_and_the_parser_a_typo():
    @dataclasses.dataclass(frozen=True)
    class Dummy(ConfigSection):
        size: int = option(3, "how many")
        colour: str = option("red")  # no description

    undocumented = [f.name for f in Dummy.declared() if not f.metadata.get("doc")]
    assert undocumented == ["colour"]
    assert Dummy.parse({"size": 4}, "dummy") == Dummy(size=4)
    with pytest.raises(
        ConfigError, match=r"^dummy\.sise: unknown key \(did you mean `size`\? allowed: colour, size\)$"
    ):
        Dummy.parse({"sise": 4}, "dummy")
    with pytest.raises(ConfigError, match=r"^dummy\.size: must be a non-negative number \(got -1\)$"):
        Dummy.parse({"size": -1}, "dummy")
    with pytest.raises(ConfigError, match=r"^dummy\.colour: must be a string, not 5$"):
        Dummy.parse({"colour": 5}, "dummy")
    assert issubclass(Dummy, Settings)


# The loader is the one module that reads the TOML mapping; a reader gets typed settings.
LOADER = ROOT / "jobs" / "config.py"
READERS = ("jobs", "models", "dashboard", "interfaces")


def _raw_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: imports tomllib" for n in names if n.split(".")[0] == "tomllib"]
        elif isinstance(node, ast.Attribute) and node.attr == "raw":
            found.append(f"{node.lineno}: .raw")
        elif isinstance(node, ast.Attribute) and node.attr == "options" and isinstance(node.ctx, ast.Load):
            parent_reads = isinstance(node.value, ast.Name) and node.value.id in ("source", "s", "src")
            if parent_reads:
                found.append(f"{node.lineno}: {node.value.id}.options")  # type: ignore[attr-defined]
    return found


def test_no_module_but_the_loader_reads_the_raw_config():
    offending = {
        str(path.relative_to(ROOT)): reads
        for package in READERS
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != LOADER and (reads := _raw_reads(path))
    }
    assert offending == {}


def test_the_scan_sees_a_raw_read(tmp_path):
    planted = tmp_path / "reader.py"
    planted.write_text("import tomllib\n\ndef f(cfg, source):\n    return cfg.raw['models'], source.options.get('x')\n")
    assert [r.split(": ")[1] for r in _raw_reads(planted)] == ["imports tomllib", ".raw", "source.options"]


def _model_settings() -> list[type]:
    from gpufinops.models.registry import MODELS

    return sorted({spec.settings_class() for spec in MODELS if spec.settings is not None}, key=lambda c: c.__qualname__)


MODEL_SETTINGS = _model_settings()


@pytest.mark.parametrize("cls", MODEL_SETTINGS, ids=[cls.__qualname__ for cls in MODEL_SETTINGS])
def test_every_models_setting_has_a_type_a_default_and_a_description(cls):
    hints = typing.get_type_hints(cls)
    for fld in dataclasses.fields(cls):
        where = f"{cls.__qualname__}.{fld.name}"
        assert fld.name in hints, f"{where}: no type"
        assert default_of(fld) is not MISSING, f"{where}: every [models] key is optional, so it needs a default"
        assert len(str(fld.metadata.get("doc", "")).split()) >= 2, f"{where}: no description (option(..., doc))"
