"""The TOML tables the tests' configs repeat, built from what each test varies (a budget's name, amount,
scope; a report's SMTP port and recipients), so that a config in a test states only its own choices."""

from __future__ import annotations

import json
from pathlib import Path


def _value(value: object) -> str:
    """A TOML value of a string, number, bool or list of them (JSON's spelling is TOML's for these)."""
    return json.dumps(value)


def warehouse(tmp_path: Path) -> str:
    """The `[warehouse]` table of a test home: the DuckDB file under ``tmp_path / "wh"``."""
    return f"[warehouse]\npath = {_value(str(tmp_path / 'wh' / 'gpufinops.duckdb'))}\n"


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
