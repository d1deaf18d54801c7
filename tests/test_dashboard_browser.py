"""A real browser on the real server: `gpufinops dashboard` on loopback, Debian's chromium driven by
playwright, every page loaded and waited for (its script finished, the status widget gone, and each
chart the page must show present *and* drawn), no exception box, a screenshot of each. The test
prints how long each page took to load (the first visit with an empty browser cache, each page's
first load by the sidebar as a reader moves on, and again). Timings are printed, not asserted:
they depend on the machine (``bench/bench_dashboard_browser.py`` measures them against Streamlit's
own floor). A second server in trusted-header mode, behind a loopback proxy that sets the header
(tests/header_proxy.py, as oauth2-proxy would), shows a lead only its team, and nothing at all to a
request without the header; SIGTERM to `gpufinops dashboard` ends its Streamlit child.

`docs/capture_screenshots.py` refreshes the screenshots in docs/screenshots/ (the documentation's pictures).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from tests.conftest import free_port
from tests.demo_cache import demo_copy
from tests.header_proxy import header_proxy

CHROMIUM = Path("/usr/bin/chromium")
PAGES = {
    "overview": ("", "Overview: GPU spend"),
    "team": ("team", "Team"),
    "fleet": ("fleet", "GPU fleet"),
    "unit_costs": ("unit_costs", "Unit costs"),
    "recommendations": ("recommendations", "Recommendations"),
    "spot": ("spot", "Spot market"),
    "onprem": ("onprem", "On-prem vs cloud"),
    "health": ("health", "Data health"),
}
NAV_LABELS = {
    "overview": "Overview",
    "team": "Team",
    "fleet": "GPU fleet",
    "unit_costs": "Unit costs",
    "recommendations": "Recommendations",
    "spot": "Spot market",
    "onprem": "On-prem vs cloud",
    "health": "Data health",
}
# The charts each page's first view draws on the demo: spend by provider, by team, by service, the GPU
# share; the Team page without a by-team chart; the fleet heatmap; spot prices; on-prem vs cloud cost per
# used GPU-hour.
CHARTS = {
    "overview": 4,
    "team": 3,
    "fleet": 1,
    "unit_costs": 0,
    "recommendations": 0,
    "spot": 1,
    "onprem": 1,
    "health": 0,
}
# The other views of a page (dashboard/views.py), each a screen of its own by its URL (?view=…), and the
# charts each draws: the month forecast, the team's fleet heatmap, idle GPU cost per team and GPU model,
# the top finding's utilisation and memory, spot interruption bands.
VIEW_CHARTS = {
    ("overview", "Forecast"): 1,
    ("team", "Forecast"): 1,
    ("team", "GPU fleet"): 1,
    ("fleet", "Idle GPUs"): 1,
}


def screens() -> dict[str, tuple[str, str, int]]:
    """Every screen a reader can open: each page (its first view) and each other view of a page, as
    ``name: (URL path, title, charts)``; a view's name is ``page: View``."""
    from gpufinops.dashboard import views

    out = {name: (path, title, CHARTS[name]) for name, (path, title) in PAGES.items()}
    for page, names in views.PAGES.items():
        for view in names[1:]:
            out[f"{page}: {view}"] = (views.link(page, view), PAGES[page][1], VIEW_CHARTS.get((page, view), 0))
    return out


SCREENS = screens()
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
LEAD_TEAM = "vision"
LEAD = "lead@example.com"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("demo")
    demo_copy(tmp_path_factory, home, days=14)
    return home


@contextlib.contextmanager
def dashboard_server(config: Path, tmp_path: Path) -> Iterator[str]:
    """`gpufinops --config … dashboard --port P` on loopback; yields its URL, stops its process group."""
    port = free_port()
    env = {**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "HOME": str(tmp_path)}
    log = (tmp_path / f"dashboard-{port}.log").open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpufinops"), "--config", str(config), "dashboard", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # a loaded machine (load 10 on 2 cores) took over 90 s
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
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=BROWSER_ARGS)
        yield chromium
        chromium.close()


# Streamlit shows its running status widget only after a short delay, so "no widget" alone can be
# read before the run starts: also require the app's own script state to say the run finished, the
# page's own title, and at least the charts the page must show, each drawn (a canvas or an SVG with
# a size). `every()` of an empty list is true, so the count comes first.
WAIT_FOR_RENDER = """([title, charts]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stStatusWidgetRunningIcon"], [data-testid="stStatusWidgetRunningManIcon"]'))
        return false;                                                              // status widget still up
    if (![...document.querySelectorAll('h1')].some(h => h.textContent.trim().startsWith(title))) return false;
    const found = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
    if (found.length < charts) return false;                                      // not mounted yet
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;       // an element's code still loading
    if (![...document.querySelectorAll('[data-testid="stDataFrame"]')].every(g => g.querySelector('canvas')))
        return false;                                                              // a table's grid not drawn yet
    return found.every(c => [...c.querySelectorAll('canvas, svg')].some(
        e => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0));  // every chart drawn
}"""


