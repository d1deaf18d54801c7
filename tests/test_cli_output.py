"""What the command line prints: tables that fit the terminal, ids elided in the middle, money with
separators and currency, never Python's None; machine-readable formats that stay exactly that; the
dashboard's CSV download is the CLI's CSV; a missing optional extra is one sentence with the install
commands; progress is drawn only on a terminal."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.jobs import cells, output
from gpufinops.jobs.cells import ID, MONEY, Col
from gpufinops.models.recommendation import FLAT_COLUMNS, change_text, flat_csv
from tests.conftest import query
from tests.demo_cache import demo_copy

GCP_ID = "//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-c/instances/nlp-llm7b-serve"


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14, seed=3)
    return home


def cli(*args: str, columns: int = 100, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(columns), **(env or {})},
    )


def test_money_ids_and_missing_values_read_at_a_glance():
    assert cells.money(Decimal("4548.5")) == "$4,548.50" and cells.money(-12) == "-$12.00"
    assert cells.money(Decimal("1200"), "CHF") == "1,200.00 CHF" and cells.money(None) == cells.MISSING
    assert (
        cells.elide_middle(GCP_ID, 40).endswith("/instances/nlp-llm7b-serve")
        and len(cells.elide_middle(GCP_ID, 40)) == 40
    )
    assert cells.elide_middle("i-0a170b33839263059", 40) == "i-0a170b33839263059"
    assert (
        change_text({"instance_type": "g5.48xlarge", "gpu_count": 8}, {"instance_type": None, "gpu_count": 2})
        == "gpu_count 8 → 2"
    )  # a key the proposal leaves open is no change, not "g5.48xlarge→None"
    assert change_text({}, {"state": "released"}) == "state → released"  # not "state None→released"


@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_table_fits_its_width_and_keeps_the_instance_name(width):
    rows = [
        {"resource_id": GCP_ID, "monthly_savings_usd": Decimal("4548.5"), "action": "move to g2-standard-4 " * 4},
        {"resource_id": "i-0a170b33839263059", "monthly_savings_usd": None, "action": None},
    ]
    text = output.table_text(
        rows,
        [
            Col("resource_id", "Resource", ID),
            Col("monthly_savings_usd", "Savings/mo", MONEY),
            Col("action", "Action", cells.WRAP),
        ],
        width=width,
    )
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width and not any(line != line.rstrip() for line in lines)
    assert "nlp-llm7b-serve" in text and "i-0a170b33839263059" in text and "$4,548.50" in text
    assert "None" not in text


def test_recommend_table_csv_and_json(demo_home):
    config = str(demo_home / "gpufinops.toml")
    table = cli("--config", config, "recommend", columns=100)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "None" not in table.stdout, [line for line in lines if "None" in line]
    assert "$" in table.stdout and "research-a2-sweep" in table.stdout
    assert "IDs (for decisions and the API)" in table.stdout  # the hidden column says where it is
    wide = cli("--config", config, "recommend", columns=220)
    assert "idle_gpu-" in wide.stdout  # wide enough for the ID column
    as_csv = cli("--config", config, "recommend", "--format", "csv")
    assert as_csv.returncode == 0 and not as_csv.stdout.endswith("\n\n")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert tuple(rows[0]) == FLAT_COLUMNS  # the contract's flat columns
    assert all(Decimal(r["monthly_savings_usd"]) >= 0 and "None" not in r["change"] for r in rows)
    as_json = json.loads(cli("--config", config, "recommend", "--format", "json").stdout)
    assert {r["id"] for r in as_json} == {r["id"] for r in rows}
    assert set(as_json[0]) >= {"id", "kind", "current", "proposed", "evidence", "monthly_savings_usd"}


def test_the_dashboard_download_is_the_cli_csv(demo_home):
    from gpufinops.dashboard.recommendation_list import csv_bytes, recommendation_list
    from gpufinops.warehouse import db, queries

    with db.reader(demo_home / "data" / "gpufinops.duckdb") as con:
        stored = queries.recommendations(con)
    downloaded = csv_bytes(recommendation_list(stored)).decode()
    cli_csv = cli("--config", str(demo_home / "gpufinops.toml"), "recommend", "--format", "csv").stdout
    key = lambda text: sorted(csv.DictReader(io.StringIO(text)), key=lambda r: r["id"])  # noqa: E731
    assert list(csv.DictReader(io.StringIO(downloaded)).fieldnames) == list(FLAT_COLUMNS)
    assert key(downloaded) == key(cli_csv)  # same columns, same text, row for row
    assert "{" not in downloaded  # flat: no JSON blobs
    assert flat_csv(stored.to_dicts()) == downloaded


def test_ingest_list_is_aligned_and_sql_csv_has_no_blank_line(demo_home):
    config = str(demo_home / "gpufinops.toml")
    listing = cli("--config", config, "ingest", "list", columns=160)
    assert listing.returncode == 0
    lines = [line for line in listing.stdout.splitlines() if line.strip()]
    header, rows = lines[0], lines[2:]
    starts = [header.index(h) for h in ("Source", "Type", "Schedule", "Last run", "Status")]
    for row in rows:
        if not row.startswith(" "):  # a source's first line (a long watermark wraps onto the next)
            assert all(row[s - 1] == " " or s == 0 for s in starts) and row[starts[4] :].split()[0] in (
                "succeeded",
                "skipped",
                "failed",
            ), row
    sql = cli("--config", config, "sql", "SELECT source, rows FROM ingest_runs ORDER BY source", "--format", "csv")
    assert sql.returncode == 0 and sql.stdout.endswith("\n") and not sql.stdout.endswith("\n\n")
    assert sql.stdout.splitlines()[0] == "source,rows"
    assert (
        len(sql.stdout.splitlines())
        == 1 + query(demo_home / "data" / "gpufinops.duckdb", "SELECT count(*) FROM ingest_runs")[0][0]
    )


def test_progress_is_quiet_when_not_a_terminal(demo_home):
    from gpufinops.jobs import progress

    assert not progress.enabled(io.StringIO(), io.StringIO())
    result = cli("--config", str(demo_home / "gpufinops.toml"), "recommend", "--kind", "idle_gpu")
    assert "\x1b" not in result.stdout + result.stderr and result.stderr == ""


# A missing extra is simulated by an import hook that reports the package as absent, exactly what
# Python does when it is not installed (building venvs without each extra would take minutes).
HIDE = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {hidden!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Hide())
from gpufinops.interfaces.cli import main
sys.exit(main(sys.argv[1:]))
"""


