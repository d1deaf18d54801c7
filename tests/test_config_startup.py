"""Every command validates the whole config before it runs anything (issue 21).

The bug this guards: a typo in ``[models]`` passed the config check, so `gpufinops serve` started and the
typo surfaced at 03:00 in ``job_runs`` (only `recommend` checked the section). Now every command that
reads a config refuses it at start-up: exit 2, one line naming the config file, the section and the key,
nothing run. The commands are taken from the CLI's own parser, so a new command is covered by
default; the few that take no config are exempt by name, each with its reason.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpufinops.interfaces import cli
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.config import ConfigError
from tests.conftest import FOCUS_SAMPLE

ROOT = Path(__file__).resolve().parent.parent
TYPO = "memory_headroomm"  # a real [models] key (memory_headroom), mistyped

# commands and top-level actions that read no config: each with why
EXEMPT = {
    "init": "writes a new config (it validates what it writes, and reads none)",
    "demo": "builds its own config in --home and ignores --config",
    "doctor": "diagnoses the config: a bad one is its failed `config` check, exit 1 like any failed check "
    "(test_doctor_reports_the_typo_as_its_failed_config_check)",
    "--version": "prints the version and exits before any config is read",
    "--help": "prints the usage and exits before any config is read",
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    assert len(actions) == 1, "the CLI has one level of subcommands"
    return dict(actions[0].choices)


def _exiting_options(parser: argparse.ArgumentParser) -> list[str]:
    """Top-level options that answer and exit without a command (--version, --help)."""
    return [
        max(a.option_strings, key=len)
        for a in parser._actions  # noqa: SLF001
        if isinstance(a, (argparse._VersionAction, argparse._HelpAction))
    ]  # noqa: SLF001


def _argv(name: str, sub: argparse.ArgumentParser) -> list[str]:
    """The command with the least its parser accepts: the first choice of each required positional."""
    argv = [name]
    for action in sub._actions:  # noqa: SLF001
        if action.option_strings or action.nargs in ("*", "?"):
            continue
        argv.append(sorted(action.choices)[0] if action.choices else "x")
    return argv


PARSER = cli._parser()  # noqa: SLF001
COMMANDS = sorted(set(_subparsers(PARSER)) - set(EXEMPT))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpufinops.toml"
    path.write_text(f'[warehouse]\npath = "{tmp_path / "wh" / "gpufinops.duckdb"}"\n\n{text}\n')
    return path


def test_the_exemptions_name_real_commands_and_the_rest_load_the_config():
    names = set(_subparsers(PARSER)) | set(_exiting_options(PARSER))
    assert set(EXEMPT) <= names, f"stale exemptions: {set(EXEMPT) - names}"
    assert set(COMMANDS) <= set(cli.COMMANDS), "a command not in cli.COMMANDS must load the config itself"
    assert {"serve", "recommend", "api", "dashboard", "sql", "ingest", "export", "report", "alerts"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_a_models_typo_at_start_up(tmp_path, monkeypatch, capsys, command):
    config = write(tmp_path, f"[models]\n{TYPO} = 1.2\n")
    ran: list[str] = []
    monkeypatch.setattr(
        cli, "COMMANDS", {name: (lambda cfg, args, name=name: ran.append(name) or 0) for name in cli.COMMANDS}
    )
    status = cli.main(["--config", str(config), *_argv(command, _subparsers(PARSER)[command])])
    err = capsys.readouterr().err
    assert status == 2 and ran == []
    assert err.count("\n") == 1, err  # one sentence
    assert f"config error in {config}: models.{TYPO}: unknown key" in err
    assert not (tmp_path / "wh").exists()  # nothing ran: no warehouse, no lock file


def test_exempt_top_level_actions_answer_even_with_a_bad_config(tmp_path):
    config = write(tmp_path, f"[models]\n{TYPO} = 1.2\n")
    for option in _exiting_options(PARSER):
        proc = subprocess.run(
            [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(config), option],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0 and "config error" not in proc.stderr, (option, proc.stderr)


def test_doctor_reports_the_typo_as_its_failed_config_check(tmp_path, capsys):
    config = write(tmp_path, f"[models]\n{TYPO} = 1.2\n")
    assert cli.main(["--config", str(config), "doctor", "--timeout", "1"]) == 1
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.split()[1:2] == ["config"])
    assert first.split()[0] == "FAIL" and f"models.{TYPO}" in first


def test_serve_exits_2_without_starting_its_scheduler(tmp_path):
    """The real daemon process: refused before the lock, the warehouse or a single job."""
    config = write(
        tmp_path,
        f'[sources.focus]\ntype = "focus_files"\npath = "{FOCUS_SAMPLE}"\n\n'
        f"[jobs]\nevery_seconds = 1\n\n[models]\n{TYPO} = 1.2\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--config", str(config), "serve"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # it started: stop it, then fail
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"serve started with a [models] typo:\n{out}{err}")
    assert proc.returncode == 2, err
    assert err.strip() == err.strip().splitlines()[0] and f"{config}: models.{TYPO}: unknown key" in err
    assert "scheduled" not in out and "job(s)" not in out
    assert not (tmp_path / "wh").exists()  # no lock file beside the warehouse, no warehouse, no job_runs


# A typo in every section: the same refusal. The sections are the loader's own list, so a new section
# without a case here fails the test below.
NESTED = {
    "sources": '[sources.x]\ntype = "focus_files"\npath = "a"\nno_such_key = 1',
    "budgets": '[[budgets]]\nname = "a"\namount = 1\nno_such_key = 1',
}
TYPO_KEYS = {"sources": "sources.x.no_such_key", "budgets": "budgets[0].no_such_key"}


@pytest.mark.parametrize("section", sorted(config_mod.TOP_LEVEL_SECTIONS))
def test_a_typo_in_every_section_is_refused_naming_file_section_and_key(tmp_path, capsys, section):
    text = NESTED.get(section, f"[{section}]\nno_such_key = 1")
    key = TYPO_KEYS.get(section, f"{section}.no_such_key")
    if section == "warehouse":  # write() sets [warehouse] path: this one is on its own
        path = tmp_path / "gpufinops.toml"
        path.write_text(text + "\n")
    else:
        path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        config_mod.load(path, environ={})
    assert str(info.value).startswith(f"{key}: unknown key") and info.value.origin == str(path)
    assert cli.main(["--config", str(path), "sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert err == f"gpufinops: config error in {path}: {info.value}\n"


@pytest.mark.parametrize(
    "text, key",
    [
        ('[[report.recipients]]\nemail = "a@example.com"\nrole = "finance"\nteam = ["x"]', "report.recipients[0].team"),
        ('[[api.tokens]]\ntoken_env = "T"\nrole = "finance"\nscope = "x"', "api.tokens[0].scope"),
        ('[[api.webhooks]]\nurl = "https://x.example/h"\nsecret_env = "S"\nretries = 2', "api.webhooks[0].retries"),
        (
            '[dashboard]\nauth = "header"\nheader = "X-Email"\n[[dashboard.users]]\nemail = "a@example.com"\n'
            'role = "finance"\nteem = ["x"]',
            "dashboard.users[0].teem",
        ),
        ('[[alerts.slack]]\nurl_env = "S"\nchanel = "x"', "alerts.slack[0].chanel"),
        ('[sources.x]\ntype = "focus_files"\npath = "a"\nenabeld = false', "sources.x.enabeld"),
    ],
)
def test_a_typo_in_a_nested_table_names_it(tmp_path, text, key):
    with pytest.raises(ConfigError, match="^" + key.replace("[", r"\[").replace("]", r"\]") + ": unknown key"):
        config_mod.load(write(tmp_path, text), environ={})


def test_a_typo_set_by_an_environment_variable_names_the_variable(tmp_path, capsys):
    path = write(tmp_path, "")
    with pytest.raises(ConfigError) as info:
        config_mod.load(path, environ={"GPUFINOPS_MODELS__MEMORY_HEADROOMM": "1.2"})
    assert str(info.value).startswith(f"models.{TYPO}: unknown key")
    assert info.value.origin == "environment variable GPUFINOPS_MODELS__MEMORY_HEADROOMM"
    os.environ["GPUFINOPS_JOBS__RECOMMNED"] = "0 3 * * *"
    try:
        assert cli.main(["--config", str(path), "sql", "SELECT 1"]) == 2
    finally:
        del os.environ["GPUFINOPS_JOBS__RECOMMNED"]
    assert (
        "config error in environment variable GPUFINOPS_JOBS__RECOMMNED: jobs.recommned: unknown key"
        in capsys.readouterr().err
    )


def test_a_bad_models_value_is_refused_as_the_models_package_words_it(tmp_path):
    with pytest.raises(ConfigError, match=r"^models\.memory_headroom must be at least 1\.0"):
        config_mod.load(write(tmp_path, "[models]\nmemory_headroom = 0.5"), environ={})


def test_the_loader_imports_neither_the_daemon_nor_delivery_code(tmp_path):
    """Loading a config that uses every feature's section pulls in its settings, never the code that acts."""
    config = write(
        tmp_path,
        '[jobs]\nrecommend = "0 4 * * *"\n[report]\nsender = "a@example.com"\n'
        '[[api.webhooks]]\nurl = "https://x.example/h"\nsecret_env = "S"\n[alerts]\nemail = false\n'
        '[export]\nnode_class = "gpu"\n[dashboard]\nstale_after_hours = 30',
    )
    code = (
        "import sys; from gpufinops.jobs import config; config.load(sys.argv[1], environ={}); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('gpufinops.jobs.', 'gpufinops.interfaces.', 'gpufinops.dashboard')))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code, str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    acting = {
        "gpufinops.jobs.serve",
        "gpufinops.jobs.webhook",
        "gpufinops.jobs.ingest_run",
        "gpufinops.interfaces.api",
        "gpufinops.interfaces.dashboard_cmd",
        "gpufinops.jobs.alerts.run",
        "gpufinops.jobs.alerts.deliver",
        "gpufinops.jobs.report.deliver",
        "gpufinops.jobs.serve_ledger",
    }
    assert "gpufinops.jobs.serve_settings" in loaded and not acting & set(loaded), acting & set(loaded)
    # the [dashboard] section is declared in the dashboard's room (dashboard/settings.py): that, and no page
    settings_only = {"gpufinops.dashboard", "gpufinops.dashboard.settings"}
    assert "gpufinops.dashboard.settings" in loaded
    assert not [m for m in loaded if m.startswith("gpufinops.dashboard") and m not in settings_only]


