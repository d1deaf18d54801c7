"""The `gpufinops` command as a child process, as a user runs it: for the tests of its exit status and
output, and of a process killed mid-run (a crash); the in-process runs use capsys in their own tests. Also
how a test ends a server process it started (an emulator, Prometheus, Azurite)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = (sys.executable, "-m", "gpufinops.interfaces.cli")


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``gpufinops ARGS`` run to its end from the repository root, its output captured as text."""
    return subprocess.run([*COMMAND, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def start(*args: str, env: dict[str, str] | None = None, stdout: int = subprocess.PIPE) -> subprocess.Popen:
    """``gpufinops ARGS`` started and left running (to be killed mid-run), its stderr piped."""
    env = {**os.environ} if env is None else env
    return subprocess.Popen([*COMMAND, *args], cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.PIPE)


def kill_when(stalled: threading.Event, proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` as a crash would, once the test's server holds its request (``stalled`` set)."""
    assert stalled.wait(120), proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def terminate(process: subprocess.Popen, grace_s: float) -> None:
    """``process`` asked to end (SIGTERM), killed if it has not within ``grace_s``, then reaped."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