def wait_rendered(page, name: str, timeout_ms: int = 90_000) -> float:
    """Until screen ``name`` is finished and drawn; returns the seconds it took from now."""
    started = time.monotonic()
    _, title, charts = SCREENS[name]
    page.wait_for_function(WAIT_FOR_RENDER, arg=[title, charts], timeout=timeout_ms, polling=25)
    return time.monotonic() - started


def load(page, url: str, name: str) -> float:
    """Open a page by its URL and wait until it is finished and drawn; the seconds it took."""
    started = time.monotonic()
    page.goto(url)
    wait_rendered(page, name)
    return time.monotonic() - started


def navigate(page, name: str) -> float:
    """Move to a page by its sidebar link, as a reader does; the seconds until it is finished and drawn."""
    started = time.monotonic()
    page.locator('[data-testid="stSidebarNavLink"]', has_text=NAV_LABELS[name]).first.click()
    wait_rendered(page, name)
    return time.monotonic() - started


def print_timings(timings: dict[str, dict[str, float]], capsys) -> None:
    with capsys.disabled():
        print("\ndashboard page loads on the demo (seconds; chromium on this machine, no assertion):")
        print(f"  {'page or view':<32} {'first load':>10} {'again':>7} {'full reload':>12}")
        for name, t in timings.items():
            again = f"{t['again']:>7.2f}" if "again" in t else f"{'–':>7}"
            print(f"  {name:<32} {t['first']:>10.2f} {again} {t['reload']:>12.2f}")


def test_every_page_renders_in_a_real_browser(demo_home, browser, tmp_path, capsys):
    timings: dict[str, dict[str, float]] = {}
    with dashboard_server(demo_home / "gpufinops.toml", tmp_path) as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        timings["overview"] = {"first": load(page, url, "overview")}  # an empty browser cache: Streamlit's bundle too
        for name in PAGES:
            if name != "overview":
                timings[name] = {"first": navigate(page, name)}
            assert page.locator('[data-testid="stException"]').count() == 0, name
            assert page.get_by_text("No authentication is configured").count() == 1, name
            drawn = page.locator('[data-testid="stVegaLiteChart"]').count()
            assert drawn >= CHARTS[name], (name, drawn)
            shot = tmp_path / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            if name == "overview":
                assert page.locator('[data-testid="stMetric"]').count() >= 4
        for name in PAGES:
            timings[name]["again"] = navigate(page, name)
        for name, (path, _, charts) in SCREENS.items():
            if name not in timings:  # a page's other view: opened by its URL (?view=…), never by the sidebar
                timings[name] = {"first": load(page, f"{url}/{path}", name)}
            timings[name]["reload"] = load(page, f"{url}/{path}", name)
            assert page.locator('[data-testid="stException"]').count() == 0, name
            assert page.locator('[data-testid="stVegaLiteChart"]').count() >= charts, name
        context.close()
    print_timings(timings, capsys)


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
    with dashboard_server(config, tmp_path) as url, header_proxy(url, "X-Forwarded-Email", LEAD) as proxied:
        # the proxy sets the header on every request, the WebSocket upgrade among them (a browser's
        # extra_http_headers do not reach the upgrade in every Chromium); what the browser claims is dropped
        lead = browser.new_context(extra_http_headers={"X-Forwarded-Email": "someone-else@example.com"})
        page = lead.new_page()
        load(page, f"{proxied}/recommendations", "recommendations")
        assert page.get_by_text(f"{LEAD} (lead)").count() == 1
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


# What a reader sees on a page: the main area, the sidebar and every rendered cell of every table
# (the grid draws on a canvas; its cells are also in an accessible table), without icons (their
# text is a ligature name such as `show_chart`) and without `code` spans (a config key the page
# tells the reader to set, such as `resource_map`, is shown as the reader must type it).
VISIBLE_TEXT = """() => {
    const parts = [];
    for (const root of document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')) {
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const parent = node.parentElement;
            if (parent && !parent.closest('code, [data-testid="stIconMaterial"], style, script')) parts.push(node.textContent);
        }
    }
    return parts.join('\\n');
}"""
SNAKE_TOKEN = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def config_names(config: Path) -> set[str]:
    """Names the reader wrote in the config (source names and types), and the sources the ingest ledger
    holds (the demo loads its simulated storage listing as a source of its own): shown as written."""
    import tomllib

    raw = tomllib.loads(config.read_text())
    sources = raw.get("sources", {})
    names = set(sources) | {s.get("type", "") for s in sources.values()}
    warehouse = Path(raw.get("warehouse", {}).get("path", "data/gpufinops.duckdb"))
    warehouse = warehouse if warehouse.is_absolute() else config.parent / warehouse
    with duckdb.connect(str(warehouse), read_only=True) as con:
        ledger = con.execute("SELECT DISTINCT source, source_type FROM ingest_runs").fetchall()
    return names | {n for row in ledger for n in row if n}


