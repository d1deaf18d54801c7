"""Benchmark: the dashboard's page loads in a real browser (Debian's chromium), on the demo, beside
Streamlit's own floor measured in the same run.

For each of ``--runs`` fresh servers: the first visit with an empty browser cache (the Overview,
which also downloads Streamlit's front-end bundle), then every page's first load by its sidebar
link (the page's cold load: its queries and charts for the first time on this server), and a full
reload of each page. The floor is a bare Streamlit app served the same way: its first visit (a page
of five small charts, empty cache), its switch to a page holding only a title, and full reloads of
both. Each figure is shown as a ratio to the matching floor. Medians over the runs; the 1-minute load average is
printed (on a shared machine wall time grows with it). Figures, not tests: exit 0.

    python -m bench.bench_dashboard_browser [--runs 3] [--home DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
FLOOR_APP = """import streamlit as st
st.set_page_config(page_title="floor", layout="wide")
st.navigation([st.Page("empty.py", title="Empty", default=True), st.Page("charts.py", title="Charts")]).run()
"""
FLOOR_EMPTY = 'import streamlit as st\nst.title("Empty")\n'
FLOOR_CHARTS = """import streamlit as st
st.title("Charts")
data = {"values": [{"x": i, "y": (i * 7) % 11} for i in range(30)]}
for _ in range(5):
    st.vega_lite_chart(spec={"data": data, "mark": "line", "encoding": {"x": {"field": "x", "type": "quantitative"},
                       "y": {"field": "y", "type": "quantitative"}}}, width="stretch")
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(cmd: list[str]):
    import httpx

    port = _port()
    proc = subprocess.Popen(
        [*cmd, "--server.port" if cmd[0].endswith("streamlit") else "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(1.0)  # the dashboard's cache warm-up runs as the server starts (a reader arriving now)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def measure_dashboard(browser, home: Path) -> dict[str, float]:
    from tests.test_dashboard_browser import PAGES, load, navigate

    figures = {}
    with server(
        [str(Path(sys.executable).parent / "gpufinops"), "--config", str(home / "gpufinops.toml"), "dashboard"]
    ) as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        figures["first visit: overview"] = load(page, url, "overview")
        for name in PAGES:
            if name != "overview":
                figures[f"cold: {name}"] = navigate(page, name)
        for name, (path, _) in PAGES.items():
            figures[f"full reload: {name}"] = load(page, f"{url}/{path}", name)
        context.close()
    return figures


def measure_floor(browser, app_dir: Path) -> dict[str, float]:
    wait = """([title, n]) => {
        const app = document.querySelector('[data-testid="stApp"]');
        if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
        if (![...document.querySelectorAll('h1')].some(h => h.textContent.trim().startsWith(title))) return false;
        const found = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
        return found.length >= n && found.every(c => c.querySelector('canvas, svg'));
    }"""
    figures = {}
    cmd = [
        str(Path(sys.executable).parent / "streamlit"),
        "run",
        str(app_dir / "app.py"),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    with server(cmd) as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        started = time.monotonic()
        page.goto(f"{url}/charts")
        page.wait_for_function(wait, arg=["Charts", 5], polling=25)
        figures["first visit: five small charts"] = time.monotonic() - started
        started = time.monotonic()
        page.locator('[data-testid="stSidebarNavLink"]', has_text="Empty").first.click()
        page.wait_for_function(wait, arg=["Empty", 0], polling=25)
        figures["cold: an empty page"] = time.monotonic() - started
        for title, path, n in (("Empty", "", 0), ("Charts", "charts", 5)):
            started = time.monotonic()
            page.goto(f"{url}/{path}")
            page.wait_for_function(wait, arg=[title, n], polling=25)
            figures[f"full reload: {title.lower()}"] = time.monotonic() - started
        context.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh servers to measure (default 3)")
    parser.add_argument("--home", help="a demo home (default: one built in bench/.cache/demo-browser)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print("bench_dashboard_browser: skipped, no /usr/bin/chromium")
        return 0
    home = Path(args.home) if args.home else REPO_ROOT / "bench" / ".cache" / "demo-browser"
    if not (home / "data" / "gpufinops.duckdb").exists():
        import io

        from gpufinops.jobs import demo

        demo.run(home, out=io.StringIO())
    from playwright.sync_api import sync_playwright

    from tests.test_dashboard_browser import BROWSER_ARGS

    runs: list[dict[str, float]] = []
    ours: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        app_dir = Path(tmp)
        for name, text in (("app.py", FLOOR_APP), ("empty.py", FLOOR_EMPTY), ("charts.py", FLOOR_CHARTS)):
            (app_dir / name).write_text(text)
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=BROWSER_ARGS)
        for _ in range(args.runs):
            dashboard = measure_dashboard(browser, home)
            ours = list(dashboard)
            runs.append({**dashboard, **measure_floor(browser, app_dir)})
        browser.close()
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(
        f"dashboard page loads in chromium, demo ({home}), median of {args.runs} fresh servers, "
        f"load average {os.getloadavg()[0]:.1f}:"
    )
    floors = {
        "first visit": median["first visit: five small charts"],
        "cold": median["cold: an empty page"],
        "full reload": median["full reload: charts"],
    }
    for key in ours:
        kind, seconds = key.split(":")[0], median[key]
        print(f"  {key:<32} {seconds:6.2f} s   {seconds / floors[kind]:4.1f}× Streamlit's floor ({floors[kind]:.2f} s)")
    print("  Streamlit's floor (a bare app in the same browser):")
    for key in ("first visit: five small charts", "cold: an empty page", "full reload: empty", "full reload: charts"):
        print(f"    {key:<30} {median[key]:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
