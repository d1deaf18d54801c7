"""A listing stays inside what was configured: every source option that names a bucket prefix (found in the
registered specs by its name, ``prefix`` or ``prefixes``) refuses a prefix whose literal part before the
first wildcard is empty, which would ask the service for the whole bucket, when the config is read: exit 2
and one sentence naming the key. A new source with such an option is covered by registering it."""

from __future__ import annotations

import json
import re
import typing

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.interfaces import cli
from gpufinops.jobs import config
from gpufinops.jobs.config import ConfigError

REGISTRY = default_registry()
NAMES_A_PREFIX = re.compile(r"(^|_)prefix(es)?$")
UNSCOPED = ["?*/", "[t]rain/", "*/ckpt/", "/*"]
SCOPED = "train/ckpt/"


def prefix_options() -> list[tuple[str, str]]:
    return [
        (cls.meta.name, f.name)
        for cls in REGISTRY
        for f in cls.meta.options.fields()
        if NAMES_A_PREFIX.search(f.name) and not f.name.startswith("max_")
    ]


def _value(source_type: str, key: str, prefix: str) -> object:
    hint = typing.get_type_hints(REGISTRY.get(source_type).meta.options)[key]
    return [{"bucket": "my-bucket", "prefix": prefix}] if "list" in str(hint) else prefix


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _config(tmp_path, source_type: str, key: str, prefix: str):
    options = REGISTRY.get(source_type).meta.options
    table: dict[str, object] = {f: "my-project" for f in options.required_keys()}
    table[key] = _value(source_type, key, prefix)
    declared = {f.name for f in options.fields()}
    for one in (
        "bucket",
        "container",
    ):  # a source reading one bucket (Blob Storage: container): the prefix is inside it
        if one in declared:
            table[one] = "my-bucket"
    lines = [f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"', f'[sources.s]\ntype = "{source_type}"']
    lines += [f"{k} = {_toml(v)}" for k, v in table.items()]
    path = tmp_path / "gpufinops.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_storage_sources_name_prefixes():
    found = {t for t, _ in prefix_options()}
    assert {"aws_storage", "gcp_storage", "azure_cost_export"} <= found, found


@pytest.mark.parametrize(("source_type", "key"), prefix_options())
def test_a_scoped_prefix_is_accepted(source_type, key, tmp_path):
    assert config.load(_config(tmp_path, source_type, key, SCOPED), environ={}).sources


@pytest.mark.parametrize("prefix", UNSCOPED)
@pytest.mark.parametrize(("source_type", "key"), prefix_options())
def test_a_prefix_with_an_empty_literal_part_is_refused_naming_the_key(source_type, key, prefix, tmp_path, capsys):
    path = _config(tmp_path, source_type, key, prefix)
    with pytest.raises(ConfigError) as refused:
        config.load(path, environ={})
    assert f"sources.s.{key}" in str(refused.value), refused.value
    assert cli.main(["--config", str(path), "ingest", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"sources.s.{key}" in err and "\n" not in err, err