def hidden(packages: set[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", HIDE.format(hidden=packages), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"},
    )


@pytest.mark.parametrize(
    "section, hide, package, extra",
    [
        (
            'type = "aws_cur"\nbucket = "acme-cur"\nregion = "us-east-1"\nendpoint_url = "http://127.0.0.1:9"',
            "boto3",
            "boto3",
            "aws",
        ),
        (
            'type = "gcp_billing_export"\nproject = "acme-billing"\ndataset = "billing"\ntable = "export"',
            "google",
            "google-cloud-bigquery",
            "gcp",
        ),
        ('type = "gcp_catalog"\nendpoint = "http://127.0.0.1:9"', "google", "google-cloud-billing", "gcp"),
    ],
)
def test_a_missing_cloud_extra_is_one_sentence_with_both_install_commands(tmp_path, section, hide, package, extra):
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"\n[sources.s]\n{section}\n')
    result = hidden({hide}, "--config", str(config), "ingest")
    assert result.returncode == 1
    message = [line for line in result.stderr.splitlines() if "not installed" in line]
    assert len(message) == 1, result.stderr
    assert f"needs {package}, which is not installed: install the '{extra}' extra" in message[0]
    assert f"`make install`, or `.venv/bin/pip install -e '.[{extra}]'`" in message[0]
    assert f"`pip install 'gpufinops[{extra}]'`" in message[0]
    assert "No module named" not in result.stderr


def test_the_dashboard_without_streamlit_says_how_to_install_it(tmp_path):
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"\n')
    result = hidden({"streamlit"}, "--config", str(config), "dashboard")
    assert result.returncode == 1
    assert "gpufinops dashboard needs streamlit, which is not installed: install the 'dashboard' extra" in result.stderr
    assert "`pip install 'gpufinops[dashboard]'`" in result.stderr and "Traceback" not in result.stderr
    doctor = hidden({"streamlit", "boto3"}, "--config", str(config), "doctor")
    words = " ".join(doctor.stdout.split())  # (the table wraps at the terminal's width: 80 without one)
    assert "warn  extra dashboard" in doctor.stdout and "make install" in words
    assert "skip  extra aws" in doctor.stdout  # not needed by this config: not a failure
    assert doctor.returncode == 0


def test_the_demo_summary_prints_only_commands_that_work(demo_home, monkeypatch):
    from gpufinops.ingest.core import extras
    from gpufinops.jobs import demo_summary

    out = io.StringIO()
    demo_summary._print_next(out, demo_home / "gpufinops.toml")
    exe = demo_summary.exe_name()  # runnable as printed: here `python -m gpufinops.interfaces.cli` (not on the PATH)
    lines = out.getvalue().splitlines()
    commands = [shlex.split(line) for line in lines if line.strip().startswith(exe + " ")]
    assert [c[-1] for c in commands] == ["recommend", "SELECT * FROM ingest_runs", "dashboard"]
    for args in commands[:-1]:
        assert cli(*args[len(shlex.split(exe)) :]).returncode == 0, args
    assert extras.installed("streamlit")  # the dashboard command starts (test_dashboard.py starts it for real)
    installed = extras.installed
    monkeypatch.setattr(extras, "installed", lambda module: module != "streamlit" and installed(module))
    out = io.StringIO()
    demo_summary._print_next(out, demo_home / "gpufinops.toml")  # without streamlit: the install step comes first
    lines = out.getvalue().splitlines()
    hint = next(i for i, line in enumerate(lines) if "the dashboard needs streamlit" in line)
    assert hint < next(i for i, line in enumerate(lines) if line.endswith(" dashboard"))
    assert "make install" in lines[hint] and "pip install 'gpufinops[dashboard]'" in lines[hint]
