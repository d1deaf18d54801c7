"""`gpufinops enforce simulate`: a month replayed hour by hour under a budget's cap, on a warehouse of
hourly GPU cost lines (tests/alert_fleet.py) and, slow, on the demo fleet."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest

from gpufinops.interfaces.cli import main
from gpufinops.jobs import config as config_mod
from gpufinops.jobs.enforce import simulate
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.models.budgets import Budget, BudgetScope
from gpufinops.warehouse import db
from tests.alert_fleet import Resource, add_spend, write_config

OCT = date(2026, 10, 1)


@pytest.fixture
def month(tmp_path):
    """Research: one 8-GPU instance all October at $480 a day ($14,880), a volume at $10 a day."""
    config = write_config(tmp_path)
    cfg = config_mod.load(config)
    add_spend(cfg.warehouse_path, "research", OCT, 31, 480.0, source="gpu")
    add_spend(cfg.warehouse_path, "research", OCT, 31, 10.0, source="vol", resource=Resource("vol-1", gpu_model=None))
    add_spend(cfg.warehouse_path, "vision", OCT, 31, 999.0, source="other")  # another team: not replayed
    return cfg, config


def _replay(cfg, amount: str, policy: str = "cap", workload_hours: int = 24):
    budget = Budget("research-gpu", Decimal(amount), scope=BudgetScope(teams=("research",)), enforce=policy)
    with db.reader(cfg.warehouse_path) as con:
        return simulate.replay(
            con, budget, "2026-10", policy=policy, interval_hours=1, workload_hours=workload_hours,
            settings=ExportSettings(),
        )  # fmt: skip


@pytest.mark.parametrize("policy", ["cap", "hold", "drain"])
def test_a_budget_a_third_of_the_demand_ends_within_it_and_states_the_lost_work(month, policy):
    cfg, _config = month
    result = _replay(cfg, "5000", policy)
    assert result.spend_without == Decimal("15190.00")  # 31 × (480 + 10)
    assert result.spend_with <= Decimal("5000")
    assert result.fixed_spend == Decimal("310.00")  # the volume is spent either way
    assert result.gpu_hours_asked == 31 * 24 * 8
    assert result.gpu_hours_run + result.gpu_hours_refused == result.gpu_hours_asked
    assert result.gpu_hours_refused > 0 and result.first_bite is not None
    # what ran cost the instance's $20/h: the GPU spend is the GPU-hours run at its price
    assert result.spend_with - result.fixed_spend == Decimal(result.gpu_hours_run) / 8 * 20


def test_a_budget_above_the_demand_never_bites(month):
    cfg, _config = month
    result = _replay(cfg, "20000")
    assert result.first_bite is None and result.gpu_hours_refused == 0 and result.gpu_hours_delayed == 0
    assert result.spend_with == result.spend_without == Decimal("15190.00")


def test_the_command_prints_the_figures_and_refuses_bad_input(month, tmp_path, capsys):
    _cfg, config = month
    text = config.read_text() + (
        '\n[[budgets]]\nname = "research-gpu"\namount = 5000\nscope = { teams = ["research"] }\nenforce = "cap"\n'
    )
    config.write_text(text)
    argv = ["--config", str(config), "enforce", "simulate", "--budget", "research-gpu", "--month", "2026-10"]
    assert main([*argv, "--output", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert Decimal(found["spend_with"]) <= 5000 and found["first_bite"].startswith("2026-10-")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "spend without enforcement: $15,190.00" in out and "refused" in out and "first hour the cap bit" in out
    assert main(argv[:-1] + ["2026-13"]) == 2
    assert "not a month" in capsys.readouterr().err
    assert main(argv[:-3] + ["nope", "--month", "2026-10"]) == 2
    assert main(argv[:-2] + ["--month", "2026-09"]) == 1  # no lines of research in September
    assert main([*argv, "--workload-hours", "0"]) == 2


@pytest.mark.slow
def test_the_demo_team_three_times_over_its_budget_ends_within_it_under_cap(tmp_path_factory, capsys):
    from tests.demo_cache import demo_copy

    home = tmp_path_factory.mktemp("enforce-demo")
    demo_copy(tmp_path_factory, home, days=60)  # the demo's defaults: `gpufinops demo` builds the same fleet
    config = home / "gpufinops.toml"
    argv = ["--config", str(config), "enforce", "simulate", "--budget", "research-gpu", "--month", "2026-10"]
    assert main([*argv, "--policy", "cap", "--output", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    amount, without, with_ = (Decimal(found[k]) for k in ("amount", "spend_without", "spend_with"))
    assert amount == 12000 and without / amount > 3  # the research team's October: ~306 % of its budget
    assert with_ <= amount
    assert found["gpu_hours_refused"] > 0 and found["first_bite"] is not None
    with db.reader(home / "data" / "gpufinops.duckdb") as con:  # the replay's "without" is the budget's own sum
        spent = con.execute(
            "SELECT sum(effective_cost) FROM cost_daily WHERE team = 'research' AND day >= '2026-10-01' "
            "AND day < '2026-11-01'"
        ).fetchone()[0]
    assert without == Decimal(spent).quantize(Decimal("0.01"))
