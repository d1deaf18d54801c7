"""First steps that lead somewhere: `init` without a terminal refuses or says it wrote no source;
every printed next command runs as printed; the missing-warehouse hint names the demo's config; a
missing AWS credential names boto3's chain and `doctor`; a misspelt key is named with the nearest
known one; reversed dates and unknown teams are usage errors; a port in use is an error before any
URL is printed. Each runs the real `gpufinops` executable (or `cli.main`) against real files."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpufinops.jobs import config as config_mod

REPO = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "gpufinops"


def gpufinops(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """The installed executable, as a user in a clone calls it (stdin: no terminal)."""
    environ = {k: v for k, v in os.environ.items() if k != "GPUFINOPS_CONFIG"}
    environ["PATH"] = "/usr/bin:/bin"  # a clone: .venv/bin is not on the PATH
    environ.update(env or {})
    return subprocess.run(
        [os.path.relpath(EXE, cwd), *args],
        cwd=cwd,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


pytestmark = pytest.mark.skipif(not EXE.exists(), reason="needs the installed gpufinops executable")


def test_init_without_a_terminal_nor_flags_refuses_naming_the_flags(tmp_path: Path) -> None:
    result = gpufinops("init", "--out", "gpufinops.toml", cwd=tmp_path)
    assert result.returncode == 2, result
    assert "--aws-cur-bucket" in result.stderr and "--dcgm-target" in result.stderr and "--yes" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gpufinops.toml").exists()


def test_init_yes_writes_a_template_and_says_it_has_no_source(tmp_path: Path) -> None:
    result = gpufinops("init", "--yes", "--out", "gpufinops.toml", cwd=tmp_path)
    assert result.returncode == 0, result
    assert "no source" in result.stdout
    config_mod.load(tmp_path / "gpufinops.toml", environ={})  # it loads


def test_every_next_command_init_prints_runs_as_printed(tmp_path: Path) -> None:
    (tmp_path / "focus").mkdir()
    result = gpufinops("init", "--focus-path", "focus/*.csv", "--out", "gpufinops.toml", cwd=tmp_path)
    assert result.returncode == 0, result
    commands = [line.split("#")[0].strip() for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(commands) == 2
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] != "gpufinops"  # not on this PATH
        ran = subprocess.run(
            argv,
            cwd=tmp_path,
            env={**os.environ, "PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )  # as printed, from where it was printed
        assert ran.returncode in (0, 1) and "Traceback" not in ran.stderr, (command, ran)


def test_missing_warehouse_names_the_demo_config_and_runnable_commands(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "gpufinops.toml").write_text('[warehouse]\npath = "data/gpufinops.duckdb"\n')
    result = gpufinops("sql", "SELECT 1", cwd=tmp_path)
    assert result.returncode == 1
    message = result.stderr
    assert "--config demo/gpufinops.toml sql 'SELECT 1'" in message, message
    assert "`gpufinops " not in message  # the commands name the executable that ran
    plain = gpufinops("sql", "SELECT 1", cwd=tmp_path / "demo")  # no demo home here: no such hint
    assert "demo home" not in plain.stderr


def test_missing_aws_credentials_name_the_chain_and_doctor(tmp_path: Path) -> None:
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        '[warehouse]\npath = "wh.duckdb"\n[sources.spot]\ntype = "aws_spot_prices"\nregions = ["us-east-1"]\n'
        'endpoint_url = "http://127.0.0.1:9"\n'
    )
    env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "HOME": str(tmp_path),
    }
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    environ.update(env)
    result = subprocess.run(
        [str(EXE), "--config", str(config), "ingest"], env=environ, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 1, result
    text = result.stdout + result.stderr
    assert "AWS_ACCESS_KEY_ID" in text and "~/.aws/credentials" in text and "doctor" in text, text


def test_a_misspelt_key_is_named_with_the_nearest_known_key(tmp_path: Path) -> None:
    config = tmp_path / "gpufinops.toml"
    config.write_text('[sources.gpus]\ntype = "dcgm_exporter"\ntarget = ["http://127.0.0.1:9400/metrics"]\n')
    with pytest.raises(config_mod.ConfigError, match=r"sources\.gpus\.target: unknown key .*did you mean `targets`"):
        config_mod.load(config, environ={})
    config.write_text('[warehouse]\npaht = "x.duckdb"\n')
    with pytest.raises(config_mod.ConfigError, match=r"warehouse\.paht: unknown key \(did you mean `path`\?"):
        config_mod.load(config, environ={})


@pytest.fixture
def team_warehouse(feed_warehouse: Path, tmp_path: Path) -> Path:
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{feed_warehouse}"\n')
    return config


def test_contradictory_or_unknown_arguments_are_usage_errors(team_warehouse: Path, tmp_path: Path, capsys) -> None:
    from gpufinops.interfaces import cli

    out = tmp_path / "focus.csv"
    args = ["--config", str(team_warehouse), "export", "focus", "--out", str(out)]
    assert cli.main([*args, "--from", "2026-10-10", "--to", "2026-10-01"]) == 2
    assert "before --from" in capsys.readouterr().err and not out.exists()
    for command in (["export", "json"], ["report", "weekly"], ["alerts", "list"], ["recommend", "--format", "json"]):
        assert cli.main(["--config", str(team_warehouse), *command, "--team", "nobody"]) == 2, command
        err = capsys.readouterr().err
        assert "--team nobody: no such team" in err and "vision" in err, err
    assert cli.main(["--config", str(team_warehouse), "export", "json", "--team", "vision"]) == 0


def test_a_port_in_use_is_an_error_before_the_url(team_warehouse: Path, tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = gpufinops("--config", str(team_warehouse), "dashboard", "--port", str(port), cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result
    assert f"port {port}" in result.stderr and "in use" in result.stderr
    assert "http://" not in result.stderr + result.stdout
