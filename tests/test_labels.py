"""The one label table (kernel/labels.py): every code a registry or an enum can produce has its own
human label (the registries are iterated, so a new kind, rule, role or pattern fails here until it is
named), codes found in real findings too, and the API's `*_label` fields are additive."""

from __future__ import annotations

import pytest

from gpufinops.kernel import labels


def registered_codes() -> dict[str, set[str]]:
    """Every code each registry or enum declares, by the label table it belongs in."""
    from gpufinops.dashboard.settings import DASHBOARD_ROLES
    from gpufinops.ingest.gcp.gcp_price_history import PRICINGS
    from gpufinops.jobs.api_settings import TOKEN_ROLES
    from gpufinops.jobs.report.settings import REPORT_ROLES
    from gpufinops.models import idle, onprem_vs_cloud, plans
    from gpufinops.models.alert_records import ALERT_RULES, RULES, SEVERITIES, STATUSES
    from gpufinops.models.features import RightsizingSettings
    from gpufinops.models.recommendation import WITHHOLD_REASONS
    from gpufinops.models.registry import KINDS
    from gpufinops.simulator.demo_workloads import FLEET
    from gpufinops.warehouse.recommendation_read import STATUSES as RECOMMENDATION_STATUSES

    return {
        "kind": set(KINDS),
        "rule": set(ALERT_RULES) | set(RULES),
        "severity": set(SEVERITIES),
        "status": set(STATUSES) | set(RECOMMENDATION_STATUSES) | {"running", "succeeded", "failed", "skipped"},
        "role": set(TOKEN_ROLES) | set(REPORT_ROLES) | set(DASHBOARD_ROLES),
        "reason": set(WITHHOLD_REASONS),
        "pattern": set(idle._ACTIONS),
        "state": {state for _, state, _ in idle._ACTIONS.values()},
        "pricing": {p for p, _ in PRICINGS.values()} | set(onprem_vs_cloud.PAY_PER_USE),
        "workload": {s.workload for s in FLEET} | set(RightsizingSettings().inference_workloads),
        "plan": set(plans.COUNTED) | {"alternative"},
    }


def finding_codes() -> dict[str, set[str]]:
    """Every code in a realistic set of findings of every kind (tests/feed_fleet.py)."""
    from tests.feed_fleet import realistic_recommendations

    found: dict[str, set[str]] = {k: set() for k in ("kind", "pattern", "pricing", "state", "workload", "plan")}
    from gpufinops.models import plans

    for rec in plans.reconcile(realistic_recommendations()):
        found["kind"].add(rec.kind)
        if rec.workload and labels.is_code(rec.workload):  # a class (batch_inference), not a name (vision-train)
            found["workload"].add(rec.workload)
        if rec.plan:
            found["plan"].add(rec.plan)
        if isinstance((rec.evidence or {}).get("pattern"), str):
            found["pattern"].add(rec.evidence["pattern"])
        for side in (rec.current, rec.proposed):
            for key in ("pricing", "state"):
                if isinstance((side or {}).get(key), str):
                    found[key].add(side[key])
    return found


