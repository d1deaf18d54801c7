"""Refresh docs/screenshots/: every dashboard page (real Chromium screenshots) and the terminal screens a
new user meets (demo summary, recommend, ingest list, doctor), rendered from their real output.

    .venv/bin/python docs/capture_screenshots.py [--home demo]

Needs Debian's chromium at /usr/bin/chromium and playwright (the test extra). The demo home is
rebuilt from scratch first, so its summary is a first run's (same seed, same numbers; decisions
recorded in its warehouse are lost). Terminal output is captured at 120 columns with colour, kept
as ``.txt`` beside its ``.png`` (rich's SVG export, rasterised by vl-convert).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "screenshots"
GPUFINOPS = str(Path(sys.executable).parent / "gpufinops")
WIDTH = 120
sys.path.insert(0, str(REPO))
import gpufinops.models.registry  # noqa: E402,F401  (the kinds' labels)
from gpufinops.dashboard import views  # noqa: E402
from gpufinops.kernel.labels import label as kind_label  # noqa: E402
from tests.test_dashboard_browser import BROWSER_ARGS, CHARTS, CHROMIUM, PAGES, WAIT_FOR_RENDER  # noqa: E402


def run(*args: str, home: Path, shown: str | None = None) -> str:
    env = {
        **os.environ,
        "COLUMNS": str(WIDTH),
        "FORCE_COLOR": "1",
        "GPUFINOPS_NO_PROGRESS": "1",
        "NO_GCE_CHECK": "True",
    }
    done = subprocess.run([GPUFINOPS, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    # the home as the command shown names it (``demo``, or ``.``), not where this machine keeps it
    if shown is None:
        shown = os.path.relpath(home, REPO) if home.is_relative_to(REPO) else home.name
    return (done.stdout + done.stderr).replace(str(home), shown)


def terminal_png(name: str, command: str, text: str) -> None:
    """``text`` (with its colours) as a terminal window: rich's SVG export, rasterised by vl-convert."""
    import vl_convert
    from rich.console import Console
    from rich.terminal_theme import MONOKAI
    from rich.text import Text

    console = Console(record=True, width=WIDTH, file=open(os.devnull, "w"), force_terminal=True)
    console.print(Text(f"$ {command}", style="bold"))
    console.print(Text.from_ansi(text))
    (OUT / f"{name}.txt").write_text(console.export_text(clear=False))
    svg = console.export_svg(title=command[:90], theme=MONOKAI)
    from PIL import Image  # Pillow comes with streamlit; a terminal needs few colours

    image = Image.open(io.BytesIO(vl_convert.svg_to_png(svg, scale=1.0))).convert("RGB")
    image.quantize(colors=32, method=Image.Quantize.MEDIANCUT).save(OUT / f"{name}.png", optimize=True)


@contextlib.contextmanager
def dashboard(config: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [GPUFINOPS, "--config", str(config), "dashboard", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    import httpx

    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def full_page(page, path: Path) -> None:
    """The whole page: the viewport grown to the height of Streamlit's scrolling main area."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": min(max(height, 900), 6000)})
    time.sleep(0.8)  # charts re-fit to the new height
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": 1400, "height": 900})


def dashboard_pngs(home: Path, browser) -> None:
    with dashboard(home / "gpufinops.toml") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for name, (path, title) in PAGES.items():
            page.goto(f"{url}/{path}")
            page.wait_for_function(WAIT_FOR_RENDER, arg=[title, CHARTS[name]], timeout=90_000)
            full_page(page, OUT / f"dashboard-{name}.png")
        page.goto(f"{url}/{views.link('recommendations', 'Detail')}")
        page.wait_for_function(WAIT_FOR_RENDER, arg=["Recommendations", 2], timeout=90_000)
        for kind in ("gpu_count", "spot_mix", "gpu_type", "onprem_vs_cloud"):
            page.locator('[data-testid="stSelectbox"]').filter(has_text="Finding").click()
            option = page.get_by_role("option").filter(has_text=f"· {kind_label(kind, 'kind')} ·")  # by its label
            if option.count() == 0:  # the demo has none of this kind now
                page.keyboard.press("Escape")
                continue
            option.first.click()
            page.wait_for_function(WAIT_FOR_RENDER, arg=["Recommendations", 0], timeout=90_000)
            time.sleep(1.0)
            full_page(page, OUT / f"dashboard-recommendation-{kind.replace('_', '-')}.png")
        page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=str(REPO / "demo"), help="the demo home (default: ./demo)")
    home = Path(parser.parse_args().home).resolve()
    OUT.mkdir(parents=True, exist_ok=True)
    config = home / "gpufinops.toml"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=BROWSER_ARGS)
        shutil.rmtree(home / "data", ignore_errors=True)  # a first run's summary (same seed: the same numbers)
        terminal_png("demo-summary", "make demo", run("demo", "--home", str(home), home=home))
        terminal_png(
            "recommend",
            "gpufinops --config demo/gpufinops.toml recommend",
            run("--config", str(config), "recommend", home=home),
        )
        terminal_png(
            "ingest-list",
            "gpufinops --config demo/gpufinops.toml ingest list",
            run("--config", str(config), "ingest", "list", home=home),
        )
        terminal_png(
            "doctor-demo",
            "gpufinops --config demo/gpufinops.toml doctor",
            run("--config", str(config), "doctor", home=home),
        )
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "gpufinops.toml"
            run(
                "init",
                "--out",
                str(fresh),
                "--aws-cur-bucket",
                "acme-cur",
                "--aws-cur-prefix",
                "cur2/acme",
                "--bigquery-table",
                "acme-billing.billing.gcp_billing_export_resource_v1_01A2B3",
                "--dcgm-target",
                "http://127.0.0.1:9400/metrics",
                "--nvidia-smi-path",
                "logs/*.csv",
                home=home,
            )
            terminal_png(
                "doctor-new-config",
                "gpufinops --config gpufinops.toml doctor   # just after init, no credentials",
                run("--config", str(fresh), "doctor", "--timeout", "3", home=Path(tmp), shown="."),
            )
        dashboard_pngs(home, browser)
        browser.close()
    print(f"screenshots in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
