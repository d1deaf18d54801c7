"""The distribution installs under one name: a wheel built from the repository holds the package
`gpufinops` (its subpackages mapped from the top-level folders by pyproject's package-dir) and
nothing else at the top level, and installed into a fresh virtual environment it imports every
module and runs the CLI without the repository on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel and a virtual environment (~1 min)
ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("kernel", "ingest", "warehouse", "derived", "models", "dashboard", "jobs", "interfaces", "simulator")


def test_pyproject_lists_every_package_folder():
    """setuptools installs only the packages listed: a new subfolder left out would be missing from
    the wheel while every in-repository test still passed. Folders of data (templates, CSVs, the
    dashboard's page scripts) are listed too: setuptools ships their files only then."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        "gpufinops." + ".".join(p.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and git_tracked(p)
    }
    assert listed == on_disk


def git_tracked(path: Path) -> bool:
    """Untracked scratch files (a local .duckdb, an editor's backup) make no folder a package."""
    if not (ROOT / ".git").exists():
        return True
    rel = str(path.relative_to(ROOT))
    return subprocess.run(["git", "ls-files", "--error-unmatch", rel], cwd=ROOT, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ into the source tree and reuses it, so a module deleted
    # from the repository could still ride along in a wheel built in place.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # -v: the build backend's own output (its warnings among it) is shown, which --quiet would hide.
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if build.returncode != 0 and "Could not find a version that satisfies" in build.stderr:
        pytest.skip("no package index reachable for the build backend (setuptools): " + build.stderr.strip()[-200:])
    assert build.returncode == 0, build.stderr[-2000:]
    (out / "build.log").write_text(build.stdout + build.stderr)
    (path,) = out.glob("gpufinops-*.whl")
    return path


def test_the_build_gives_no_setuptools_warning(wheel):
    """A folder of files missing from [tool.setuptools] packages makes setuptools print a "Package
    would be ignored" banner on every install (six of them once preceded `make demo`)."""
    log = (wheel.parent / "build.log").read_text()
    assert "running bdist_wheel" in log  # the backend's output is in the log: an empty one proves nothing
    warnings = [line for line in log.splitlines() if "Warning" in line or "would be ignored" in line]
    assert not warnings, "\n".join(warnings[:20])


def test_the_wheel_holds_no_top_level_package_but_gpufinops(wheel):
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = archive.namelist()
    assert {t for t in tops if not t.endswith(".dist-info")} == {"gpufinops"}
    assert "gpufinops/warehouse/data/gpu_instance_types.csv" in names  # package data travels
    assert "gpufinops/warehouse/data/codecarbon_global_energy_mix.json" in names  # the vendored carbon tables too
    assert "gpufinops/dashboard/pages/overview.py" in names


def test_an_installed_wheel_imports_every_module_without_the_repository(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    # The dependencies come from this interpreter's site-packages, added by PYTHONPATH: .pth files are not
    # read from a PYTHONPATH entry, so this environment's editable install of the repository stays out.
    deps = [p for p in sys.path if p.endswith("site-packages")] or [sysconfig.get_paths()["purelib"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(deps)}
    script = (
        "import importlib, importlib.util, pkgutil, gpufinops\n"
        f"assert all(importlib.util.find_spec(n) is None for n in {FOLDERS!r}), 'a top-level product package'\n"
        "names = [m.name for m in pkgutil.walk_packages(gpufinops.__path__, 'gpufinops.')\n"
        "         if not m.name.startswith('gpufinops.dashboard.')]   # Streamlit scripts run their page on import\n"
        "for name in names: importlib.import_module(name)\n"
        "import gpufinops.dashboard.common\n"
        "print(len(names))\n"
    )
    run = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout.split()[-1]) > 100
    version = subprocess.run(
        [str(env_dir / "bin" / "gpufinops"), "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert version.returncode == 0 and version.stdout.startswith("gpufinops "), version.stderr[-2000:]
