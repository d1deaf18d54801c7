"""`make demo` prints the demo, not pip: the Makefile's installs send pip's output (the build backend's
among it) to .venv/install.log and show its tail only when an install fails.

The real installs take minutes and need a package index, so the Makefile runs here with a stand-in
``python3`` (``PYTHON=``): its venv and pip print hundreds of lines, its ``gpufinops`` prints one line.
What is checked is the Makefile's own plumbing, which is what decides what a user sees."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKE_PYTHON = """#!/bin/sh
# a stand-in python3: `-c` checks pass, `-m venv DIR` makes a venv of stand-ins, `-m pip` is noisy
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && cp "$(dirname "$0")/gpufinops" "$3/bin/gpufinops" ;;
  "-m pip") i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo "pip says line $i"; done
            echo "  Package would be ignored" >&2; [ -z "$FAIL_PIP" ] ;;
  *) exit 0 ;;
esac
"""
FAKE_GPUFINOPS = '#!/bin/sh\necho "the demo ran: $*"\n'


@pytest.fixture
def clone(tmp_path) -> Path:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'stand-in'\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("python3", FAKE_PYTHON), ("gpufinops", FAKE_GPUFINOPS)):
        (tools / name).write_text(text)
        (tools / name).chmod(stat.S_IRWXU)
    return tmp_path


def make_demo(clone: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")} | env
    return subprocess.run(
        ["make", "demo", f"PYTHON={clone / 'tools' / 'python3'}"],
        cwd=clone,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_demo_prints_the_demo_and_one_line_per_install(clone):
    run = make_demo(clone)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "the demo ran: demo --home demo\n"
    steps = run.stderr.splitlines()
    assert steps == [
        "pip install --upgrade pip (its output: .venv/install.log)",
        "pip install -e . (its output: .venv/install.log)",
        "pip install -e .[dashboard] (its output: .venv/install.log)",
    ]
    log = (clone / ".venv" / "install.log").read_text()
    assert log.count("pip says line 300") == 3 and "Package would be ignored" in log
    again = make_demo(clone)  # installed: nothing but the demo
    assert (again.returncode, again.stdout, again.stderr) == (0, "the demo ran: demo --home demo\n", "")


def test_a_failed_install_shows_the_log_and_stops(clone):
    run = make_demo(clone, FAIL_PIP="1")
    assert run.returncode != 0
    assert "the demo ran" not in run.stdout
    assert "pip says line 300" in run.stderr and "Package would be ignored" in run.stderr
    assert "pip install --upgrade pip failed: the whole log is .venv/install.log" in run.stderr
    assert "pip says line 200\n" not in run.stderr  # the tail, not the whole log
