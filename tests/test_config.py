"""Config: TOML per the contract, GPUFINOPS_* overrides, one clear error naming the key, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpufinops.jobs import config
from gpufinops.jobs.config import ConfigError

GOOD = """
[warehouse]
path = "wh/gpufinops.duckdb"

[sources.focus]
type = "focus_files"
path = "exports/*.csv"

[sources.gpus]
type = "nvidia_smi_csv"
path = "logs/*.csv"
schedule = "*/5 * * * *"

[sources.gpus.resource_map]
"ip-10-0-1-2" = "i-0123"

[teams]
tag_keys = ["owner", "team"]

[report]
smtp_password_env = "TEST_SMTP_PASSWORD"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpufinops.toml"
    path.write_text(text)
    return path


def test_good_config_resolves_paths_schedules_and_tag_keys(tmp_path):
    cfg = config.load(write(tmp_path, GOOD), environ={})
    assert cfg.warehouse_path == tmp_path / "wh" / "gpufinops.duckdb"
    assert cfg.sources["focus"].schedule == "15 */6 * * *"  # the ingestor's default
    assert cfg.sources["gpus"].schedule == "*/5 * * * *"
    assert cfg.sources["gpus"].parsed.resource_map == {"ip-10-0-1-2": "i-0123"}
    assert cfg.team_tag_keys == ("owner", "team")


def test_environment_overrides_the_file(tmp_path):
    env = {
        "GPUFINOPS_WAREHOUSE__PATH": "/srv/x.duckdb",
        "GPUFINOPS_SOURCES__FOCUS__PATH": "/mnt/*.csv",
        "GPUFINOPS_TEAMS__TAG_KEYS": '["squad"]',
        "GPUFINOPS_CONFIG_IGNORED": "x",
    }
    cfg = config.load(write(tmp_path, GOOD), environ=env)
    assert cfg.warehouse_path == Path("/srv/x.duckdb")
    assert cfg.sources["focus"].parsed.path == "/mnt/*.csv"
    assert cfg.team_tag_keys == ("squad",)


def test_config_from_environment_variable_and_db_override(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path / "..")
    cfg = config.load(None, db="other.duckdb", environ={"GPUFINOPS_CONFIG": str(path)})
    assert cfg.path == path and cfg.warehouse_path == Path.cwd() / "other.duckdb"


def test_defaults_without_any_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config.load(None, environ={})
    assert cfg.warehouse_path == tmp_path / "data" / "gpufinops.duckdb" and cfg.sources == {}


@pytest.mark.parametrize(
    "text, key",
    [
        ('[sources.x]\ntype = "aws_cur_typo"\n', "sources.x.type: unknown source type 'aws_cur_typo'"),
        ('[sources.x]\npath = "a"\n', "sources.x.type: missing required key"),
        ('[sources.x]\ntype = "focus_files"\n', "sources.x.path: missing required key"),
        (
            '[sources.x]\ntype = "focus_files"\npath = "a"\nschedule = "61 * * * *"\n',
            "sources.x.schedule: invalid cron",
        ),
        ('[sources.x]\ntype = "focus_files"\npath = "a"\nschedule = "every day"\n', "sources.x.schedule: invalid cron"),
        ('[sources.x]\ntype = "focus_files"\npath = "a"\nbucket = "b"\n', "sources.x.bucket: unknown key"),
        ('[warehouse]\npaht = "a"\n', "warehouse.paht: unknown key"),
        ('[wherehouse]\npath = "a"\n', "wherehouse: unknown section"),
        ('[teams]\ntag_keys = "team"\n', "teams.tag_keys: must be a list"),
        ("[sources.x\n", "is not valid TOML"),
    ],
)
def test_bad_config_is_one_error_naming_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match=None) as info:
        config.load(write(tmp_path, text), environ={})
    assert key in str(info.value)


def test_cli_exits_2_with_the_key_on_stderr(tmp_path):
    path = write(tmp_path, '[sources.x]\ntype = "focus_files"\npath = "a"\nschedule = "* * *"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(path), "ingest", "list"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "sources.x.schedule" in proc.stderr


def test_secrets_named_by_env_keys_are_collected_for_scrubbing(tmp_path):
    cfg = config.load(write(tmp_path, GOOD), environ={})
    import os

    os.environ["TEST_SMTP_PASSWORD"] = "hunter2-secret"
    try:
        assert cfg.secrets() == ["hunter2-secret"]
    finally:
        del os.environ["TEST_SMTP_PASSWORD"]
