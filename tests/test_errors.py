"""The CLI's error funnel: every failure a user can cause is one sentence naming its cause, with the
right exit status, no traceback unless -v, no secret at any verbosity, and nothing created by a read."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import FOCUS_SAMPLE, query, table_digest

ROOT = Path(__file__).resolve().parent.parent


def gpufinops(*args: str, cwd: Path, env: dict | None = None, preexec=None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        preexec_fn=preexec,
        timeout=timeout,
    )


def one_sentence(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("gpufinops:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def focus_config(tmp_path: Path, db: Path | str) -> Path:
    export = tmp_path / "export"
    export.mkdir(exist_ok=True)
    shutil.copy(FOCUS_SAMPLE, export / "focus.csv")
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{db}"\n\n[sources.focus]\ntype = "focus_files"\npath = "{export}/*.csv"\n')
    return config


@pytest.mark.parametrize(
    "command",
    [
        ["recommend"],
        ["sql", "SELECT 1"],
        ["export", "json"],
        ["report", "weekly", "--week", "2026-W40"],
        ["ingest", "list"],
    ],
)
def test_a_read_never_creates_a_warehouse_or_its_folder(tmp_path, command):
    target = tmp_path / "nowhere" / "deeper" / "wh.duckdb"
    run = gpufinops("--db", str(target), *command, cwd=tmp_path)
    assert not (tmp_path / "nowhere").exists()
    if command == ["ingest", "list"]:  # lists the configured sources, with no run yet
        assert run.returncode == 0, run.stderr
        return
    sentence = one_sentence(run.stderr)
    assert run.returncode == 1 and f"{target} (set by --db) does not exist yet" in sentence, sentence


@pytest.mark.parametrize(
    "make, expected, code",
    [
        (lambda p: p.mkdir(), "is a directory, not a DuckDB file", 2),
        (lambda p: p.write_text("hello, I am a text file " * 50), "is not a DuckDB database file", 2),
    ],
)
def test_a_path_that_is_not_a_warehouse_is_exit_2_at_once(tmp_path, make, expected, code):
    target = tmp_path / "wh.duckdb"
    make(target)
    config = focus_config(tmp_path, target)
    for args in (["ingest"], ["sql", "SELECT 1"]):
        started = time.monotonic()
        run = gpufinops("--config", str(config), *args, cwd=tmp_path)
        sentence = one_sentence(run.stderr)
        assert run.returncode == code and expected in sentence and str(target) in sentence, sentence
        assert time.monotonic() - started < 15  # no 30 s / 5 s lock retry for an error that is not a lock


def test_a_warehouse_locked_by_another_writer_is_named_with_its_pid(tmp_path):
    target = tmp_path / "wh.duckdb"
    duckdb.connect(str(target)).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(target)!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        run = gpufinops("--db", str(target), "sql", "SELECT 1", cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
    sentence = one_sentence(run.stderr)
    assert run.returncode == 1 and f"warehouse {target} is locked by another process (pid {holder.pid})" in sentence


def test_a_read_only_warehouse_is_one_sentence(tmp_path):
    target = tmp_path / "wh.duckdb"
    config = focus_config(tmp_path, target)
    assert gpufinops("--config", str(config), "ingest", cwd=tmp_path).returncode == 0
    before = table_digest(target, "cost_line_items")
    (tmp_path / "export" / "focus.csv").touch()  # changed: the next run must write
    if os.geteuid() == 0:  # root ignores file modes: make the file immutable instead
        if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: no way to make a file read-only")
    else:
        target.chmod(0o444)
    try:
        run = gpufinops("--config", str(config), "ingest", cwd=tmp_path)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(target)], capture_output=True)
        target.chmod(0o644)
    sentence = one_sentence(run.stderr)
    assert run.returncode == 1 and f"warehouse {target} can not be opened for writing" in sentence, sentence
    assert table_digest(target, "cost_line_items") == before


def _small_files(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_is_reported_as_itself_not_as_a_failed_rollback(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: the write fails (EFBIG) where ENOSPC would, mid-load."""
    target = tmp_path / "wh.duckdb"
    config = focus_config(tmp_path, target)
    assert gpufinops("--config", str(config), "ingest", cwd=tmp_path).returncode == 0
    size = target.stat().st_size
    big = tmp_path / "export" / "more.csv"
    rows = FOCUS_SAMPLE.read_text().splitlines()
    big.write_text(
        "\n".join([rows[0]] + [r.replace("SunBird", f"SunBird{i}") for i in range(40) for r in rows[1:]]) + "\n"
    )
    run = gpufinops("--config", str(config), "ingest", cwd=tmp_path, preexec=_small_files(size + 64 * 1024))
    sentence = one_sentence(run.stderr)
    assert run.returncode == 1, run.stderr
    assert "rollback" not in sentence.lower() and "no transaction" not in sentence, sentence
    assert "File too large" in sentence or "No space left" in sentence or "disk" in sentence, sentence
    assert query(target, "SELECT count(*) FROM cost_line_items")[0][0] == len(rows) - 1  # the load left nothing


