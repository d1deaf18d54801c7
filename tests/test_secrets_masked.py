"""No secret in any command's output, at any verbosity: secret values are planted in a config (URL
userinfo of Prometheus and DCGM targets, [[api.tokens]] and SMTP password variables, webhook and
Slack secrets, AWS keys in the environment), then every command of the CLI's own registry (its
argparse subcommands: a new command is covered without a line here) runs in a real process at
default verbosity, -v and -vv, and its stdout and stderr are searched for every planted value.
A command that serves (api, dashboard, serve) is interrupted after a few seconds, as Ctrl-C would."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufinops.ingest.core import scrub as scrubber
from gpufinops.interfaces import cli
from tests.conftest import free_port
from tests.toml_config import config_file, recipient, smtp_report

ROOT = Path(__file__).resolve().parent.parent
PLANTED = {
    "PROM_PASSWORD": "Pa55-planted-7c1e9a",
    "DCGM_PASSWORD": "Pr0m-planted-4b2d8f",
    "GPUFINOPS_TEST_API_TOKEN": "tok-planted-9e8d7c6b5a",
    "GPUFINOPS_TEST_SMTP_PASSWORD": "smtp-planted-1a2b3c4d",
    "GPUFINOPS_TEST_HOOK_SECRET": "whsec-planted-5f6e7d8c",
    "GPUFINOPS_TEST_SLACK_URL": "http://127.0.0.1:9/services/T0/B0/slack-planted-0z9y8x",
    "AWS_SECRET_ACCESS_KEY": "wJalr-planted-AWSsecret-0123456789abcdef",
    "AWS_ACCESS_KEY_ID": "AKIAPLANTED000000000",
}
CAP_S = 25.0  # a command still running then (a server, a long evaluation) is interrupted, as Ctrl-C would


def arguments(command: str, parser: argparse.ArgumentParser, tmp_path: Path) -> list[str]:
    """What a command needs to do real work quickly here; a command not listed runs with its required
    arguments only (the first choice of each, else "x")."""
    special = {
        "demo": ["--home", str(tmp_path / "demo"), "--days", "7"],
        "init": ["--out", str(tmp_path / "init.toml"), "--yes", "--force"],
        "doctor": ["--timeout", "2"],
        "sql": ["SELECT 'http://admin:" + PLANTED["PROM_PASSWORD"] + "@h/' AS u"],  # printed: scrubbed on stdout
        "evaluate": ["--quick"],
        "api": ["--port", str(free_port())],
        "dashboard": ["--port", str(free_port())],
    }
    return special.get(command, required_args(parser))


def write_config(tmp_path: Path) -> Path:
    prom, dcgm = PLANTED["PROM_PASSWORD"], PLANTED["DCGM_PASSWORD"]
    report = smtp_report(
        9,
        recipient("finance@example.com", "finance"),
        smtp_user_env="GPUFINOPS_TEST_SMTP_USER",
        smtp_password_env="GPUFINOPS_TEST_SMTP_PASSWORD",
        smtp_starttls=True,
        send_attempts=1,
        retry_backoff_seconds=0,
    )
    return config_file(
        tmp_path,
        f"""
[sources.prom]
type = "prometheus"
url = "http://admin:{prom}@127.0.0.1:9"
retries = 1
timeout_s = 1

[sources.dcgm]
type = "dcgm_exporter"
targets = ["http://bob:{dcgm}@127.0.0.1:9/metrics"]
retries = 1
timeout_s = 1

[[api.tokens]]
token_env = "GPUFINOPS_TEST_API_TOKEN"
role = "finance"

{report}

[alerts]
[[alerts.webhooks]]
url = "http://127.0.0.1:9/hook"
secret_env = "GPUFINOPS_TEST_HOOK_SECRET"
max_attempts = 1
timeout_s = 1

[[alerts.slack]]
url_env = "GPUFINOPS_TEST_SLACK_URL"
max_attempts = 1
timeout_s = 1

[[budgets]]
name = "fleet"
amount = 1
""",
    )


def commands() -> dict[str, argparse.ArgumentParser]:
    """The CLI's registry of commands: its parser's subcommands."""
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def required_args(parser: argparse.ArgumentParser) -> list[str]:
    out = []
    for action in parser._actions:
        if not action.option_strings and action.nargs not in ("*", "?") and action.dest != "help":
            out.append(next(iter(action.choices)) if action.choices else "x")
    return out


def start(args: list[str], tmp_path: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gpufinops.interfaces.cli", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, deadline: float, interrupted: list[int]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # still serving or computing: Ctrl-C, then whatever is left
        interrupted.append(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.communicate()


def test_the_scrubber_masks_each_kind_of_secret():
    scrubber.remember(["from-config-0123"])
    text = scrubber.scrub(
        "http://admin:pw-1@h/ https://tok123@h/ Authorization: Bearer abcdefgh12345678 AKIAIOSFODNN7EXAMPLE "
        "?token=abcdef12&x=1 from-config-0123 smtp_password_env: environment variable SMTP_PW is not set"
    )
    for value in ("pw-1", "tok123", "abcdefgh12345678", "AKIAIOSFODNN7EXAMPLE", "abcdef12", "from-config-0123"):
        assert value not in text, text
    assert "SMTP_PW is not set" in text  # a variable's name is no secret: the fix names it
    scrubber.forget()


@pytest.mark.slow
def test_no_command_prints_a_planted_secret_at_any_verbosity(tmp_path):
    config = write_config(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "GPUFINOPS_TEST_SMTP_USER": "mailer", **PLANTED}
    env.pop("GPUFINOPS_CONFIG", None)
    leaks, ran, interrupted = [], [], set()
    registry = commands()
    assert {"doctor", "ingest", "alerts", "report", "api", "serve"} <= set(registry)
    first = ["ingest", *sorted(c for c in registry if c != "ingest")]  # ingest first: the warehouse exists after
    for command in first:
        runs = []  # the three verbosities of one command side by side
        for verbosity in ([], ["-v"], ["-vv"]):
            args = ["--config", str(config), *verbosity, command, *arguments(command, registry[command], tmp_path)]
            runs.append((args[2:], start(args, tmp_path, env)))
        deadline = time.monotonic() + CAP_S
        for shown, proc in runs:
            stopped: list[int] = []
            out, err = finish(proc, deadline, stopped)
            ran.append(" ".join(shown))
            if stopped:
                interrupted.add(command)
            for name, value in PLANTED.items():
                for stream, text in (("stdout", out), ("stderr", err)):
                    if value in text:
                        leaks.append(f"`gpufinops {' '.join(shown)}` printed {name} on {stream}")
    assert not leaks, "\n".join(leaks)
    assert len(ran) == 3 * len(registry)
    assert not {"doctor", "ingest", "alerts", "sql"} & interrupted, interrupted  # these ran to their end
