"""``gpufinops dashboard``: the Streamlit dashboard as a child process that ends with this one.

* Listens on 127.0.0.1 unless ``[dashboard] auth = "oidc"`` (then on every interface, as Streamlit
  does); ``--host`` chooses. A trusted header (``auth = "header"``) is only trustworthy behind the
  proxy that sets it, so that mode refuses any other address than loopback.
* SIGTERM, SIGINT and SIGHUP sent to ``gpufinops dashboard`` are forwarded to Streamlit, which runs in
  its own process group (a terminal's Ctrl-C reaches it once, through us); on Linux the child also
  gets SIGTERM if this process dies without forwarding anything (``PR_SET_PDEATHSIG``), so the port
  is never left held by an orphan.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gpufinops.ingest.core import extras
from gpufinops.jobs.config import Config, ConfigError

LOOPBACK = "127.0.0.1"
APP = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
# Streamlit options: a served dashboard, not a development session (no file watcher polling the
# tree, no script rewriting for "magic" writes, no usage statistics).
STREAMLIT_OPTIONS = (
    "--server.headless",
    "true",
    "--browser.gatherUsageStats",
    "false",
    "--client.toolbarMode",
    "viewer",
    "--server.fileWatcherType",
    "none",
    "--runner.magicEnabled",
    "false",
)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def address(auth: str, host: str | None, environ: dict[str, str]) -> str | None:
    """Where the dashboard listens (None: Streamlit's default, every interface), for ``[dashboard] auth``."""
    chosen = host or environ.get("STREAMLIT_SERVER_ADDRESS") or (None if auth == "oidc" else LOOPBACK)
    if auth == "header" and chosen is not None and not _is_loopback(chosen):
        raise ConfigError(
            f'dashboard --host {chosen}: with dashboard.auth = "header" the dashboard listens on '
            "loopback only (the identity header is trusted from the proxy in front of it)"
        )
    if auth == "header" and chosen is None:
        chosen = LOOPBACK
    return chosen


def command(
    cfg: Config, port: int, host: str | None = None, environ: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str], str | None]:
    """The child's command line and environment, and the address it listens on."""
    environ = dict(os.environ if environ is None else environ)
    listen = address(cfg.dashboard.auth, host, environ)
    budgets = [b.to_dict() for b in cfg.alerts.settings.budgets]  # [[budgets]] and the [dashboard] aliases
    env = {
        **environ,
        "GPUFINOPS_DB": str(cfg.warehouse_path),
        "GPUFINOPS_DASHBOARD": json.dumps({**cfg.dashboard.to_section(), "budgets": budgets}),
    }
    cmd = [sys.executable, "-m", "gpufinops.dashboard.server", str(APP), "--server.port", str(port), *STREAMLIT_OPTIONS]
    if listen is not None:
        cmd += ["--server.address", listen]
    return cmd, env, listen


def port_in_use(host: str | None, port: int) -> str | None:
    """Why ``port`` cannot be listened on at ``host`` (None: every interface), or None when it can."""
    import socket

    family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Streamlit's server does
        try:
            probe.bind((host or "", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the forwarded signals still stop it
        pass


def run(cfg: Config, port: int, host: str | None = None) -> int:
    if not extras.installed("streamlit"):
        print(f"gpufinops: {extras.missing_message('gpufinops dashboard', 'streamlit', 'dashboard')}", file=sys.stderr)
        return 1
    cmd, env, listen = command(cfg, port, host)
    if cfg.dashboard.auth == "none" and (listen is None or not _is_loopback(listen)):
        print(
            f"gpufinops: WARNING: no [dashboard] auth and listening on {listen or 'every interface'}: "
            "anyone who reaches this port sees every team's spend",
            file=sys.stderr,
        )
    if (busy := port_in_use(listen, port)) is not None:  # before the URL: a URL printed must be ours
        print(
            f"gpufinops: dashboard: port {port} on {listen or 'every interface'} is in use ({busy}): "
            f"choose another with --port",
            file=sys.stderr,
        )
        return 2
    print(f"gpufinops: dashboard on http://{listen or '0.0.0.0'}:{port} (Ctrl-C stops it)", file=sys.stderr)
    child = subprocess.Popen(
        cmd, env=env, process_group=0, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None
    )
    previous = {sig: signal.signal(sig, lambda signum, _frame: _forward(child, signum)) for sig in FORWARDED}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _forward(child: subprocess.Popen, signum: int) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)
