"""Operator output: what a command prints is for a person (a readable table) or a machine (JSON, CSV that any
reader parses): a binary column is written as hex rather than failing, and ``evaluate``'s sections read as text."""

from __future__ import annotations

import csv
import io
import json

from gpufinops.interfaces import cli
from gpufinops.jobs import evaluate
from gpufinops.warehouse import db


def test_sql_writes_a_binary_column_as_hex_in_csv_and_json(tmp_path, capsys) -> None:
    warehouse = tmp_path / "wh.duckdb"
    with db.writer(warehouse) as con:  # a stored page result: its frame is a BLOB (Arrow IPC bytes)
        con.execute(
            "INSERT INTO stored_results (name, scope, data_version, computed_at, seconds, frame) "
            "VALUES ('outlook', '*', 'v1', now(), 1.5, ?)",
            [b"ARROW1\x00\xff"],
        ).fetchall()
    query = "SELECT name, frame, hex(frame) AS duckdb_hex FROM stored_results"
    capsys.readouterr()
    assert cli.main(["--db", str(warehouse), "sql", query, "--format", "csv"]) == 0
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["frame"] == row["duckdb_hex"] == b"ARROW1\x00\xff".hex().upper()
    assert cli.main(["--db", str(warehouse), "sql", query, "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["frame"] == record["duckdb_hex"]


def test_evaluate_renders_every_section_as_text_not_json() -> None:
    result = {
        "fleets": [],
        "others": {"storage": {"volume_findings": 3, "savings_usd": 1234.5, "by_kind": {"orphan": [1, 2]}}},
    }
    text = evaluate.render(result)
    assert "{" not in text and '"' not in text
    assert "storage" in text and "volume findings: 3" in text and "orphan:" in text and "1, 2" in text


def test_the_demo_summary_finding_table_reads_labels_never_split_codes() -> None:
    """The demo summary's findings at a narrow terminal: kinds, plans and providers are labels, so a column
    wraps between words; a code (``checkpoint_lifecycle``) had no space and was cut mid-word."""
    import re

    from gpufinops.jobs import demo_summary, output
    from gpufinops.models import plans, registry
    from tests.feed_fleet import realistic_recommendations

    recs = plans.reconcile(realistic_recommendations())
    out = io.StringIO()
    output.print_table([demo_summary._rec_row(r) for r in recs], demo_summary.FINDING_COLUMNS, out=out, width=100)
    text = out.getvalue()
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text.replace("s3://", "")), text  # no snake_case code
    assert not re.search(r"(?m)^\s*(aws|gcp|onprem)\b|\s(aws|gcp|onprem)\s", text), text  # no provider code
    kinds = {r.kind for r in recs}
    for spec in registry.MODELS:
        if spec.kind in kinds:  # each label's words stay whole (a wrap may put them on two lines)
            assert all(word in text for word in spec.label.split()), spec.label


def test_evaluate_says_each_step_on_stderr_and_ends_in_a_table(monkeypatch, capsys) -> None:
    """`evaluate` off a terminal (a log file): one progress line a step on stderr, the figures as text on
    stdout; --format json the raw structure. The measurement itself (minutes of simulated fleets) is replaced
    by one that reports two steps and returns a small result: what is tested is the command's output."""

    def measured(*, step=None, **_kwargs):
        for name in ("fleet A", "fleet B"):
            step.start(f"simulating {name}")
            step.done()
        return {"fleets": [], "others": {"storage": {"volume_findings": 3}}}

    monkeypatch.setattr(evaluate, "evaluate", measured)
    monkeypatch.delenv("GPUFINOPS_NO_PROGRESS", raising=False)
    assert cli.main(["evaluate", "--quick"]) == 0
    captured = capsys.readouterr()
    assert "gpufinops evaluate: [1/" in captured.err and "simulating fleet B" in captured.err, captured.err
    assert "volume findings: 3" in captured.out and "{" not in captured.out
    assert cli.main(["evaluate", "--quick", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["others"]["storage"]["volume_findings"] == 3