def raw_codes(text: str, allowed: set[str]) -> set[str]:
    """Whole words of ``text`` that are snake_case codes (an id such as ``idle_gpu-bce7…`` is no code)."""
    words = (w.strip(".,;:()[]\"'·*") for w in text.split())
    return {w for w in words if SNAKE_TOKEN.match(w) and w not in allowed}


def test_no_page_shows_a_raw_code_or_timestamp(demo_home, browser, tmp_path):
    allowed = config_names(demo_home / "gpufinops.toml")
    found: dict[str, tuple[set[str], list[str]]] = {}
    with dashboard_server(demo_home / "gpufinops.toml", tmp_path) as url:
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        page = context.new_page()
        for name, (path, title, _) in SCREENS.items():
            load(page, f"{url}/{path}", name)
            page.wait_for_function(  # the tables' grids mounted: their cells are what is read
                """() => ![...document.querySelectorAll('[data-testid="stDataFrame"]')].some(d => d.offsetParent)
                       || document.querySelector('[data-testid="stDataFrame"] table td')""",
                timeout=60_000,
            )
            page.wait_for_timeout(500)  # the other grids of the page paint in the same frame or the next
            text = page.evaluate(VISIBLE_TEXT)
            assert len(text) > 300 and title in text, name  # the page and its tables were read
            codes, stamps = raw_codes(text, allowed), ISO_TIME.findall(text)
            if codes or stamps:
                found[name] = (codes, stamps)
        context.close()
    assert not found, f"raw codes or ISO timestamps in the pages' visible text: {found}"


def test_the_browser_tests_cover_every_page_the_app_registers():
    """A page added to dashboard/app.py is rendered, timed and read for raw codes here without new code."""
    app = (Path(__file__).parents[1] / "dashboard" / "app.py").read_text()
    registered = re.findall(r'st\.Page\(PAGES / "(\w+)\.py", title="([^"]+)"', app)
    assert registered and dict(registered) == NAV_LABELS and set(PAGES) == set(CHARTS) == set(NAV_LABELS)
    from gpufinops.dashboard import views

    # every view of a page is a screen here, and the charts named for a view are of a view that exists
    assert set(views.PAGES) <= set(PAGES)
    assert all(view in views.PAGES[page][1:] for page, view in VIEW_CHARTS)
    assert {n for n in SCREENS if ": " in n} == {f"{p}: {v}" for p, names in views.PAGES.items() for v in names[1:]}


def test_raw_code_detector_can_fail():
    assert raw_codes("Kind idle_gpu · id idle_gpu-bce76a05 · Idle GPU", set()) == {"idle_gpu"}
    assert raw_codes("source aws_cur (always_idle)", {"aws_cur"}) == {"always_idle"}
    assert ISO_TIME.findall("newest 2026-09-02T00:00:00+00:00")


