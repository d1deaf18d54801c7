"""The one file writer (jobs/files.py) under every command that writes a file: an ``--out`` that is the
warehouse (directly, through a symlink, a hard link, a relative path, or its write-ahead log), a
directory, a device, a FIFO or a socket is refused with exit 2 and one sentence, the warehouse and the
target untouched; regular files are replaced atomically; a temp file is removed on an exception and on
SIGTERM, and one left by ``kill -9`` is swept by the next export."""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from gpufinops.interfaces import cli
from gpufinops.jobs import files
from tests import cli_process

ROOT = Path(__file__).resolve().parent.parent


def writing_commands() -> list[list[str]]:
    """Every command (and positional choice) of the CLI's registry that takes ``--out``: a new one is covered."""
    argvs = []
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        if not any("--out" in a.option_strings for a in parser._actions):
            continue
        positional = [a for a in parser._actions if not a.option_strings and a.choices]
        choices = list(positional[0].choices or ()) if positional else [None]
        argvs += [[name] + ([c] if c else []) for c in choices]
    return argvs


COMMANDS = writing_commands()


def test_the_registry_has_the_commands_that_write():
    assert {" ".join(a) for a in COMMANDS} >= {"export json", "export focus", "export kueue", "report weekly", "init"}


def _socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a /dev/null of the test's own


TARGETS = (
    "directory",
    "fifo",
    "socket",
    "device",
    "warehouse",
    "relative warehouse",
    "symlink to the warehouse",
    "hard link to the warehouse",
    "the warehouse's wal",
)


def _make(target: str, tmp: Path, wh: Path) -> str:
    """The ``--out`` value of a target kind, made under ``tmp`` (the working directory)."""
    if target == "directory":
        (tmp / "folder").mkdir()
        return "folder"
    if target == "fifo":
        os.mkfifo(tmp / "pipe")
        return "pipe"
    if target == "socket":
        _socket(tmp / "s")
        return "s"
    if target == "device":
        _device(tmp / "null")
        return "null"
    if target == "relative warehouse":
        return os.path.join(".", wh.parent.name, "..", wh.parent.name, wh.name)
    if target == "symlink to the warehouse":
        (tmp / "link.parquet").symlink_to(wh)
        return "link.parquet"
    if target == "hard link to the warehouse":
        os.link(wh, tmp / "hard.csv")
        return "hard.csv"
    return str(wh) + (".wal" if target.endswith("wal") else "")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_target_that_is_not_a_plain_file_is_refused(tmp_path, feed_warehouse, monkeypatch, capsys, argv, target):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{feed_warehouse}"\n')
    monkeypatch.setenv("GPUFINOPS_CONFIG", str(config))  # init, which loads no config, protects its warehouse too
    out = _make(target, tmp_path, feed_warehouse)
    before, kind = _digest(feed_warehouse), os.lstat(out).st_mode if os.path.lexists(out) else None
    reader = os.open(out, os.O_RDONLY | os.O_NONBLOCK) if target == "fifo" else None  # a writer would not block
    try:
        status = cli.main(
            ["--config", str(config), *argv, "--out", out, "--force"]
            if argv == ["init"]
            else ["--config", str(config), *argv, "--out", out]
        )
    finally:
        if reader is not None:
            os.close(reader)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"gpufinops: --out {out}: "), err
    assert _digest(feed_warehouse) == before
    assert (os.lstat(out).st_mode if os.path.lexists(out) else None) == kind  # the target is what it was
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_regular_file_is_replaced_atomically_through_a_symlink(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text("old")
    real.chmod(0o640)
    (tmp_path / "link.yaml").symlink_to(real)
    files.write_text(tmp_path / "link.yaml", "new")
    assert (tmp_path / "link.yaml").is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    with pytest.raises(RuntimeError), files.replacing(real) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert real.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "real.yaml"]


def test_stale_temp_files_of_dead_processes_are_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    target = tmp_path / "focus.csv"
    stale, live = tmp_path / f".focus.csv.{dead.pid}.tmp", tmp_path / f".focus.csv.{os.getppid()}.tmp"
    other = tmp_path / f".other.csv.{dead.pid}.tmp"
    for p in (stale, live, other):
        p.write_text("x")
    files.write_text(target, "rows")
    assert not stale.exists() and live.exists() and other.exists() and target.read_text() == "rows"


@pytest.fixture(scope="module")
def big_warehouse(feed_template, tmp_path_factory) -> Path:
    """Enough cost lines that a CSV export takes a while to write (the signal lands mid-COPY); only read."""
    path = tmp_path_factory.mktemp("big") / "gpufinops.duckdb"
    shutil.copyfile(feed_template, path)
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT count(*) FROM cost_line_items").fetchone()[0]  # type: ignore[index]
    copies = max(0, 600_000 // max(rows, 1) - 1)
    con.execute(f"INSERT INTO cost_line_items SELECT c.* FROM cost_line_items c, range({copies})")
    con.close()
    return path


def _export_until_temp(tmp_path: Path, warehouse: Path, out: Path) -> tuple[subprocess.Popen, Path]:
    config = tmp_path / "gpufinops.toml"
    config.write_text(f'[warehouse]\npath = "{warehouse}"\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = cli_process.start(
        "--config", str(config), "export", "focus", "--out", str(out), env=env, stdout=subprocess.DEVNULL
    )
    temp = out.with_name(f".{out.name}.{proc.pid}.tmp")
    deadline = time.monotonic() + 60
    while not (temp.exists() and temp.stat().st_size > 0):
        assert proc.poll() is None, f"the export ended before its temp file was seen: {proc.stderr.read()!r}"  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.005)
    return proc, temp


def test_sigterm_mid_export_removes_the_temp_file(tmp_path, big_warehouse):
    out = tmp_path / "out" / "focus.csv"
    out.parent.mkdir()
    proc, temp = _export_until_temp(tmp_path, big_warehouse, out)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert not temp.exists() and not out.exists()


def test_kill_9_mid_export_leaves_a_temp_the_next_run_sweeps(tmp_path, big_warehouse):
    out = tmp_path / "out" / "focus.csv"
    out.parent.mkdir()
    proc, temp = _export_until_temp(tmp_path, big_warehouse, out)
    proc.kill()
    proc.wait(timeout=60)
    assert temp.exists() and not out.exists()
    config = str(tmp_path / "gpufinops.toml")
    status = cli.main(["--config", config, "export", "focus", "--from", "2199-01-01", "--out", str(out)])
    assert status == 0 and out.read_text().count("\n") == 1  # the header row: no charge is that late
    assert sorted(p.name for p in out.parent.iterdir()) == ["focus.csv"]
