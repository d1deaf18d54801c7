"""The MCP tests' home and client helpers (tests/test_mcp.py over stdio, tests/test_mcp_http.py over
streamable HTTP): the API tests' warehouse (tests/feed_fleet.py's cost lines and findings) with
shared-GPU allocation rows, budgets and the alerts `alerts run` raised on them; calls through the
SDK's ClientSession, and the teams an answer names."""

from __future__ import annotations

import shutil
import sys
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.feed_fleet import FLEET, HOURS, START
from tests.test_api import API_TOML, TOKENS
from tests.toml_config import budget

FINANCE, VISION, SCHEDULER = TOKENS  # the variables' names
GPUFINOPS = str(Path(sys.executable).parent / "gpufinops")
WAIT_S = 180  # the longest any one exchange may take (a cold start took 60 s at load average 11 on 2 cores)
BUDGETS_TOML = "\n".join(
    [budget("vision-gpus", 2000, ["vision"]), budget("nlp-gpus", 500, ["nlp"]), budget("fleet", 100000)]
)
TEAMS = {team for team, *_ in FLEET}


def build_home(home: Path, feed_template: Path) -> Path:
    """A config and warehouse: the feed fleet, vision's node i-0vision0001 shared with an nlp pod (its
    idle share unallocated), the cost rollup refreshed, budgets configured and their alerts raised."""
    from gpufinops.derived import rollups
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs.alerts import run as alerts_run
    from gpufinops.warehouse import db

    warehouse = home / "gpufinops.duckdb"
    shutil.copyfile(feed_template, warehouse)
    with db.writer(warehouse) as con:
        rows = [
            (START + timedelta(hours=h), team, pod, share, Decimal(cost), basis, method)
            for h in range(HOURS)
            for team, pod, share, cost, basis, method in (
                ("vision", "vision-train-0", 0.5, "1.3725", "timeslice", "presence"),
                ("nlp", "nlp-embed-0", 0.25, "0.68625", "timeslice", "presence"),
                ("vision", None, 0.25, "0.68625", "unallocated", "idle"),
            )
        ]
        con.executemany(
            """INSERT INTO gpu_allocation_hourly (hour, resource_id, provider, host, gpu_uuid, namespace, pod,
               team, share, cost_usd, basis, method, source, owner_team, service)
               VALUES (?, 'i-0vision0001', 'AWS', 'ip-10-0-0-1', 'GPU-0001', ?, ?, ?, ?, ?, ?, ?, 'dcgm', 'vision',
                       'Compute')""",
            [
                (hour, team, pod, team, share, cost, basis, method)
                for hour, team, pod, share, cost, basis, method in rows
            ],
        )
        rollups.refresh_cost_daily(con)
    config = home / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n{API_TOML}{BUDGETS_TOML}')
    cfg = config_mod.load(str(config), environ={})
    alerts_run.run(cfg, now=START + timedelta(hours=HOURS), send=False)
    return config


def config_of(home: Path):
    from gpufinops.jobs import config as config_mod

    return config_mod.load(str(home), environ={})


CALLS: dict[str, dict[str, Any]] = {  # every tool, with arguments that exercise it
    "costs_daily": {},
    "gpu_allocation": {},
    "recommendations": {"status": "open"},
    "plans": {},
    "alerts": {"status": "all"},
    "budgets": {},
    "costs": {"by": "team", "cost": "gpu"},
    "unit_costs": {"period": "month"},
    "carbon": {"period": "week"},
    "storage_findings": {},
    "withheld_findings": {},
    "coverage": {},
}


async def call(session, name: str, arguments: dict[str, Any] | None = None) -> tuple[bool, Any]:
    """(is_error, the structured answer or the error text)."""
    result = await session.call_tool(name, arguments or {})
    if result.is_error:
        return True, " ".join(getattr(c, "text", "") for c in result.content)
    return False, result.structured_content


def teams_in(answer: Any) -> set[str]:
    """Every team an answer names, wherever it sits (a row's team, an alert's teams, a budget's scope)."""
    found: set[str] = set()
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("team", "owner_team") and isinstance(value, str):
                found.add(value)
            elif key == "teams" and isinstance(value, list):
                found |= {v for v in value if isinstance(v, str)}
            elif key == "effective_cost_by_team" and isinstance(value, dict):
                found |= set(value)
            else:
                found |= teams_in(value)
    elif isinstance(answer, list):
        for value in answer:
            found |= teams_in(value)
    return found


async def every_tool(session) -> dict[str, Any]:
    tools = await session.list_tools()
    answers: dict[str, Any] = {"tools": {t.name: t for t in tools.tools}}
    for name, arguments in CALLS.items():
        answers[name] = await call(session, name, arguments)
    answers["nlp_costs"] = await call(session, "costs_daily", {"team": "nlp"})
    answers["bad_day"] = await call(session, "costs_daily", {"start": "2026-13-01"})
    return answers
