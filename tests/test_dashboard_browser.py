"""A real browser on the real server: `gpufinops dashboard` on loopback, Debian's chromium driven by
playwright, every page loaded and waited for (Streamlit's status widget gone, charts drawn), no
exception box, a screenshot of each. A second server in trusted-header mode shows a lead only its
team, and nothing at all to a request without the header.

Set GPUFINOPS_UPDATE_SCREENSHOT=1 to also refresh docs/dashboard-overview.png (the README's picture).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[1]
PAGES = {"overview": ("", "Overview: GPU spend"), "team": ("team", "Team"), "fleet": ("fleet", "GPU fleet"),
         "recommendations": ("recommendations", "Recommendations"), "spot": ("spot", "Spot market"),
         "onprem": ("onprem", "On-prem vs cloud"), "health": ("health", "Data health")}
LEAD_TEAM = "vision"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    from jobs import demo

    home = tmp_path_factory.mktemp("demo")
    assert demo.run(home, days=14, out=io.StringIO()) == 0
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dashboard_server(config: Path, tmp_path: Path) -> Iterator[str]:
    """`gpufinops --config … dashboard --port P` on loopback; yields its URL, stops its process group."""
    port = _free_port()
    env = {**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "HOME": str(tmp_path)}
    log = (tmp_path / f"dashboard-{port}.log").open("w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "gpufinops"), "--config", str(config),
                             "dashboard", "--port", str(port)], env=env, cwd=tmp_path, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / f"dashboard-{port}.log").read_text()
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the dashboard did not come up"
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # our own session: gpufinops and its streamlit child
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


# Streamlit shows its running status widget only after a short delay, so "no widget" alone can be
# read before the run starts: also require the app's own script state to say the run finished.
WAIT_FOR_RENDER = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stStatusWidgetRunningIcon"], [data-testid="stStatusWidgetRunningManIcon"]'))
        return false;                                                              // status widget still up
    const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
    return charts.every(c => c.querySelector('canvas, svg'));                      // every chart drawn
}"""


def load(page, url: str, title: str) -> None:
    """Open a page and wait until Streamlit has finished it: its title shown, the status widget gone."""
    page.goto(url)
    page.get_by_role("heading", name=title).first.wait_for(timeout=90_000)
    page.wait_for_function(WAIT_FOR_RENDER, timeout=90_000)


def test_every_page_renders_in_a_real_browser(demo_home, browser, tmp_path):
    with dashboard_server(demo_home / "gpufinops.toml", tmp_path) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for name, (path, title) in PAGES.items():
            load(page, f"{url}/{path}", title)
            assert page.locator('[data-testid="stException"]').count() == 0, name
            assert page.get_by_text("No authentication is configured").count() == 1, name
            shot = tmp_path / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if name == "overview":
                assert page.locator('[data-testid="stMetric"]').count() >= 4
                # the frontend mounts the charts a moment after the script has finished: wait for them
                page.locator('[data-testid="stVegaLiteChart"]').nth(3).wait_for(timeout=60_000)
                assert page.locator('[data-testid="stVegaLiteChart"]').count() >= 4
                if os.environ.get("GPUFINOPS_UPDATE_SCREENSHOT"):
                    page.screenshot(path=str(REPO / "docs" / "dashboard-overview.png"))
        page.close()


HEADER_CONFIG = """
[warehouse]
path = "{warehouse}"

[dashboard]
auth = "header"
header = "X-Forwarded-Email"

[[dashboard.users]]
email = "lead@example.com"
role = "lead"
teams = ["{team}"]
"""


def test_a_lead_behind_the_proxy_sees_only_its_team(demo_home, browser, tmp_path):
    config = tmp_path / "gpufinops.toml"
    config.write_text(HEADER_CONFIG.format(warehouse=demo_home / "data" / "gpufinops.duckdb", team=LEAD_TEAM))
    with dashboard_server(config, tmp_path) as url:
        lead = browser.new_context(extra_http_headers={"X-Forwarded-Email": "lead@example.com"})
        page = lead.new_page()
        load(page, f"{url}/recommendations", "Recommendations")
        assert page.get_by_text("lead@example.com (lead)").count() == 1
        assert page.locator('[data-testid="stException"]').count() == 0
        body = page.locator("body").inner_text()
        assert "research" not in body and "nlp" not in body  # other teams' findings
        page.screenshot(path=str(tmp_path / "lead-recommendations.png"), full_page=True)
        lead.close()
        anonymous = browser.new_page()
        anonymous.goto(url)
        anonymous.get_by_text("Access denied").wait_for(timeout=90_000)
        assert anonymous.locator('[data-testid="stMetric"]').count() == 0
        anonymous.close()
