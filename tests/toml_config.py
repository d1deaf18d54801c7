"""The TOML tables the tests' configs repeat, built from what each test varies (a budget's name, amount,
scope; a report's SMTP port and recipients), so that a config in a test states only its own choices."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


def _value(value: object) -> str:
    """A TOML value of a string, number, bool or list of them (JSON's spelling is TOML's for these)."""
    return json.dumps(value)


def config_file(tmp_path: Path, tables: str) -> Path:
    """``tmp_path / "gpufinops.toml"``: the warehouse under ``tmp_path / "wh"``, then ``tables``."""
    path = tmp_path / "gpufinops.toml"
    path.write_text(f"[warehouse]\npath = {_value(str(tmp_path / 'wh' / 'gpufinops.duckdb'))}\n{tables}")
    return path


def budget(name: str, amount: int, teams: list[str] | None = None, **settings: object) -> str:
    """One `[[budgets]]` table: a monthly ``amount`` (USD) over ``teams`` (the whole fleet without), and its
    other ``settings`` (thresholds, enforce, ...)."""
    lines = ["[[budgets]]", f"name = {_value(name)}", f"amount = {amount}"]
    lines += [f"scope = {{ teams = {_value(teams)} }}"] * (teams is not None)
    lines += [f"{key} = {_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def recipient(email: str, role: str, teams: list[str] | None = None) -> str:
    """One `[[report.recipients]]` table: who is mailed, with which role (and teams, for a lead)."""
    lines = ["[[report.recipients]]", f"email = {_value(email)}", f"role = {_value(role)}"]
    lines += [f"teams = {_value(teams)}"] * (teams is not None)
    return "\n".join(lines) + "\n"


def smtp_report(port: int, *recipients: str, **settings: object) -> str:
    """A `[report]` table mailing from gpufinops@example.com through the SMTP server on 127.0.0.1:``port``
    (plain, no STARTTLS unless ``settings`` say so), its other ``settings``, then the ``recipients``."""
    settings = {"smtp_starttls": False, **settings}
    lines = ["[report]", 'sender = "gpufinops@example.com"', 'smtp_host = "127.0.0.1"', f"smtp_port = {port}"]
    lines += [f"{key} = {_value(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n\n" + "\n".join(recipients)


def assert_refused(tmp_path: Path, text: str, key: str) -> None:
    """A config of ``text`` does not load: its one error starts with ``key`` (the option it names)."""
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs.config import ConfigError

    path = tmp_path / "gpufinops.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="^" + re.escape(key) + ":"):
        config_mod.load(path)
