"""The weekly report's plain-text part, as a snapshot: every line on its own line (the conditional
clauses once ran two lines together: "…the week before)GPU spend: …"), in both variants of each
clause (a comparable previous week or the first week of data; a forecast or none; partial data;
a dashboard link). The figures are fixed here, so the snapshot checks the template and its
formatting, not the models. Set GPUFINOPS_UPDATE_SNAPSHOTS=1 to rewrite the files after an
intended change, then read the diff.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.jobs.report import render
from gpufinops.jobs.report.figures import TeamLine, WeekFigures
from gpufinops.jobs.report.weeks import parse_week
from gpufinops.warehouse.scope import Scope

SNAPSHOTS = Path(__file__).parent / "data" / "report"
WEEK = parse_week("2026-W43")
NOW = datetime(2026, 10, 26, 8, 0, tzinfo=UTC)


def _rec(
    rid: str,
    kind: str,
    team: str | None,
    resource: str,
    action: str,
    saving: str,
    gpus: tuple[int, str],
    confidence: float,
) -> dict:
    """``gpus``: what the resource runs now, (count, model)."""
    count, model = gpus
    return {
        "id": rid,
        "kind": kind,
        "team": team,
        "provider": "gcp" if resource.startswith("//") else "aws",
        "resource_id": resource,
        "monthly_savings_usd": Decimal(saving),
        "confidence": confidence,
        "risk": "",
        "current": {"gpu_count": count, "gpu_model": model, "monthly_cost_usd": float(saving) * 1.2},
        "proposed": {"action": action},
        "evidence": {"pattern": "always_idle" if kind == "idle_gpu" else None},
        "created_at": NOW,
        "plan": "primary",
        "plan_id": f"plan-{rid}",
    }


RECS = [
    _rec(
        "idle_gpu-1",
        "idle_gpu",
        "research",
        "i-06513270e269e0d37",
        "stop or release the resource",
        "16040.06",
        (8, "A100-40GB"),
        0.95,
    ),
    _rec(
        "gpu_type-1",
        "gpu_type",
        "nlp",
        "//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-c/instances/nlp-llm7b-serve",
        "move to g2-standard-4 (1× L4)",
        "3186.42",
        (1, "A100-80GB"),
        0.772,
    ),
    _rec(
        "commitment-1",
        "commitment",
        None,
        "i-0aaaaaaaaaaaaaaaa",
        "commit to 1 machine(s) for 1 year",
        "191.05",
        (1, "L4"),
        0.9,
    ),
]


def figures(*, first_week: bool) -> WeekFigures:
    f = WeekFigures(
        WEEK,
        Scope("finance", actor="test"),
        "UTC",
        spend=Decimal("34289.12"),
        previous_spend=Decimal("46923.40"),
        gpu_spend=Decimal("31656.00"),
        idle_cost=Decimal("6373.25"),
        idle_gpu_hours=2262,
        open_recommendations=RECS,
        previous_complete=not first_week,
        teams=[
            TeamLine("nlp", Decimal("14701"), Decimal("27480"), Decimal("14000"), Decimal("0"), Decimal("3186.42")),
            TeamLine(
                "research",
                Decimal("7932"),
                Decimal("7932"),
                Decimal("7000"),
                Decimal("6249"),
                Decimal("16040.06"),
                comparable=not first_week,
            ),
        ],
    )
    if first_week:  # data that stops on the Friday: the week is partial, and a source has gone stale
        f.data_through = datetime(2026, 10, 23, 17, 0, tzinfo=UTC)
        f.stale_sources = [{"source": "aws_cur", "message": "newest cost line is 3 days old (expected within 1 day)"}]
    else:
        f.withheld = [
            {"reason": "thin_evidence", "findings": 2, "kinds": "gpu_count"},
            {"reason": "unpriced", "findings": 1, "kinds": "gpu_type"},
        ]
        f.onprem = [
            {
                "node_group": "dc1/onprem-a100x8",
                "team": None,
                "action": "keep on-prem: $1.32 per used GPU-hour at 87.07% vs $3.17 on Google Cloud a2-ultragpu-1g spot",
            }
        ]
        f.forecast = {
            "month": "2026-10",
            "actual_to_date_usd": Decimal("154797"),
            "forecast_usd": Decimal("182367"),
            "lower_usd": Decimal("181452"),
            "upper_usd": Decimal("183281"),
            "complete": False,
        }
    return f


@pytest.mark.parametrize(
    "variant, first_week, url", [("full", False, None), ("first-week", True, "https://gpufinops.example.com")]
)
def test_the_text_part_matches_its_snapshot(monkeypatch, variant, first_week, url):
    monkeypatch.setattr(render, "collect", lambda con, week, scope, tz: figures(first_week=first_week))
    monkeypatch.setattr(render, "_images", lambda figs, recs: [])  # the charts are the HTML part's, not this test's
    text = render.render(None, WEEK, Scope("finance", actor="test"), dashboard_url=url, now=NOW).text
    snapshot = SNAPSHOTS / f"weekly-{variant}.txt"
    if os.environ.get("GPUFINOPS_UPDATE_SNAPSHOTS"):
        snapshot.write_text(text)
    assert text == snapshot.read_text()
    lines = text.splitlines()
    spend = next(i for i, line in enumerate(lines) if line.startswith("Spend this week:"))
    assert lines[spend + 1].startswith("GPU spend:")  # two lines, not one
    assert not any(")GPU" in line or "saving.Dashboard" in line for line in lines)
    assert text.endswith("\n")
    # no code or cut value a person would read: provider codes, an empty "()", None / NaN / null
    assert not re.search(r"\b(aws|gcp|onprem|azure|oci) ", text), text
    assert "()" not in text and not re.search(r"\b(None|NaN|nan|null)\b", text)
