"""The Overview's cost anomalies show the line items that moved them, each with its resource, service and
change in columns of their own that a 1440 px window keeps (``labels.fitting``: the columns past a table's
width go to its column menu), on the demo through Streamlit's AppTest and on hostile line items."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from gpufinops.dashboard import anomalies_view, labels
from tests.demo_cache import demo_copy
from tests.test_dashboard import make_app, open_page

WANTED = ["resource", "service", "change_usd"]


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14)
    return home / "data" / "gpufinops.duckdb"


def test_overview_anomalies_keep_their_line_item_columns(monkeypatch, demo_warehouse) -> None:
    at = open_page(make_app(monkeypatch, demo_warehouse), "overview", "Anomalies")
    frames = {tuple(f.value.columns): f for f in at.dataframe}
    anomalies = next(f.value for cols, f in frames.items() if "expected_usd" in cols)
    items = next((f for cols, f in frames.items() if "change_usd" in cols), None)
    assert items is not None, f"no line-item table on the Overview: {list(frames)}"
    kept = list(items.proto.column_order)
    assert kept[:3] == WANTED and "day" in kept, kept
    rows = items.value
    assert len(rows) > 0
    for row in rows.itertuples():
        assert row.resource and not row.resource.startswith(("//", "/subscriptions/")), row
        assert "\n" not in row.resource and row.service, row
        assert math.isfinite(row.change_usd) and row.change_usd != 0, row
    # every line item belongs to an anomaly the table above lists (its day and team)
    listed = {(str(d)[:10], t) for d, t in zip(anomalies["day"], anomalies["team"], strict=True)}
    assert {(str(d)[:10], t) for d, t in zip(rows["day"], rows["team"], strict=True)} <= listed


def _anomaly(items: object) -> dict[str, object]:
    text = items if isinstance(items, str) else json.dumps(items)
    return {"day": date(2026, 10, 30), "team": "nlp", "top_line_items": text}


def test_hostile_line_items_read_whole_and_fit() -> None:
    """Text that is no JSON list holds no items; CR/LF, blanks, NaN, ±inf and path-long ids never reach a
    cell as they came; the three wanted columns are the ones a 1440 px table keeps."""
    gcp = "//compute.googleapis.com/projects/ml-prod/zones/us-central1-a/disks/" + "train-boot-" * 3 + "1"
    azure = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-a100-7"
    frame = pl.DataFrame(
        [
            _anomaly("not json {"),
            _anomaly({"resource_id": "i-1"}),
            _anomaly(
                [
                    {"resource_id": "i-0abc\r\nevil", "service": "  ", "delta_usd": math.nan, "cost_usd": 3},
                    {"resource_id": gcp, "service": "Amazon Elastic Compute Cloud", "delta_usd": 12.5},
                    {"resource_id": azure, "service": "Virtual Machines", "delta_usd": -math.inf},
                    {"service": "Networking", "delta_usd": "-40.25"},
                    "a bare string",
                ]
            ),
        ]
    )
    items = anomalies_view.line_items(frame)
    assert items["resource"].to_list() == [
        "(no resource id)",
        "train-boot-train-boot-train-boot-1",
        "i-0abc evil",
        "vm-a100-7",
    ]
    assert items["change_usd"].to_list() == [-40.25, 12.5, None, None]
    assert items["service"].to_list()[2] == "(no service)"
    assert items["resource_id"].to_list()[1:] == [gcp, "i-0abc evil", azure]
    shown = labels.view(items, dates=("day",))
    assert labels.fitting(shown, list(shown.columns))[:3] == WANTED