def test_verbose_tracebacks_are_scrubbed_of_secrets_and_url_credentials(tmp_path):
    secret = "tok-" + "7f3a9c" * 5
    config = tmp_path / "gpufinops.toml"
    config.write_text(
        f'[warehouse]\npath = "{tmp_path / "wh.duckdb"}"\n\n'
        f'[sources.dcgm]\ntype = "dcgm_exporter"\ntargets = ["http://ops:{secret}@127.0.0.1:9/metrics"]\n'
        f"retries = 1\ntimeout_s = 1\n\n"
        f'[sources.focus]\ntype = "focus_files"\npath = "{tmp_path}/{secret}/*.csv"\n\n'
        f'[[api.tokens]]\ntoken_env = "FUZZ_TOKEN"\nrole = "finance"\n'
    )
    for verbosity in ([], ["-v"], ["-vv"]):
        run = gpufinops("--config", str(config), *verbosity, "ingest", cwd=tmp_path, env={"FUZZ_TOKEN": secret})
        assert run.returncode == 1
        assert secret not in run.stderr and secret not in run.stdout, run.stderr
        assert ("Traceback" in run.stderr) == bool(verbosity) or "Traceback" not in run.stderr
    errors = query(tmp_path / "wh.duckdb", "SELECT string_agg(error, ' | ') FROM ingest_runs")[0][0]
    assert secret not in errors and "***" in errors


def test_an_internal_error_is_one_sentence_with_the_traceback_only_under_v(tmp_path, monkeypatch):
    from gpufinops.interfaces import cli

    config = focus_config(tmp_path, tmp_path / "wh.duckdb")

    def broken(cfg, args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(cli.COMMANDS, "sql", broken)
    import contextlib
    import io

    for verbose, traceback in (([], False), (["-v"], True)):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert cli.main(["--config", str(config), *verbose, "sql", "SELECT 1"]) == 1
        assert "internal error: ZeroDivisionError: division by zero" in err.getvalue()
        assert ("Traceback" in err.getvalue()) == traceback


def test_a_transaction_commits_its_block_or_leaves_nothing_and_keeps_the_error(tmp_path):
    """db.transaction (each derived table's configure): the block's writes land together, or not at all."""
    from gpufinops.warehouse import db

    target = tmp_path / "wh.duckdb"
    with db.transaction(target) as con:
        con.execute("CREATE TABLE kept (n INTEGER)")
        con.execute("INSERT INTO kept VALUES (1)")
    with pytest.raises(ZeroDivisionError):  # the block's own error, not a rollback's
        with db.transaction(target) as con:
            con.execute("INSERT INTO kept VALUES (2)")
            con.execute("CREATE TABLE lost (n INTEGER)")
            raise ZeroDivisionError("mid-recompute")
    assert query(target, "SELECT list(n) FROM kept")[0][0] == [1]
    assert query(target, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'lost'")[0][0] == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["recommend", "--team", "x" * 100_000], "argument --team: a name of 100,000 characters (at most 256): 'xxx"),
        (["report", "weekly", "--team", "x" * 100_000], "argument --team: a name of 100,000 characters"),
        (
            ["report", "weekly", "--team", "vi\rsion\x1b[31m"],
            "a value holding a control character: 'vi\\rsion\\x1b[31m'",
        ),
        (["recommend", "--kind", "y" * 5_000], "argument --kind: invalid choice: 'yyy"),
    ],
)
def test_a_hostile_argument_is_a_usage_error_cut_and_escaped(tmp_path, args, said):
    """A 100 kB --team (it was echoed whole and the command exited 0), a CR and ESC in an argument (echoed raw
    into stderr), argparse's own invalid-choice echo: exit 2, one line of at most 200 characters, escaped."""
    done = gpufinops(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-300:]
    error = [ln for ln in done.stderr.splitlines() if ": error: " in ln]
    assert len(error) == 1 and said in error[0], done.stderr[-500:]
    message = error[0].split(": error: ", 1)[1]
    assert len(message) <= 200 or "(choose from " in message, message  # the choices (the remedy) kept whole
    assert "\r" not in done.stderr and "\x1b" not in done.stderr, done.stderr
    assert "characters)" in message or "control character" in message, message  # a long value is cut
    assert len(done.stderr) < 1_000 and "Traceback" not in done.stderr


def test_an_ingest_error_line_is_cut_to_200_characters_keeping_file_row_and_value(tmp_path):
    """The CLI's ingest line had no cut (a deep path and a long value printed whole): now the funnel's."""
    import csv

    deep = tmp_path / ("d" * 120) / ("e" * 120)
    deep.mkdir(parents=True)
    config = focus_config(deep, tmp_path / "gpufinops.duckdb")
    bill = deep / "export" / "focus.csv"
    with open(bill, newline="") as f:
        rows = list(csv.reader(f))
    rows[2][rows[0].index("Tags")] = "{" + "n" * 500  # the second data row: no JSON, a long value
    with open(bill, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    done = gpufinops("--config", str(config), "ingest", cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-500:]
    line = one_sentence(done.stderr)
    assert len(line) <= len("gpufinops: ") + 200, line
    assert "focus.csv row 2: column Tags value '{nnn" in line and line.endswith("is not valid JSON"), line


def test_the_cli_keeps_the_products_remedy_whole_after_the_cut():
    from gpufinops.ingest.core import extras, scrub

    remedy = extras.install_hint("aws")
    sentence = f"cur: file /tmp/{'d' * 300}/x.csv: reading s3 needs boto3, which is not installed: {remedy}"
    shown = scrub.brief_keeping_remedy(sentence)
    assert shown.endswith(remedy) and "x.csv: reading s3 needs boto3" in shown and "d" * 100 not in shown, shown