@pytest.mark.parametrize("source", ["registries", "findings"])
def test_every_code_has_its_own_label(source: str) -> None:
    codes = registered_codes() if source == "registries" else finding_codes()
    missing = {field: sorted(c for c in values if c not in labels.TABLES[field]) for field, values in codes.items()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"codes without a label in kernel/labels.py: {missing}"
    for field, values in codes.items():
        for code in values:
            text = labels.label(code, field)
            assert not labels.is_code(text) and text.strip() and "_" not in text, (field, code, text)


def test_label_falls_back_to_words_and_keeps_plain_text() -> None:
    assert labels.label("idle_gpu") == "Idle GPU"
    assert labels.label("spot_mix", "pricing") == "Spot mix"
    assert labels.label("brand_new_code") == "Brand new code"
    assert labels.label("vision") == "vision"  # a team's name is not a code
    assert labels.label(None) == "—" and labels.label("") == "—"
    assert labels.words("gpu_hours") == "GPU hours"
    assert labels.is_code("always_idle") and not labels.is_code("Always idle") and not labels.is_code("vision")


def test_with_labels_is_additive() -> None:
    record = {
        "kind": "idle_gpu",
        "team": None,
        "status": "open",
        "evidence": {"pattern": "always_idle"},
        "current": {"pricing": "on_demand", "gpu_count": 8},
        "proposed": {"state": "released"},
    }
    out = labels.with_labels(record)
    assert {k: out[k] for k in record} == record  # every code unchanged
    assert out["kind_label"] == "Idle GPU" and out["pattern_label"] == "Always idle"
    assert out["status_label"] == "Open" and out["team_label"] == labels.NO_TEAM
    assert out["current_pricing_label"] == "On-demand" and out["proposed_state_label"] == "Released"
    assert labels.with_labels({"pattern": "keep_onprem"})["pattern_label"] == "Keep on-prem"


@pytest.mark.parametrize(
    ("hours", "text"),
    [
        (740.5, "31 days"),
        (0.5, "30 minutes"),
        (1.0, "1 hour"),
        (5.2, "5 hours"),
        (47.9, "48 hours"),
        (None, "—"),
        (float("nan"), "—"),
        (float("inf"), "—"),
        (-3, "in the future"),
    ],
)
def test_age_reads_as_people_say_it(hours, text) -> None:
    assert labels.age(hours) == text


def sql_codes(column: str) -> set[str]:
    """Every value the shared-GPU allocation's SQL writes to ``column`` (its CASE branches and literals)."""
    import re
    from pathlib import Path

    from gpufinops.derived import allocation_sql

    sql = Path(allocation_sql.__file__).read_text()
    cases = re.findall(rf"CASE((?:(?!CASE).)*?)END AS {column}\b", sql, flags=re.DOTALL)
    return {code for case in cases for code in re.findall(r"'(\w+)'", case)} | set(
        re.findall(rf"'(\w+)' AS {column}\b", sql)
    )


@pytest.mark.parametrize("column, table", [("method", "method"), ("basis", "basis")])
def test_every_allocation_code_has_a_label(column: str, table: str) -> None:
    """The Team page shows an allocation row's basis and methods by their labels: each code the SQL can
    write has one, and the table names no code the SQL never writes."""
    written = sql_codes(column)
    assert len(written) >= 4, written  # the parse found the CASE
    assert written == set(labels.TABLES[table]), (written, set(labels.TABLES[table]))
    assert labels.labels_of(",".join(sorted(written)), table).count(",") == len(written) - 1


def test_energy_columns_read_in_their_units_on_the_dashboard(tmp_path) -> None:
    """Every column the carbon read model returns has a declared label with its unit written as units are
    ("kg CO₂e per GPU-hour", "kWh"), never a split code ("Kg co2e per GPU hour", "GPU kwh"); a GPU-hour of no
    team is the one team-of-none label, never a second one beside it."""
    from gpufinops.dashboard import labels as page_labels
    from gpufinops.warehouse import db
    from gpufinops.warehouse.queries import carbon

    with db.writer(tmp_path / "wh.duckdb") as con:
        con.execute(
            "INSERT INTO carbon_hourly (hour, resource_id, team, provider, region, gpu_hours) "
            "VALUES (TIMESTAMPTZ '2026-10-01 00:00:00+00', 'i-1', NULL, 'aws', 'us-east-1', 1)"
        ).fetchall()
        frame = carbon.carbon_summary(con, by="team")
    assert frame["team"].to_list() == [labels.NO_TEAM]
    for column in frame.columns:
        text = page_labels.label(column)
        assert column in page_labels.LABELS or column in ("team", "month"), column
        assert not any(bad in text for bad in ("Kg", "kwh", "co2e", "GPU hour ")), (column, text)


def test_a_kind_is_labelled_from_the_table_its_check_read(monkeypatch):
    """``label(code)`` without a field finds a kind among the kinds the registry handed down, and must take the
    label from that same table: a kind only the handed-down table holds (not the one TABLES was built with) was
    found there and then looked up in the other, a KeyError."""
    handed_down = {**labels.KINDS, "dummy_plugin_kind": "Dummy plug-in kind"}
    monkeypatch.setattr(labels, "KINDS", handed_down)
    assert labels.label("dummy_plugin_kind") == "Dummy plug-in kind"
    assert labels.label("dummy_plugin_kind", "kind") == "Dummy plug-in kind"


def test_a_table_shows_the_columns_that_fit_whole_and_names_the_rest():
    """A wide frame: the leading columns that fit the table's width are shown, the rest are named; a frame
    that fits keeps every column; the first two columns always stay."""
    import polars as pl

    from gpufinops.dashboard import labels as page_labels

    wide = pl.DataFrame({f"usd_per_1m_output_tokens_{i}": [123456.78] for i in range(12)})
    kept = page_labels.fitting(wide, wide.columns)
    assert 2 <= len(kept) < 12 and kept == wide.columns[: len(kept)]
    assert sum(page_labels.column_px(wide, c) for c in kept) <= page_labels.TABLE_WIDTH_PX
    narrow = pl.DataFrame({"team": ["nlp"], "gpu_cost": [1.0]})
    assert page_labels.fitting(narrow, narrow.columns) == narrow.columns
    assert page_labels.fitting(wide, wide.columns, width_px=10) == wide.columns[:2]


def test_a_table_sends_the_arrow_streamlit_would_make_through_pandas():
    """labels.table hands Streamlit an Arrow table made straight from the polars frame (no pandas copy on
    every render); the grid gets the same column types and values Streamlit's own pandas path makes of
    the frame, hostile values included (null ints, ±inf, a day, an instant, CR/LF in a name)."""
    from datetime import UTC, date, datetime
    from decimal import Decimal

    import polars as pl
    from streamlit import dataframe_util

    from gpufinops.dashboard import arrow_frames
    from gpufinops.dashboard import labels as page_labels

    frame = pl.DataFrame(
        {
            "team": ["nlp\r\nx", None, "vision"],
            "gpu_hours": [1, None, 3],
            "idle_cost": [Decimal("1.10"), None, Decimal("-2.50")],
            "util_mean": [float("inf"), float("-inf"), None],
            "day": [date(2026, 10, 1), None, date(2026, 10, 31)],
            "opened_at": [datetime(2026, 10, 1, 5, tzinfo=UTC), None, datetime(2026, 10, 31, 23, tzinfo=UTC)],
            "stale": [True, None, False],
        }
    )
    shown = page_labels.view(frame, dates=("day",))
    through_pandas = dataframe_util.convert_pandas_df_to_arrow_table(
        dataframe_util.convert_anything_to_pandas_df(shown)
    )
    direct = arrow_frames.arrow_table(shown)
    assert direct.schema.names == through_pandas.schema.names
    for name in direct.schema.names:
        assert direct.schema.field(name).type == through_pandas.schema.field(name).type, name
        assert direct.column(name).to_pylist() == through_pandas.column(name).to_pylist(), name


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        ("usd_per_1m_tokens_current", "$ per 1M tokens current"),  # an evidence key: was "(USD) per 1m tokens …"
        ("kg_co2e_month_saved", "kg CO₂e month saved"),  # was "Kg co2e month saved"
        ("node_kwh_estimated", "Node kWh estimated"),
        ("gpu_hours_x", "GPU hours x"),
        ("cost_usd_x", "Cost (USD) x"),  # USD not followed by "per" stays the unit in brackets
    ],
)
def test_a_field_without_a_label_reads_its_units_as_written(field: str, shown: str) -> None:
    from gpufinops.dashboard import labels as page_labels

    assert field not in page_labels.LABELS
    assert page_labels.label(field) == shown
