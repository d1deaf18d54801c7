"""Terminal layouts people read, at 80, 120 and 200 columns: `sql` draws a table only when every
column fits whole (else one block per row), never clips a number nor splits a header or an id;
`alerts list` reads as labels, percentages and days; every command that writes a file says what it
wrote. CSV / JSON are untouched."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gpufinops.interfaces import cli
from gpufinops.jobs import layouts, output
from gpufinops.kernel import labels

WIDTHS = (80, 120, 200)
RUN_ID = "13859f1361d74ae2b9497f17b24fbc64"


def ingest_runs_frame() -> pl.DataFrame:
    t = datetime(2026, 12, 1, 22, 10, tzinfo=UTC)
    return pl.DataFrame(
        {
            "run_id": [RUN_ID, "ff0817ddaf2047549cf4f96741046806"],
            "source": ["gpu_metrics", "aws_cur"],
            "source_type": ["dcgm_exporter", "aws_cur"],
            "started_at": [t, t],
            "finished_at": [t, None],
            "status": ["succeeded", "failed"],
            "rows": [139_420, 16_809],
            "watermark": ["2026-11-01T05:00:00+00:00", None],
            "error": [None, "aws_cur: s3://bucket/prefix/manifest.json: AccessDenied when reading the manifest"],
            "rows_rejected": [0, 12],
        }
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_sql_never_clips_a_value_nor_splits_a_header(width: int) -> None:
    frame = ingest_runs_frame()
    text = layouts.frame_text(frame, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    for value in (RUN_ID, "139,420", "16,809", "2026-11-01T05:00:00+00:00", "2026-12-01 22:10 UTC"):
        assert any(value in line for line in lines), (value, text)  # whole, on one line
    for name in frame.columns:  # every header whole
        assert any(name in line.split() for line in lines), (name, text)
    assert lines[-1] == "(2 rows)"


def test_sql_picks_records_when_narrow_and_a_table_when_wide() -> None:
    frame = ingest_runs_frame()
    narrow = layouts.frame_text(frame, 120)
    assert narrow.startswith("── row 1 of 2") and "rows           139,420" in narrow
    assert layouts.frame_text(frame, 200).startswith("── row 1 of 2")  # the error's longest word does not fit
    wide = layouts.frame_text(frame.with_columns(pl.lit("AccessDenied").alias("error")), width=200)
    assert wide.splitlines()[0].split() == frame.columns  # one header line: a table
    small = layouts.frame_text(pl.DataFrame({"source": ["aws_cur"], "rows": [3]}), width=80)
    assert small.splitlines()[0].split() == ["source", "rows"]


def test_sql_layout_with_hostile_values() -> None:
    frame = pl.DataFrame({"x": [float("nan"), float("inf"), -1.5], "t": ["a\r\nb", "", "x" * 300]})
    for width in WIDTHS:
        text = layouts.frame_text(frame, width)
        assert all(len(line) <= width for line in text.splitlines())
        assert "-1.5" in text
    assert layouts.frame_text(pl.DataFrame(), 80).startswith("(no columns)")


def test_formats_unchanged() -> None:
    frame = ingest_runs_frame().select("run_id", "rows")
    assert output.render(frame, "csv").splitlines()[1] == f"{RUN_ID},139420"
    assert json.loads(output.render(frame, "json"))[0]["rows"] == 139_420


ALERTS = [
    {
        "severity": "critical",
        "rule": "budget",
        "scope": "research-gpu",
        "period": "2026-10",
        "threshold": "1",
        "teams": ["research"],
        "title": "Budget research-gpu: 100 % reached in 2026-10",
        "opened_at": datetime(2026, 11, 1, 0, 30, tzinfo=UTC),
        "status": "open",
    },
    {
        "severity": "warning",
        "rule": "idle_burn",
        "scope": "//compute.googleapis.com/projects/research-sbx-1177/zones/us-central1-a/instances/research-a2-sweep",
        "period": "2026-09-02T00:00:00+00:00",
        "threshold": "6h/$50.00",
        "teams": [],
        "title": "Idle GPUs: //compute.googleapis.com/projects/research-sbx-1177/zones/us-central1-a/instances/"
        "research-a2-sweep (research) idle for 1440 h",
        "opened_at": datetime(2026, 11, 1, 0, 30, tzinfo=UTC),
        "status": "open",
    },
    {
        "severity": "info",
        "rule": "budget",
        "scope": "fleet",
        "period": "2026-10",
        "threshold": "0.75",
        "teams": None,
        "title": "Budget fleet: 75 % reached in 2026-10",
        "opened_at": None,
        "status": "open",
    },
]


@pytest.mark.parametrize("width", WIDTHS)
def test_alerts_list_reads_as_words(width: int) -> None:
    text = layouts.alerts_text(ALERTS, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    assert "Critical" in text and "Warning" in text and "critical" not in text
    assert "2026-09-02" in text and "T00:00" not in text and "+00:00" not in text
    scope_lines = [line for line in lines if "research-a2-sweep" in line]
    assert len(scope_lines) <= 3, text  # the URL is shortened, not spread over many lines
    if width >= 120:
        assert "100 %" in text and "75 %" in text and "Idle GPU spend" in text
    if width >= 200:
        assert "(unattributed)" in text and "Open" in text
    if width < 100:
        assert "threshold" in lines[-1] or "threshold" in lines[-2]  # the caption says where hidden columns are


def test_threshold_and_period_text() -> None:
    assert labels.threshold_text("budget", "0.9") == "90 %"
    assert labels.threshold_text("budget_forecast", "1") == "100 %"
    assert labels.threshold_text("budget", "NaN?") == "NaN?"
    assert labels.threshold_text("idle_burn", "6h/$50.00") == "6h/$50.00"
    assert labels.period_text("2026-10") == "2026-10"
    assert labels.period_text("2026-09-02T00:00:00+00:00") == "2026-09-02"
    assert labels.period_text("2026-09-02T13:05:00+00:00") == "2026-09-02 13:05 UTC"
    assert labels.period_text(None) == "-"


def test_every_export_says_what_it_wrote(feed_warehouse: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{feed_warehouse}"\n')
    for fmt in ("json", "kueue", "karpenter", "skypilot"):
        target = tmp_path / f"out.{fmt}"
        assert cli.main(["--config", str(config), "export", fmt, "--out", str(target)]) == 0
        said = capsys.readouterr().out.strip()
        assert said.startswith(f"wrote {target} (") and "/month" in said, said
        assert target.exists() and target.read_text() not in said
        if fmt == "json":
            n = len(json.loads(target.read_text()))
            assert f"{n} recommendation objects" in said
    target = tmp_path / "focus.csv"
    assert cli.main(["--config", str(config), "export", "focus", "--out", str(target)]) == 0
    said = capsys.readouterr().out.strip()
    rows = target.read_text().count("\n") - 1
    assert said.startswith(f"wrote {target} (") and f"{rows:,} rows" in said, said


def test_wrote_names_size_and_detail(tmp_path: Path, capsys) -> None:
    path = tmp_path / "x.txt"
    path.write_text("x" * 2_500)
    layouts.wrote(path, "3 things")
    assert capsys.readouterr().out == f"wrote {path} (2.5 kB): 3 things\n"
    layouts.wrote(tmp_path / "missing")
    assert capsys.readouterr().out == f"wrote {tmp_path / 'missing'}\n"