def test_typed_sections_carry_what_the_readers_use(tmp_path):
    config = write(
        tmp_path,
        '[[api.tokens]]\ntoken_env = "LEAD_TOKEN"\nrole = "lead"\nteams = ["vision"]\n'
        '[[api.webhooks]]\nurl = "https://x.example/h"\nsecret_env = "HOOK_SECRET"\nkinds = ["idle_gpu"]\n'
        "max_attempts = 2\n"
        '[dashboard]\nauth = "header"\nheader = "X-Email"\nmonthly_budget_usd = 250000\n'
        "team_budgets = { vision = 40000.5 }\n"
        '[[dashboard.users]]\nemail = "lead@example.com"\nrole = "lead"\nteams = ["vision"]\n'
        '[[dashboard.users]]\nemail = "cfo@example.com"\nrole = "finance"\n'
        '[models]\nmemory_headroom = 1.5\n[jobs]\nrecommend = "0 4 * * *"',
    )
    cfg = config_mod.load(config, environ={})
    (token,) = cfg.api.tokens
    assert (token.token_env, token.role, token.teams, token.name) == ("LEAD_TOKEN", "lead", ("vision",), None)
    (hook,) = cfg.api.webhooks
    assert (hook.kinds, hook.teams, hook.max_attempts, hook.timeout_s, hook.batch_size) == (
        ("idle_gpu",),
        None,
        2,
        10.0,
        200,
    )
    # the JSON the dashboard process gets is the section as written
    import tomllib

    written = tomllib.loads(config.read_text())["dashboard"]
    assert cfg.dashboard.to_section() == written
    from gpufinops.models.features import RightsizingSettings
    from gpufinops.models.spot_mix import SpotMixSettings

    assert cfg.models is not None and cfg.models.of(RightsizingSettings).memory_headroom == 1.5  # parsed once
    assert cfg.models.of(SpotMixSettings) == SpotMixSettings() and cfg.jobs.recommend == "0 4 * * *"
    assert {"LEAD_TOKEN", "HOOK_SECRET"} <= set(cfg.secret_env_names)
    with pytest.raises(AttributeError):
        cfg.jobs = None  # frozen: parsed once, never changed


def test_a_missing_models_section_is_not_an_error_and_costs_no_model_import(tmp_path):
    code = (
        "import sys; from gpufinops.jobs import config; config.load(sys.argv[1], environ={}); "
        "print('gpufinops.models.run' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(write(tmp_path, ""))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    assert out == "False", "the models were imported without a [models] section to check"
