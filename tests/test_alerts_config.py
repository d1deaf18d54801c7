"""`[[budgets]]` and `[alerts]` are validated at config load (one error naming the key, exit 2); the
`[dashboard]` budget keys are aliases of `[[budgets]]`; an older warehouse gets the alert tables;
`alerts list` shows what is open, scoped to a team."""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpufinops.jobs import config as config_mod
from gpufinops.jobs.config import ConfigError
from gpufinops.models.budgets import BudgetScope
from gpufinops.warehouse import db, schema
from tests import cli_process
from tests.alert_fleet import add_spend, write_config


def load(tmp_path: Path, text: str) -> config_mod.Config:
    path = tmp_path / "gpufinops.toml"
    path.write_text(text + "\n")
    return config_mod.load(path, environ={})


@pytest.mark.parametrize(
    "text, key",
    [
        ("[[budgets]]\namount = 10", "budgets[0].name"),
        ('[[budgets]]\nname = "a"', "budgets[0].amount"),
        ('[[budgets]]\nname = "a"\namount = -5', "budgets[0].amount"),
        ('[[budgets]]\nname = "a"\namount = 5\nperiod = "week"', "budgets[0].period"),
        ('[[budgets]]\nname = "a"\namount = 5\nthresholds = [50, 75]', "budgets[0].thresholds[0]"),
        ('[[budgets]]\nname = "a"\namount = 5\nthresholds = []', "budgets[0].thresholds"),
        ('[[budgets]]\nname = "a"\namount = 5\nforecast = "yes"', "budgets[0].forecast"),
        ('[[budgets]]\nname = "a"\namount = 5\nscope = { team = ["x"] }', "budgets[0].scope.team"),
        ('[[budgets]]\nname = "a"\namount = 5\nscope = { teams = [] }', "budgets[0].scope.teams"),
        ('[[budgets]]\nname = "a"\namount = 5\nscope = "vision"', "budgets[0].scope"),
        ('[[budgets]]\nname = "a"\namount = 5\nowner = "x"', "budgets[0].owner"),
        ('[[budgets]]\nname = "a"\namount = 5\n[[budgets]]\nname = "a"\namount = 6', "budgets[1].name"),
        (
            '[dashboard]\nmonthly_budget_usd = 5\n[[budgets]]\nname = "monthly"\namount = 6',
            "dashboard.monthly_budget_usd",
        ),
        ('[alerts]\nrules = ["budget", "weather"]', "alerts.rules"),
        ("[alerts]\nidle_min_hours = 0", "alerts.idle_min_hours"),
        ('[alerts]\nschedule = "every hour"', "alerts.schedule"),
        ('[alerts]\nanomaly_directions = ["up"]', "alerts.anomaly_directions"),
        ("[alerts]\nemails = true", "alerts.emails"),
        ('[[alerts.slack]]\nteams = ["vision"]', "alerts.slack[0].url_env"),
        ('[[alerts.webhooks]]\nurl = "ftp://x"\nsecret_env = "S"', "alerts.webhooks[0].url"),
        (
            '[[alerts.webhooks]]\nurl = "https://x.example/h"\nsecret_env = "S"\nretries = 3',
            "alerts.webhooks[0].retries",
        ),
    ],
)
def test_bad_alert_config_names_the_key(tmp_path, text, key):
    with pytest.raises(ConfigError, match="^" + re.escape(key) + ":"):
        load(tmp_path, text)


def test_a_bad_budget_is_exit_2_naming_the_key(tmp_path):
    path = tmp_path / "gpufinops.toml"
    path.write_text('[[budgets]]\nname = "gpu"\namount = "lots"\n')
    result = cli_process.run("--config", str(path), "alerts", "run")
    assert result.returncode == 2 and "budgets[0].amount" in result.stderr


def test_dashboard_budget_keys_are_aliases_of_budgets(tmp_path):
    cfg = load(
        tmp_path,
        "[dashboard]\nmonthly_budget_usd = 250000\nteam_budgets = { vision = 40000 }\n"
        '[[budgets]]\nname = "h100"\namount = 9000.50\nperiod = "quarter"\nforecast = true\n'
        'scope = { gpu_models = ["H100-SXM"], providers = ["AWS"], tags = { project = "llm" } }',
    )
    budgets = {b.name: b for b in cfg.alerts.settings.budgets}
    assert set(budgets) == {"h100", "monthly", "team:vision"}
    assert budgets["monthly"].amount == 250000 and budgets["monthly"].scope.everything
    assert budgets["team:vision"].scope == BudgetScope(teams=("vision",)) and budgets["team:vision"].period == "month"
    assert budgets["h100"].amount == Decimal("9000.5") and budgets["h100"].scope.providers == ("aws",)
    assert budgets["h100"].scope.tags == (("project", ("llm",)),) and budgets["h100"].forecast
    # what the dashboard process is handed round-trips to the same budgets
    from gpufinops.dashboard.access import settings_from

    handed = settings_from({"budgets": [b.to_dict() for b in cfg.alerts.settings.budgets]})
    assert {b.name: b for b in handed.budgets} == {n: b for n, b in budgets.items()}


def test_an_older_warehouse_gets_the_alert_tables(warehouse):
    warehouse.parent.mkdir(parents=True)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
        before_alerts = next(i for i, m in enumerate(schema.MIGRATIONS) if any("EXISTS alerts " in s for s in m()))
        for version, migration in enumerate(schema.MIGRATIONS[:before_alerts], start=1):
            for statement in migration():
                con.execute(statement)
            con.execute("INSERT INTO schema_version VALUES (?, now())", [version])
        assert "alerts" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    db.prepare(warehouse)  # a process's start upgrades it (a writer alone refuses an old warehouse)
    with db.writer(warehouse) as con:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        version = con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]
    assert {"alerts", "alert_deliveries"} <= tables and version == schema.SCHEMA_VERSION


def test_alerts_list_shows_the_open_ones_scoped_to_a_team(tmp_path):
    config = write_config(
        tmp_path,
        budgets='[[budgets]]\nname = "v"\namount = 1000\nscope = { teams = ["vision"] }\n'
        '[[budgets]]\nname = "all"\namount = 1000\n',
        alerts="email = false",
    )
    db_path = config_mod.load(config).warehouse_path
    add_spend(db_path, "vision", date(2026, 10, 1), 3, 400.0)
    run = cli_process.run("--config", str(config), "alerts", "run", "--now", "2026-10-04T06:00")
    assert run.returncode == 0 and "opened 8" in run.stdout, run.stdout + run.stderr
    listed = cli_process.run("--config", str(config), "alerts", "list", "--format", "json")
    alerts = json.loads(listed.stdout)
    assert len(alerts) == 8 and {a["scope"] for a in alerts} == {"v", "all"} and alerts[0]["severity"] == "critical"
    assert all(isinstance(a["value_usd"], float) and a["status"] == "open" for a in alerts)
    team = cli_process.run("--config", str(config), "alerts", "list", "--team", "vision")
    assert team.returncode == 0 and team.stdout.count("Budget v:") == 4 and "Budget all" not in team.stdout
