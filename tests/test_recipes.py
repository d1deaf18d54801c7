"""The recipes of docs/architecture.md are true: a dummy *built-in* source, kind and provider, each added to a copy of
the repository by its recipe (the numbered list under *Add a source*, *Add a model kind*, *Add a provider*, each item
naming the paths it touches), is picked up by the readers of its registry with no other file edited, and the
generated docs tables (``make docs-tables``) change only pages the recipe names.

The copy is the repository's tracked files (without the large test data and screenshots) under a temporary folder;
a subprocess imports the product from it (a ``gpufinops`` package whose rooms are the copy's folders), so the
built-in discovery (``kernel.declared``: the modules declaring ``INGESTORS`` / ``MODEL_KINDS``, the providers'
``BUILTIN_PROVIDERS``) reads the copy exactly as it reads the repository.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("ingest", "kernel", "warehouse", "derived", "models", "dashboard", "jobs", "interfaces", "simulator")
LEFT_OUT = ("tests/data/", "docs/screenshots/")  # large, and no recipe reads them


def recipe(section: str, **names: str) -> set[str]:
    """The paths the recipe under ``## <section>`` names (each numbered item's parenthesised paths), with its
    placeholders (``<source>``, ``<kind>``, …) filled in."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    body = page.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    recipe_list = body.split("**The recipe**", 1)[1]
    paths: set[str] = set()
    for item in re.findall(r"^\d+\. \*\*[^*]+\*\* \(([^)]*)\)", recipe_list, flags=re.M):
        for path in re.findall(r"`([^`]+)`", item):
            for key, value in names.items():
                path = path.replace(f"<{key}>", value)
            assert "<" not in path, f"{section}: {path} has a placeholder the test does not fill"
            paths.add(path.rstrip("/"))
    assert paths, f"docs/architecture.md, {section}: no numbered recipe items naming paths"
    return paths


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The repository's tracked files (as in the working tree), and a ``gpufinops`` package over the copy's rooms."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    repo = tmp_path / "repo"
    for name in listed.split("\0"):
        if not name or name.startswith(LEFT_OUT) or not (ROOT / name).is_file():
            continue
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    package = tmp_path / "shim" / "gpufinops"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for room in ROOMS:
        (package / room).symlink_to(repo / room, target_is_directory=True)
    return repo


