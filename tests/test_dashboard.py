"""The dashboard renders the warehouse read-only (Streamlit AppTest), and says when auth is off."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.runner import run_source
from tests.conftest import FOCUS_SAMPLE

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


@pytest.fixture
def app(monkeypatch, warehouse):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GPUFINOPS_DB", str(warehouse))
    return AppTest.from_file(str(APP), default_timeout=60)


def test_dashboard_shows_spend_from_the_warehouse(app, focus_registry, warehouse):
    run_source(focus_registry, warehouse, "focus", "focus_files", {"path": str(FOCUS_SAMPLE)})
    app.run()
    assert not app.exception
    assert "No authentication is configured" in app.warning[0].value
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Spend (effective)"] == "$14.98"  # EffectiveCost of the sample: 13.00 + 1.98 + 0.00
    health = app.dataframe[-1].value
    assert list(health["source"]) == ["focus"] and list(health["last_status"]) == ["succeeded"]


def test_dashboard_without_a_warehouse_says_what_to_do(app):
    app.run()
    assert not app.exception
    assert "does not exist yet" in app.error[0].value
