"""Why a unit-cost result is empty: which of its filters matched nothing, never a missing source it has.

A team that serves nothing, a misspelt model name and a window before the counters start are three answers,
and only an account without any token counters lacks a source (``warehouse/inputs.py``: ``serving``). The
CLI (``gpufinops unit-costs``), the dashboard's Unit costs page and the API say the same sentence.
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from gpufinops.derived import unit_costs
from gpufinops.warehouse.inputs import INPUTS

LISTED = 12  # names listed in a sentence before "and N more"


def _names(values: list[str]) -> str:
    shown = ", ".join(values[:LISTED])
    return shown + (f" and {len(values) - LISTED} more" if len(values) > LISTED else "")


def why_empty(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    model: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> str:
    """One sentence: the filter that matched nothing (the models or teams there are), or the missing source."""
    serving = INPUTS["serving"]
    span = con.execute("SELECT min(hour), max(hour) FROM serving_metrics_hourly").fetchall()[0]
    if span is None or span[0] is None:
        return f"unit costs are unknown: no {serving.label} are loaded ({serving.hint()})"
    first, last = span
    if (start is not None and start > last) or (end is not None and end <= first):
        return f"no {serving.label} in this window: they cover {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC"
    everyone = unit_costs.unit_costs(con, by="model", start=start, end=end, period=unit_costs.WHOLE)
    models = sorted({m for m in everyone["model"].to_list() if m})
    if model is not None and model not in models:
        return f"no model named {model!r} served in this window; the models there are: {_names(models) or 'none'}"
    if team is not None:
        teams = [team] if isinstance(team, str) else list(team)
        serving_teams = sorted({t for t in everyone["team"].to_list() if t})
        which = f"model {model!r}" if model is not None else "no model"
        return (
            f"{'team' if len(teams) == 1 else 'teams'} {', '.join(teams)} served {which} in this window"
            f"{'' if model is None else ' (not theirs)'}; the teams serving are: {_names(serving_teams) or 'none'}"
        )
    return "no serving pod ran on a billed GPU in this window (the counters name no billed resource)"