def snapshot(repo: Path) -> dict[str, str]:
    return {
        p.relative_to(repo).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in repo.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def touched(before: dict[str, str], after: dict[str, str]) -> set[str]:
    """Files added, changed or removed; a file under a new folder counts as that folder (``tests/data/x``)."""
    out = set()
    for name in set(before) | set(after):
        if before.get(name) != after.get(name):
            folder = next((f for f in ("tests/data/",) if name.startswith(f)), None)
            out.add("/".join(name.split("/")[:3]) if folder else name)
    return out


def run_in(repo: Path, code: str) -> str:
    """``code`` run by a fresh interpreter importing the product from the copy."""
    env = {"PYTHONPATH": f"{repo.parent / 'shim'}:{repo}", "PATH": "/usr/bin:/bin", "HOME": str(repo.parent)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=repo, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def docs_tables(repo: Path) -> None:
    """The recipe's docs step: ``make docs-tables`` in the copy."""
    run_in(repo, "from gpufinops.jobs import docs_tables; docs_tables.write()")


def test_the_recipe_parser_reads_each_item_s_paths():
    assert recipe("Add a source", room="aws", source="x") >= {"ingest/aws/x.py", "tests/test_x.py"}
    with pytest.raises(AssertionError, match="placeholder"):
        recipe("Add a source", room="aws")


def test_a_built_in_source_touches_exactly_its_recipe_s_files(copy):
    before = snapshot(copy)
    name = "dummy_bands"
    spec_module = (ROOT / "tests" / "dummy_source.py").read_text()
    spec_module = spec_module.replace('"tests.dummy_source:check"', f'"gpufinops.ingest.aws.{name}:check"')
    (copy / "ingest" / "aws" / f"{name}.py").write_text(spec_module)
    (copy / "tests" / f"test_{name}.py").write_text('"""The dummy bands (a recipe test\'s source)."""\n')
    (copy / "tests" / "data" / name).mkdir(parents=True)
    shutil.copy2(ROOT / "tests" / "data" / "dummy_source" / "bands.csv", copy / "tests" / "data" / name / "bands.csv")
    docs_tables(copy)
    assert touched(before, snapshot(copy)) == recipe("Add a source", room="aws", source=name)
    out = run_in(
        copy,
        f"""
        from gpufinops.ingest.core.registry import default_registry
        from gpufinops.interfaces import doctor_sources, init_choices
        registry = default_registry()
        meta = registry.get("{name}").meta
        assert doctor_sources.check_of("{name}", registry) is not None
        assert "{name}" in [q.type for q in init_choices.questions(registry)]
        print(meta.target_table, meta.freshness.lag_hours)
        """,
    )
    assert out.split() == ["spot_interruption_bands", "36.0"]
    assert f"| `{name}` |" in (copy / "docs" / "sources" / "index.md").read_text()
    assert f"`{name}`" in (copy / "docs" / "dashboard.md").read_text()


def test_a_built_in_kind_touches_exactly_its_recipe_s_files(copy):
    before = snapshot(copy)
    kind = "dummy_reserved"  # tests/dummy_kind.py's
    (copy / "models" / "kinds" / f"{kind}.py").write_text((ROOT / "tests" / "dummy_kind.py").read_text())
    (copy / "tests" / f"test_{kind}.py").write_text('"""The dummy reservation (a recipe test\'s kind)."""\n')
    (copy / "tests" / "data" / kind).mkdir(parents=True)
    (copy / "tests" / "data" / kind / "fleet.csv").write_text("resource_id,monthly_cost_usd\ni-dummy,1000\n")
    docs_tables(copy)
    assert touched(before, snapshot(copy)) == recipe("Add a model kind", kind=kind)
    out = run_in(
        copy,
        f"""
        from gpufinops.jobs.export import plan as export_plan
        from gpufinops.models import plans, registry
        from gpufinops.kernel import labels
        assert "{kind}" in [s.kind for s in registry.BUILTIN] and registry.KINDS[-1] == "{kind}"
        assert plans.family("{kind}") == "purchase" and export_plan.action("{kind}") is export_plan.ACTIONS["commit"]
        print(labels.label("{kind}"))
        """,
    )
    assert out.strip() == "Dummy reservation"
    assert f"| `{kind}` | Dummy reservation |" in (copy / "docs" / "models.md").read_text()


def provider_declaration() -> str:
    """tests/dummy_provider.py's ``ProviderSpec(...)``, its inventory the built-in data file the recipe names."""
    text = (ROOT / "tests" / "dummy_provider.py").read_text()
    block = text[text.index("ZETA = ProviderSpec(") + len("ZETA = ") :]
    block = block[: block.index("\n)\n") + 3]
    block = re.sub(r"inventory=.*\n", 'inventory=DATA / "zeta_gpu_sizes.csv",\n', block)
    return textwrap.indent(block.rstrip("\n") + ",\n", "    ")


def test_a_built_in_provider_touches_exactly_its_recipe_s_files(copy):
    before = snapshot(copy)
    declared = recipe("Add a provider", provider="zeta")
    declaration = next(p for p in declared if p.endswith(".py") and p.split("/")[0] in ROOMS)  # its declaration
    text = (copy / declaration).read_text()
    start = text.index("BUILTIN_PROVIDERS")
    end = text.index("\n)\n", start)  # the tuple's closing line
    (copy / declaration).write_text(text[:end] + "\n" + provider_declaration() + text[end:])
    inventory = next(p for p in declared if p.endswith(".csv"))
    shutil.copy2(ROOT / "tests" / "data" / "dummy_provider" / "inventory.csv", copy / inventory)
    (copy / "tests" / "test_zeta_inventory.py").write_text('"""Zeta\'s inventory (a recipe test\'s provider)."""\n')
    (copy / "docs" / "sources" / "zeta.md").write_text("# Zeta\n\nA recipe test's provider.\n")
    nav = (copy / "mkdocs.yml").read_text()
    anchor = "      - Azure: sources/azure.md\n"
    (copy / "mkdocs.yml").write_text(nav.replace(anchor, anchor + "      - Zeta: sources/zeta.md\n"))
    docs_tables(copy)
    assert touched(before, snapshot(copy)) == declared
    out = run_in(
        copy,
        """
        from gpufinops.warehouse import reference
        from gpufinops.kernel import labels, providers
        assert "zeta" in providers.cloud_codes() and providers.provider_code("Zeta Cloud") == "zeta"
        assert "zeta" in reference.inventory_providers()
        print(labels.label("zeta", "provider"))
        """,
    )
    assert out.strip() == "Zeta"