# What a reader at 1440 px must never meet (issue: cut values, placeholders, provider codes). In the DOM: an
# element whose text overflows its box (``scrollWidth > clientWidth``) with no title or tooltip to read it
# whole. In a table (a canvas grid; its accessible table holds the cells the grid draws): a column past the
# grid's right edge (fewer header cells rendered than the grid has columns: the reader must scroll to see
# it), or a cell whose whole text is a placeholder or a provider's code.
CUT_AND_PLACEHOLDERS = """() => {
    const bad = [];
    const main = document.querySelector('[data-testid="stMain"]');
    for (const el of main.querySelectorAll('*')) {
        if (el.closest('code, pre, [data-testid="stDataFrame"], [data-testid="stVegaLiteChart"], svg, canvas'))
            continue;
        if (!el.offsetParent || !el.textContent.trim() || el.children.length) continue;   // a leaf with text
        const style = getComputedStyle(el);
        const clips = style.overflowX !== 'visible' || style.textOverflow === 'ellipsis';
        const titled = el.closest('[title], [data-testid="stTooltipHoverTarget"]');
        if (clips && el.scrollWidth > el.clientWidth + 1 && !titled) bad.push(`cut: ${el.textContent.trim()}`);
    }
    return bad;
}"""
GRID_PROBLEMS = """(grid) => {
    const bad = [];
    {
        const table = grid.querySelector('table[role="grid"]');
        const columns = Number(table.getAttribute('aria-colcount'));
        const heads = [...table.querySelectorAll('th')].map(th => th.textContent.trim());
        if (heads.length < columns) bad.push(`columns past the edge: ${columns - heads.length} after ${heads.join(' | ')}`);
        const head = {};
        for (const th of table.querySelectorAll('th')) head[th.getAttribute('aria-colindex')] = th.textContent.trim();
        for (const td of table.querySelectorAll('td')) {
            const text = td.textContent.trim(), column = head[td.getAttribute('aria-colindex')];
            if (/^(None|NaN|nan|null)$/.test(text)) bad.push(`cell: ${text} in ${column}`);
            // a provider's code; a source's name or type is the reader's config word, shown as written
            if (/^(aws|gcp|azure|onprem)$/.test(text) && !['Source', 'Type'].includes(column))
                bad.push(`provider code: ${text} in ${column}`);
        }
    }
    return bad;
}"""
PLACEHOLDER = re.compile(r"\b(None|NaN|null)\b")
GRID_HEADS = """(grid) => [...grid.querySelectorAll('table[role="grid"] th')].map(th => th.textContent.trim())"""
# The Overview's anomaly line items: what moved each anomaly, in columns a 1440 px window shows whole
ANOMALY_ITEM_HEADS = {"Resource", "Service", "Change (USD)"}


def test_no_value_is_cut_or_a_placeholder_at_1440_px(demo_home, browser, tmp_path):
    """Every page at 1440 px: nothing cut without a tooltip, no columns past a table's edge, no None / NaN /
    null and no provider code as a value. The grids are waited for (mounted, their header cells drawn). The
    Overview's anomaly line items are among the columns drawn, not past the edge."""
    found: dict[str, list[str]] = {}
    heads: dict[str, list[set[str]]] = {}
    with dashboard_server(demo_home / "gpufinops.toml", tmp_path) as url:
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        page = context.new_page()
        for name, (path, _, _) in SCREENS.items():
            load(page, f"{url}/{path}", name)
            page.wait_for_timeout(500)
            problems = page.evaluate(CUT_AND_PLACEHOLDERS)
            grids = page.locator('[data-testid="stDataFrame"]')
            for i in range(grids.count()):
                grid = grids.nth(i)
                if not grid.is_visible():
                    continue
                grid.scroll_into_view_if_needed()  # the grid mounts its cells when it is in view: wait for them
                grid.locator('table[role="grid"] th').first.wait_for(state="attached", timeout=60_000)
                problems += grid.evaluate(GRID_PROBLEMS)
                heads.setdefault(name, []).append(set(grid.evaluate(GRID_HEADS)))
            problems += [f"text: {m}" for m in PLACEHOLDER.findall(page.evaluate(VISIBLE_TEXT))]
            if problems:
                found[name] = problems
        context.close()
    assert not found, f"cut values, placeholders or provider codes at 1440 px: {found}"
    anomalies = heads.get("overview: Anomalies", [])
    assert any(ANOMALY_ITEM_HEADS <= drawn for drawn in anomalies), anomalies


def test_the_cut_and_placeholder_checks_can_fail(browser):
    """The checks above on a page built to fail them: a clipped text without a title, a grid with a column
    past its edge, a provider code and a None as cells (a source's own name as written is allowed)."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_content(
        """<div data-testid="stMain">
             <p style="width: 40px; overflow: hidden; white-space: nowrap">a value far wider than its box</p>
             <p style="width: 40px; overflow: hidden; white-space: nowrap" title="whole">read whole on hover</p>
             <div data-testid="stDataFrame"><table role="grid" aria-colcount="4">
               <thead><tr><th aria-colindex="1">Provider</th><th aria-colindex="2">Source</th>
                          <th aria-colindex="3">Cost</th></tr></thead>
               <tbody><tr><td aria-colindex="1">gcp</td><td aria-colindex="2">onprem</td>
                          <td aria-colindex="3">None</td></tr></tbody></table></div>
           </div>"""
    )
    assert page.evaluate(CUT_AND_PLACEHOLDERS) == ["cut: a value far wider than its box"]
    grid = page.evaluate(GRID_PROBLEMS, page.query_selector('[data-testid="stDataFrame"]'))
    assert grid == [
        "columns past the edge: 1 after Provider | Source | Cost",
        "provider code: gcp in Provider",
        "cell: None in Cost",
    ], grid
    page.close()
